//===- BufferAccess.cpp - what a sched op reads and writes ----------------===//
#include "passes/analysis/BufferAccess.h"

#include "llvm/ADT/STLExtras.h"

#include "dialects/sched/SchedOps.h"

using namespace mlir;

namespace braid {

BufferKey bufferKey(Value v) {
  while (auto view = v.getDefiningOp<sched::ViewOp>())
    v = view.getSource();
  if (auto get = v.getDefiningOp<sched::GetGlobalOp>())
    return get.getGlobalAttr().getAttr().getAsOpaquePointer();
  return v.getAsOpaquePointer();
}

BufferAccess bufferAccess(Operation *op) {
  BufferAccess a;
  if (auto l = dyn_cast<sched::LaunchOp>(op)) {
    for (Value v : l.getIns())
      a.reads.push_back(bufferKey(v));
    for (Value v : l.getOuts())
      a.writes.push_back(bufferKey(v));
  } else if (auto r = dyn_cast<sched::ReadbackOp>(op)) {
    a.reads.push_back(bufferKey(r.getBuffer()));
  } else if (!isa<sched::GetGlobalOp, sched::AllocOp, sched::ViewOp,
                  sched::EventRecordOp, sched::EventWaitOp>(op)) {
    for (Value v : op->getOperands())
      a.writes.push_back(bufferKey(v));
  }
  return a;
}

bool conflicts(const BufferAccess &earlier, const BufferAccess &later) {
  auto meets = [](ArrayRef<BufferKey> a, ArrayRef<BufferKey> b) {
    return llvm::any_of(a, [&](BufferKey k) { return llvm::is_contained(b, k); });
  };
  return meets(earlier.writes, later.reads) ||
         meets(earlier.writes, later.writes) ||
         meets(earlier.reads, later.writes);
}

} // namespace braid
