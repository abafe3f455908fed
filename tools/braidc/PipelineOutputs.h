// braidc's pipeline outputs: the schedule as JSON (--dump-schedule), the
// simulator's report (--simulate) and the timeline (--schedule-svg), from
// the module's braid.partition and braid.schedule. The simulator's costs
// come from the FLOP model, or from a traced run (--sim-profile), which the
// report then holds the simulation against.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "mlir/IR/BuiltinOps.h"
#include "passes/pipeline/CostModel.h"

namespace braid {

struct PipelineOutputs {
  std::string scheduleJson; // path, "-" for stdout; empty: none
  std::string svg;          // path; empty: none
  bool simulate = false;    // print the report on stdout
  pipeline::Rates rates;
  // Traces of a run (braid-run --trace) whose measured part costs replace
  // the FLOP model's, and which the report compares with; empty: none.
  std::string profileDir;
  int64_t cores = 0; // shared by the ranks (CostModel::cores)

  bool any() const { return !scheduleJson.empty() || !svg.empty() || simulate; }
};

absl::Status writePipelineOutputs(mlir::ModuleOp module,
                                  const PipelineOutputs &outputs);

} // namespace braid
