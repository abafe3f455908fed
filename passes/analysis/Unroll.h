//===- Unroll.h - one iteration of a sched.repeat, stated out ---*- C++ -*-===//
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
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

// States out, in place of each, every sched.repeat at the top of
// `program` whose body holds an op that `holds` accepts, iteration by
// iteration; `stated` (when given) receives each iteration's ops.
void unrollRepeats(
    sched::ProgramOp program, llvm::function_ref<bool(mlir::Operation *)> holds,
    llvm::function_ref<void(llvm::ArrayRef<mlir::Operation *>)> stated = {});

// The first event from `leastEvent` and the first stream from 2 that no
// op of `program` uses (events 0 to 4 and streams 0 and 1 are spoken for
// even where a program does not use them yet).
struct FreeEventAndStream {
  int32_t event = 0;
  uint32_t stream = 0;
};
FreeEventAndStream firstFree(sched::ProgramOp program, int32_t leastEvent);

} // namespace braid
