//===- Unroll.h - one iteration of a sched.repeat, stated out ---*- C++ -*-===//
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "dialects/sched/SchedOps.h"

namespace braid {

// Clones the body of `repeat` at the builder's insertion point as iteration
// `iteration`: launches compute, stages copy and readbacks fill what that
// iteration's do. `map` receives the body's values' clones. Returns the
// clones in order.
llvm::SmallVector<mlir::Operation *>
cloneIteration(mlir::OpBuilder &b, sched::RepeatOp repeat, uint32_t iteration,
               mlir::IRMapping &map);

} // namespace braid
