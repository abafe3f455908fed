//===- Liveness.cpp - live ranges of transient sched buffers --------------===//
#include "passes/analysis/Liveness.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace braid {

int64_t bufferBytes(MemRefType type) {
  int64_t elementBytes = (type.getElementTypeBitWidth() + 7) / 8;
  return type.getNumElements() * elementBytes;
}

std::vector<LiveRange>
computeLiveRanges(sched::ProgramOp program,
                  std::vector<sched::LaunchOp> *launches) {
  llvm::DenseMap<Value, size_t> index;
  std::vector<LiveRange> ranges;
  int64_t position = 0;
  for (Operation &op : program.getBody().front()) {
    auto launch = dyn_cast<sched::LaunchOp>(op);
    if (!launch)
      continue;
    if (launches)
      launches->push_back(launch);
    for (Value v : launch->getOperands()) {
      auto alloc = v.getDefiningOp<sched::AllocOp>();
      if (!alloc)
        continue;
      auto [it, inserted] = index.try_emplace(v, ranges.size());
      if (inserted)
        ranges.push_back({alloc, bufferBytes(alloc.getType()), position,
                          position});
      else
        ranges[it->second].end = position;
    }
    ++position;
  }
  return ranges;
}

} // namespace braid
