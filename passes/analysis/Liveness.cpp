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
                  std::vector<Operation *> *users) {
  // Every instruction (launches, collectives and events) as ordering sees
  // it, and the number of buffer users before each, since ranges count
  // those.
  std::vector<OrderStep> steps;
  std::vector<int64_t> usersBefore;
  std::vector<Operation *> ordered;
  // The positions each sched.repeat body spans.
  llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> bodies;
  uint32_t numStreams = 1;
  // A sched.repeat body is walked once: one pass is the lifetime of each
  // iteration of the buffers it makes.
  program.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
    OrderStep step;
    usersBefore.push_back(static_cast<int64_t>(ordered.size()));
    if (auto launch = dyn_cast<sched::LaunchOp>(op)) {
      step.stream = launch.getStream();
      ordered.push_back(op);
    } else if (auto coll = dyn_cast<sched::CollectiveOp>(op)) {
      step.stream = coll.getStream();
      ordered.push_back(op);
    } else if (auto send = dyn_cast<sched::SendOp>(op)) {
      step.stream = send.getStream();
      ordered.push_back(op);
    } else if (auto recv = dyn_cast<sched::RecvOp>(op)) {
      step.stream = recv.getStream();
      ordered.push_back(op);
    } else if (auto record = dyn_cast<sched::EventRecordOp>(op)) {
      step = {record.getStream(), OrderStep::Kind::kRecord,
              record.getEvent(), record.getValue()};
    } else if (auto wait = dyn_cast<sched::EventWaitOp>(op)) {
      step = {wait.getStream(), OrderStep::Kind::kWait, wait.getEvent(),
              wait.getValue()};
    } else {
      usersBefore.pop_back();
      return;
    }
    numStreams = std::max(numStreams, step.stream + 1);
    steps.push_back(step);
    if (auto repeat = op->getParentOfType<sched::RepeatOp>()) {
      const int64_t at = static_cast<int64_t>(ordered.size()) - 1;
      auto [it, inserted] = bodies.try_emplace(repeat, at, at);
      it->second.second = at;
    }
  });
  StreamOrder order(steps, numStreams);

  llvm::DenseMap<Value, size_t> index;
  std::vector<LiveRange> ranges;
  std::vector<StreamUses> uses;
  int64_t position = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(steps.size()); ++i) {
    if (steps[i].kind != OrderStep::Kind::kOther)
      continue;
    for (Value v : ordered[position]->getOperands()) {
      // A view's uses are its base buffer's.
      if (auto view = v.getDefiningOp<sched::ViewOp>())
        v = view.getSource();
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
  // A buffer's bytes are busy until every later op is ordered after all of
  // its uses: on one stream, right after its last use.
  for (size_t r = 0; r < ranges.size(); ++r) {
    const int64_t free = order.freeFrom(uses[r]);
    const int64_t busy = free < static_cast<int64_t>(steps.size())
                             ? usersBefore[free]
                             : static_cast<int64_t>(ordered.size());
    ranges[r].end = busy - 1;
  }
  // A buffer from outside a repeat that its body uses stays live over the
  // whole body.
  for (LiveRange &r : ranges)
    for (auto &[repeat, span] : bodies)
      if (!repeat->isAncestor(r.alloc) &&
          llvm::any_of(r.alloc->getUsers(), [&](Operation *u) {
            return repeat->isAncestor(u);
          })) {
        r.begin = std::min(r.begin, span.first);
        r.end = std::max(r.end, span.second);
      }
  if (users)
    *users = std::move(ordered);
  return ranges;
}

} // namespace braid
