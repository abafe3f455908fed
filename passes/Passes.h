//===- Passes.h - Braid compiler passes -------------------------*- C++ -*-===//
#pragma once

#include <memory>
#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/sched/SchedDialect.h"

namespace braid {
namespace spec {
class ModelSpec;
} // namespace spec

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

struct TrainingPipelineOptions
    : public mlir::PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> spec{*this, "spec",
                           llvm::cl::desc("Model spec (.pbtxt) to compile")};
  Option<bool> reportMemory{*this, "report-memory",
                            llvm::cl::desc("Print the memory report"),
                            llvm::cl::init(false)};
  Option<std::string> fusion{
      *this, "fusion",
      llvm::cl::desc("Fusions to apply: all, none, a comma-separated list "
                     "(docs/fusion.md), or spec: the spec's compile.fusion "
                     "(none when it has none)"),
      llvm::cl::init("spec")};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Recompute policy: none, full, selective, uniform-N, "
                     "block-N or op kinds (docs/memory.md), or spec: the "
                     "spec's compile.recompute (none when it has none)"),
      llvm::cl::init("spec")};
  Option<bool> stopAfterSchedule{
      *this, "stop-after-schedule",
      llvm::cl::desc("Stop after braid-schedule: the pipeline's partition "
                     "and schedule, without lowering or planning"),
      llvm::cl::init(false)};
  // A spec already loaded (braidc reads its SPEC once, so that a pipe can
  // be one); when set, `spec` only names it in diagnostics.
  std::shared_ptr<const spec::ModelSpec> loadedSpec;
};

// braid-import on a spec already loaded.
std::unique_ptr<mlir::Pass>
createImportSpecPass(std::shared_ptr<const spec::ModelSpec> spec);

// import -> autodiff -> graph fusions -> partition -> schedule ->
// lower-to-sched -> overlap -> sched fusions -> plan-memory. Emission is
// left to the caller (braidc writes MLIR, a plan or a binary). Fails, with a sentence in `error`, on a bad fusion list or,
// when the fusions come from the spec, a spec that does not load.
mlir::LogicalResult buildTrainingPipeline(mlir::OpPassManager &pm,
                                          const TrainingPipelineOptions &options,
                                          std::string &error);

// What follows braid-recompute: schedule -> lower-to-sched ->
// lower-pipeline -> overlap -> the sched-stage fusions of `fusionList` ->
// plan-memory (printing its report with `reportMemory`). braid-recompute's
// auto mode plans its candidates with it. Fails, with a sentence in
// `error`, on a bad fusion list.
mlir::LogicalResult addPlanningPasses(mlir::OpPassManager &pm,
                                      llvm::StringRef fusionList,
                                      bool reportMemory, std::string &error);

// The fusion list a compilation of `spec` with `option` (the pipeline's
// fusion option) applies: the option, or for "spec" the spec's
// compile.fusion, "none" when that is empty.
std::string effectiveFusionList(const std::string &option,
                                const spec::ModelSpec &spec);

// Registers every pass (registerBraidPasses, generated) and the
// `braid-training-pipeline` pipeline.
void registerAllBraidPasses();

} // namespace braid
