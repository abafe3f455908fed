//===- Liveness.cpp - live ranges of transient sched buffers --------------===//
#include "passes/analysis/Liveness.h"

#include <limits>

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace braid {

int64_t bufferBytes(MemRefType type) {
  // 128-bit products: a shape whose byte size overflows int64 is reported,
  // not wrapped.
  __int128 bytes = (type.getElementTypeBitWidth() + 7) / 8;
  for (int64_t d : type.getShape()) {
    bytes *= d;
    if (bytes > std::numeric_limits<int64_t>::max())
      return -1;
  }
  return static_cast<int64_t>(bytes);
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
