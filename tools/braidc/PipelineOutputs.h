// braidc's pipeline outputs: the schedule as JSON (--dump-schedule), the
// simulator's report (--simulate) and the timeline (--schedule-svg), from
// the module's braid.partition and braid.schedule.
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

  bool any() const { return !scheduleJson.empty() || !svg.empty() || simulate; }
};

absl::Status writePipelineOutputs(mlir::ModuleOp module,
                                  const PipelineOutputs &outputs);

} // namespace braid
