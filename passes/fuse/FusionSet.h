//===- FusionSet.h - which fusions a compilation applies --------*- C++ -*-===//
//
// The fusions of docs/fusion.md by the names `braidc --fusion` and the spec
// use (compiler/spec/FusionList.h), each with the pass that performs it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"

namespace braid {

// Where in the pipeline a fusion runs: on the braid graph after autodiff,
// or on the sched programs after lowering.
enum class FusionStage { kGraph, kSched };

struct Fusion {
  llvm::StringRef name;  // as written in --fusion, e.g. "add-norm"
  llvm::StringRef pass;  // the pass argument, e.g. "braid-fuse-add-norm"
  FusionStage stage;
};

// Every fusion, in the order the pipeline applies them.
llvm::ArrayRef<Fusion> allFusions();

// The fusions `text` names, in pipeline order (parseFusionNames of
// compiler/spec/FusionList.h, whose sentence `error` gets on a bad list).
mlir::FailureOr<llvm::SmallVector<const Fusion *>>
parseFusionList(llvm::StringRef text, std::string &error);

// What the fusion passes of a compilation did.
struct FusionOutcome {
  // The fusions whose pass ran and left the module unchanged: they matched
  // nothing in the model.
  llvm::SmallVector<const Fusion *> unchanged;
};

// Records into `outcome` which fusion passes of `pm` change nothing.
void watchFusions(mlir::PassManager &pm,
                  std::shared_ptr<FusionOutcome> outcome);

// Adds the passes of the `stage` fusions in `fusions` to `pm`. Fails, with a
// sentence in `error`, if this build lacks one of them.
mlir::LogicalResult addFusionPasses(mlir::OpPassManager &pm,
                                    llvm::ArrayRef<const Fusion *> fusions,
                                    FusionStage stage, std::string &error);

// The fusion passes' registration with the pass registry (braid-opt).
void registerFusionPasses();

} // namespace braid
