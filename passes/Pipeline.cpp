//===- Pipeline.cpp - the training pipeline -------------------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace braid {

void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineOptions &options) {
  ImportSpecPassOptions import;
  import.specPath = options.spec;
  pm.addPass(createImportSpecPass(import));
  pm.addPass(createAutodiffPass());
  pm.addPass(createLowerToSchedPass());
  PlanMemoryPassOptions memory;
  memory.report = options.reportMemory;
  pm.addPass(createPlanMemoryPass(memory));
}

void registerAllBraidPasses() {
  registerBraidPasses();
  PassPipelineRegistration<TrainingPipelineOptions>(
      "braid-training-pipeline",
      "Compile a model spec to planned sched programs (import, autodiff, "
      "lower-to-sched, plan-memory)",
      buildTrainingPipeline);
}

} // namespace braid
