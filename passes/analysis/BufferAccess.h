//===- BufferAccess.h - what a sched op reads and writes --------*- C++ -*-===//
//
// The buffers a sched op touches, by the buffer behind each operand: the
// global's name, or the buffer a view is of. Passes that reorder ops keep
// every buffer's readers and writers in their order with these.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Operation.h"

namespace braid {

using BufferKey = const void *;

BufferKey bufferKey(mlir::Value v);

struct BufferAccess {
  llvm::SmallVector<BufferKey> reads, writes;
};

// Launches read their ins and write their outs, readbacks read their
// buffer; buffers, views, global reads and events touch nothing; stages,
// collectives and anything else count as writing every operand.
BufferAccess bufferAccess(mlir::Operation *op);

// Whether `later` must stay after `earlier`: one writes what the other
// reads or writes.
bool conflicts(const BufferAccess &earlier, const BufferAccess &later);

} // namespace braid
