//===- Liveness.cpp - live ranges of transient sched buffers --------------===//
#include "passes/analysis/Liveness.h"

#include <limits>

#include <algorithm>

#include "llvm/ADT/DenseMap.h"
#include "runtime/plan/StreamOrder.h"

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
  // Every instruction (launches and events) as ordering sees it, and the
  // number of launches before each, since ranges count launches.
  std::vector<OrderStep> steps;
  std::vector<int64_t> launchesBefore;
  std::vector<sched::LaunchOp> ordered;
  uint32_t numStreams = 1;
  // A sched.repeat body is walked once: its buffers are its own
  // (sched.repeat's verifier), so one pass is the lifetime of each
  // iteration.
  program.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
    OrderStep step;
    launchesBefore.push_back(static_cast<int64_t>(ordered.size()));
    if (auto launch = dyn_cast<sched::LaunchOp>(op)) {
      step.stream = launch.getStream();
      ordered.push_back(launch);
    } else if (auto record = dyn_cast<sched::EventRecordOp>(op)) {
      step = {record.getStream(), OrderStep::Kind::kRecord,
              record.getEvent(), record.getValue()};
    } else if (auto wait = dyn_cast<sched::EventWaitOp>(op)) {
      step = {wait.getStream(), OrderStep::Kind::kWait, wait.getEvent(),
              wait.getValue()};
    } else {
      launchesBefore.pop_back();
      return;
    }
    numStreams = std::max(numStreams, step.stream + 1);
    steps.push_back(step);
  });
  StreamOrder order(steps, numStreams);

  llvm::DenseMap<Value, size_t> index;
  std::vector<LiveRange> ranges;
  std::vector<StreamUses> uses;
  int64_t position = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(steps.size()); ++i) {
    if (steps[i].kind != OrderStep::Kind::kOther)
      continue;
    sched::LaunchOp launch = ordered[position];
    for (Value v : launch->getOperands()) {
      auto alloc = v.getDefiningOp<sched::AllocOp>();
      if (!alloc)
        continue;
      auto [it, inserted] = index.try_emplace(v, ranges.size());
      if (inserted) {
        ranges.push_back({alloc, bufferBytes(alloc.getType()), position,
                          position});
        uses.emplace_back(numStreams);
      }
      order.addUse(uses[it->second], i);
    }
    ++position;
  }
  // A buffer's bytes are busy until every later launch is ordered after all
  // of its uses: on one stream, right after its last use.
  for (size_t r = 0; r < ranges.size(); ++r) {
    const int64_t free = order.freeFrom(uses[r]);
    const int64_t busyLaunches = free < static_cast<int64_t>(steps.size())
                                     ? launchesBefore[free]
                                     : static_cast<int64_t>(ordered.size());
    ranges[r].end = busyLaunches - 1;
  }
  if (launches)
    *launches = std::move(ordered);
  return ranges;
}

} // namespace braid
