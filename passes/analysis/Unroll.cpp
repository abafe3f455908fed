//===- Unroll.cpp - one iteration of a sched.repeat, stated out -----------===//
#include "passes/analysis/Unroll.h"

using namespace mlir;

namespace braid {

SmallVector<Operation *> cloneIteration(OpBuilder &b, sched::RepeatOp repeat,
                                        uint32_t iteration, IRMapping &map) {
  SmallVector<Operation *> ops;
  for (Operation &op : repeat.getBody().front()) {
    Operation *copy = b.clone(op, map);
    if (auto l = dyn_cast<sched::LaunchOp>(copy))
      l.setMicroBatchAttr(
          b.getI32IntegerAttr(l.getMicroBatch().value_or(0) + iteration));
    else if (auto s = dyn_cast<sched::StageOp>(copy))
      s.setMicroBatchAttr(b.getI32IntegerAttr(s.getMicroBatch() + iteration));
    else if (auto rb = dyn_cast<sched::ReadbackOp>(copy))
      rb.setSlotAttr(b.getI32IntegerAttr(rb.getSlot() + iteration));
    ops.push_back(copy);
  }
  return ops;
}

} // namespace braid
