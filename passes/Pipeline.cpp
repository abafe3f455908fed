//===- Pipeline.cpp - the training pipeline -------------------------------===//
#include "passes/Passes.h"

#include "compiler/spec/SpecLoader.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "passes/fuse/FusionSet.h"

using namespace mlir;

namespace braid {

std::string effectiveFusionList(const std::string &option,
                                const spec::ModelSpec &spec) {
  if (option != "spec")
    return option;
  return spec.compile().fusion().empty() ? "none" : spec.compile().fusion();
}

LogicalResult buildTrainingPipeline(OpPassManager &pm,
                                    const TrainingPipelineOptions &options,
                                    std::string &error) {
  // The spec is read here when the fusions come from it, and then once:
  // import takes the loaded spec.
  std::shared_ptr<const spec::ModelSpec> spec = options.loadedSpec;
  if (!spec && options.fusion == "spec" && !options.spec.empty()) {
    absl::StatusOr<spec::ModelSpec> loaded = loadSpecFile(options.spec);
    if (!loaded.ok()) {
      error = std::string(loaded.status().message());
      return failure();
    }
    spec = std::make_shared<const spec::ModelSpec>(std::move(*loaded));
  }
  const std::string list =
      spec ? effectiveFusionList(options.fusion, *spec)
           : (options.fusion == "spec" ? std::string("none")
                                       : std::string(options.fusion));
  FailureOr<SmallVector<const Fusion *>> fusions =
      parseFusionList(list, error);
  if (failed(fusions))
    return failure();
  if (spec) {
    pm.addPass(createImportSpecPass(spec));
  } else {
    ImportSpecPassOptions import;
    import.specPath = options.spec;
    pm.addPass(createImportSpecPass(import));
  }
  pm.addPass(createAutodiffPass());
  pm.addPass(createShardPass());
  if (failed(addFusionPasses(pm, *fusions, FusionStage::kGraph, error)))
    return failure();
  pm.addPass(createPartitionPass());
  // After the partition, whose stages a policy per stage follows. With
  // "spec" braid-recompute reads what braid-import put on the module.
  RecomputePassOptions recompute;
  if (options.recompute != "spec")
    recompute.policy = options.recompute.empty() ? std::string("none")
                                                 : std::string(options.recompute);
  recompute.fusion = list;
  recompute.compare = options.reportMemory;
  pm.addPass(createRecomputePass(recompute));
  if (options.stopAfterSchedule) {
    pm.addPass(createSchedulePass());
    return success();
  }
  return addPlanningPasses(pm, list, options.reportMemory, error);
}

LogicalResult addPlanningPasses(OpPassManager &pm, StringRef fusionList,
                                bool reportMemory, std::string &error) {
  FailureOr<SmallVector<const Fusion *>> fusions =
      parseFusionList(fusionList.str(), error);
  if (failed(fusions))
    return failure();
  pm.addPass(createSchedulePass());
  pm.addPass(createLowerToSchedPass());
  pm.addPass(createLowerPipelinePass());
  pm.addPass(createOverlapPass());
  OptimizerOffloadPassOptions optimizer;
  optimizer.compare = reportMemory;
  pm.addPass(createOptimizerOffloadPass(optimizer));
  if (failed(addFusionPasses(pm, *fusions, FusionStage::kSched, error)))
    return failure();
  OffloadPassOptions offload;
  offload.compare = reportMemory;
  pm.addPass(createOffloadPass(offload));
  PlanMemoryPassOptions memory;
  memory.report = reportMemory;
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
      "fusion, partition, schedule, lower-to-sched, overlap, offload, plan-memory)",
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
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(TrainingPipelineOptions());
      });
}

} // namespace braid
