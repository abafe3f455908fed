//===- Passes.h - Braid compiler passes -------------------------*- C++ -*-===//
#pragma once

#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/sched/SchedDialect.h"

namespace braid {

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
};

// import -> autodiff -> lower-to-sched -> plan-memory. Emission is left to
// the caller (braidc writes MLIR, a plan or a binary).
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

// Registers every pass (registerBraidPasses, generated) and the
// `braid-training-pipeline` pipeline.
void registerAllBraidPasses();

} // namespace braid
