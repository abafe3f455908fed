// The pipeline's module attributes (dialects/braid/BraidBase.td):
//   braid.pipeline  = {schedule = "ZB_H1", virtual_stages = 1, layout = "..."}
//   braid.partition = [{first = 0, layers = 3, padding = 1, embedding}, ...]
//   braid.schedule  = {micro_batches = 8, ranks = ["F0 F1 BW0 ...", ...]}
// one dictionary per stage in model order, one order string per rank
// (passes/pipeline/Schedule.h: formatOrder). braid-partition and
// braid-schedule write them; the schedule's tools (braidc --dump-schedule,
// --simulate, --schedule-svg) and later passes read them.
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "passes/pipeline/CostModel.h"
#include "passes/pipeline/Partition.h"
#include "passes/pipeline/Schedule.h"

namespace braid {

// The settings of braid.pipeline with the mesh's pp: the family and the
// placement of its stages. Nullopt without braid.pipeline (one stage).
// The modules of the ranks' programs: braid-lower-pipeline's nested
// modules in rank order, or `top` itself without a pipeline.
llvm::SmallVector<mlir::ModuleOp> rankModules(mlir::ModuleOp top);

struct PipelineSettings {
  pipeline::Family family = pipeline::Family::kOneFOneB;
  pipeline::Placement placement;
  int64_t virtualStages = 1; // as the spec gave it
  std::string layout;        // empty: automatic
};
absl::StatusOr<std::optional<PipelineSettings>>
readPipelineSettings(mlir::ModuleOp module);

void writePartition(mlir::ModuleOp module, const pipeline::Partition &p);
absl::StatusOr<pipeline::Partition> readPartition(mlir::ModuleOp module);

void writeSchedule(mlir::ModuleOp module, const pipeline::Schedule &s);
// The schedule braid.schedule holds, with the settings' family and
// placement; an error where it is missing or does not parse.
absl::StatusOr<pipeline::Schedule> readSchedule(mlir::ModuleOp module);

// The cost model's view of the module's braid.model and braid.train.
pipeline::ModelShape modelShape(mlir::ModuleOp module);

} // namespace braid
