//===- StageFunctions.h - the functions that hold pipeline stages -*- C++ -*-===//
//
// The forward and backward graph lives in one func.func per pipeline stage,
// marked `braid.stage = #braid.stage<N>` (braid-import creates stage 0).
// Passes anchor on these functions, never on a function's name.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace braid {

// The stage functions of `module`, in stage order. Emits an error on the
// module naming `pass` and fails when there is none.
mlir::FailureOr<llvm::SmallVector<mlir::func::FuncOp>>
stageFunctions(mlir::ModuleOp module, llvm::StringRef pass);

// The stage function of a module of one stage, for passes that handle one.
// Emits an error on the module naming `pass` and fails when there is none
// or more than one.
mlir::FailureOr<mlir::func::FuncOp> singleStageFunction(mlir::ModuleOp module,
                                                       llvm::StringRef pass);

} // namespace braid
