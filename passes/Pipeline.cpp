//===- Pipeline.cpp - the training pipeline -------------------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "passes/fuse/FusionSet.h"

using namespace mlir;

namespace braid {

LogicalResult buildTrainingPipeline(OpPassManager &pm,
                                    const TrainingPipelineOptions &options,
                                    std::string &error) {
  FailureOr<SmallVector<const Fusion *>> fusions =
      parseFusionList(options.fusion, error);
  if (failed(fusions))
    return failure();
  if (options.loadedSpec) {
    pm.addPass(createImportSpecPass(options.loadedSpec));
  } else {
    ImportSpecPassOptions import;
    import.specPath = options.spec;
    pm.addPass(createImportSpecPass(import));
  }
  pm.addPass(createAutodiffPass());
  if (failed(addFusionPasses(pm, *fusions, FusionStage::kGraph, error)))
    return failure();
  pm.addPass(createLowerToSchedPass());
  if (failed(addFusionPasses(pm, *fusions, FusionStage::kSched, error)))
    return failure();
  PlanMemoryPassOptions memory;
  memory.report = options.reportMemory;
  pm.addPass(createPlanMemoryPass(memory));
  return success();
}

void registerAllBraidPasses() {
  registerBraidPasses();
  registerFusionPasses();
  // As PassPipelineRegistration, but a bad fusion list is reported through
  // the registry's error handler instead of being ignored.
  registerPassPipeline(
      "braid-training-pipeline",
      "Compile a model spec to planned sched programs (import, autodiff, "
      "fusion, lower-to-sched, plan-memory)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        TrainingPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string error;
        if (failed(buildTrainingPipeline(pm, options, error)))
          return errorHandler(error);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(TrainingPipelineOptions());
      });
}

} // namespace braid
