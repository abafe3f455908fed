//===- Unroll.cpp - one iteration of a sched.repeat, stated out -----------===//
#include "passes/analysis/Unroll.h"

#include <algorithm>

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

void unrollRepeats(sched::ProgramOp program,
                   function_ref<bool(Operation *)> holds,
                   function_ref<void(ArrayRef<Operation *>)> stated) {
  SmallVector<sched::RepeatOp> repeats;
  for (auto r : program.getBody().front().getOps<sched::RepeatOp>())
    repeats.push_back(r);
  OpBuilder b(program.getContext());
  for (sched::RepeatOp r : repeats) {
    bool held = false;
    r.getBody().walk([&](Operation *op) { held = held || holds(op); });
    if (!held)
      continue;
    b.setInsertionPoint(r);
    for (uint32_t i = 0; i < r.getCount(); ++i) {
      IRMapping map;
      SmallVector<Operation *> ops = cloneIteration(b, r, i, map);
      if (stated)
        stated(ops);
    }
    r.erase();
  }
}

FreeEventAndStream firstFree(sched::ProgramOp program, int32_t leastEvent) {
  int32_t event = -1;
  uint32_t stream = 0;
  program.walk([&](Operation *op) {
    if (auto r = dyn_cast<sched::EventRecordOp>(op))
      event = std::max<int32_t>(event, r.getEvent());
    if (auto w = dyn_cast<sched::EventWaitOp>(op))
      event = std::max<int32_t>(event, w.getEvent());
    if (auto s = op->getAttrOfType<IntegerAttr>("stream"))
      stream = std::max<uint32_t>(stream, s.getInt());
  });
  return {std::max(event + 1, leastEvent), std::max<uint32_t>(stream + 1, 2)};
}

} // namespace braid
