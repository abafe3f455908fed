#include "passes/analysis/PeakBreakdown.h"

#include <algorithm>

#include "llvm/ADT/DenseMap.h"

#include "dialects/braid/Marks.h"

using namespace mlir;

namespace braid {

namespace {

bool isTransfer(Operation *op) { return isa<sched::SendOp, sched::RecvOp>(op); }

} // namespace

PeakBreakdown breakdownAtPeak(const std::vector<LiveRange> &ranges,
                              const std::vector<Operation *> &users,
                              int64_t alignment) {
  PeakBreakdown b;
  if (ranges.empty())
    return b;
  auto size = [&](const LiveRange &r) {
    return (r.bytes + alignment - 1) / alignment * alignment;
  };
  // Live bytes at each user, by a sweep over the ranges' ends.
  std::vector<int64_t> delta(users.size() + 1, 0);
  for (const LiveRange &r : ranges) {
    delta[r.begin] += size(r);
    delta[r.end + 1] -= size(r);
  }
  int64_t live = 0;
  for (size_t i = 0; i < users.size(); ++i) {
    live += delta[i];
    if (live > b.live) {
      b.live = live;
      b.at = static_cast<int64_t>(i);
    }
  }
  int64_t numLayers = 0;
  llvm::DenseMap<Operation *, int64_t> index;
  for (size_t i = 0; i < users.size(); ++i) {
    index[users[i]] = static_cast<int64_t>(i);
    if (LayerAttr layer = layerMark(users[i]); layer && layer.isBlock())
      numLayers = std::max(numLayers, layer.getIndex() + 1);
  }
  b.savedPerLayer.assign(numLayers, 0);
  for (const LiveRange &r : ranges) {
    if (r.begin > b.at || r.end < b.at)
      continue;
    // Saved: a forward op has used it by the peak and a backward op uses
    // it from there on. The layer is its writer's, as the per-layer table
    // counts; for a received buffer, the first layer that reads it.
    bool usedForward = false, usedBackward = false, readLater = false,
         transfer = false;
    LayerAttr layer = layerMark(users[r.begin]);
    sched::AllocOp alloc = r.alloc;
    for (Operation *user : alloc.getResult().getUsers()) {
      auto at = index.find(user);
      if (at == index.end())
        continue;
      transfer |= isTransfer(user);
      if (isBackwardPhase(user)) {
        usedBackward = true;
        readLater |= at->second >= b.at;
      } else if (phaseMark(user) == Phase::Forward && at->second <= b.at) {
        usedForward = true;
        LayerAttr reader = layerMark(user);
        if (isTransfer(users[r.begin]) && reader && reader.isBlock() &&
            (!layer || !layer.isBlock() ||
             reader.getIndex() < layer.getIndex()))
          layer = reader;
      }
    }
    const int64_t bytes = size(r);
    if (usedForward && readLater) {
      if (layer && layer.isBlock())
        b.savedPerLayer[layer.getIndex()] += bytes;
      else
        b.savedOther += bytes;
    } else if (transfer) {
      b.transfers += bytes;
    } else if (usedBackward) {
      b.backwardTransient += bytes;
    } else {
      b.forwardTransient += bytes;
    }
  }
  return b;
}

} // namespace braid
