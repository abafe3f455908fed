//===- TpPairing.cpp - micro-batches two by two, beside each other --------===//
//
// braid-overlap's pairing of micro-batches (braid.tp_comm_pairs), after the
// TP part has stated the micro-batches one by one and moved every
// collective of the TP group in them, whole, to the TP stream (stream 0
// waits for each right before it reads the result). A micro-batch's
// forward sums have nothing of their own micro-batch to compute beside
// them; another micro-batch has. So the step's micro-batches run two by
// two, merged into one order:
//  * each runs until stream 0 would wait for its TP communication (a wait
//    on the hand-back event), and there the other takes over, up to its
//    own such wait; the first then waits and goes on, and so on;
//  * the second of a pair may not go ahead of the first where they share
//    a buffer (the gradients both accumulate into, the loss both write):
//    an op of the second runs only once no op of the first that is still
//    to come touches what it writes or writes what it reads, so every
//    buffer sees the ops on it in the order of the plan without pairing
//    and the numbers are the same;
//  * the tokens, labels and positions a micro-batch stages into the input
//    globals are copied into a buffer of its own right after it stages
//    them, and it reads those, so the second can stage its inputs while
//    the first still has to read its own (the embedding's gradient reads
//    the tokens at the very end of backward); and the loss is read back
//    and added to the step's sum as soon as it is made, not after the
//    backward, so that the second can write its own.
// Every TP collective is on the TP stream, in the one merged order on
// every rank, so no rank meets two of the group's collectives in different
// orders. Both micro-batches' activations are alive at once. The events of
// the TP part are numbered again in the new program order.
//
//===----------------------------------------------------------------------===//

#include "passes/TpOverlap.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/IR/Builders.h"

#include "dialects/braid/Marks.h"
#include "passes/analysis/BufferAccess.h"

using namespace mlir;

namespace braid {

namespace {

using Key = BufferKey;
using Access = BufferAccess;

class Pairer {
public:
  Pairer(sched::ProgramOp step, const TpPairingEvents &events)
      : step_(step), b_(step.getContext()), events_(events) {}

  LogicalResult run(int64_t &pairs);

private:
  // One micro-batch of a pair, in its own order.
  struct Sequence {
    SmallVector<Operation *> ops;
    size_t next = 0;
    // Stopped once at the wait it is at, for the other to go on.
    bool yielded = false;
    bool done() const { return next == ops.size(); }
    Operation *peek() const { return ops[next]; }
  };

  // What `op` reads and writes, worked out once (the references stay
  // valid: an unordered_map does not move its elements).
  const Access &accessOf(Operation *op) {
    auto [it, added] = accesses_.try_emplace(op);
    if (added)
      it->second = bufferAccess(op);
    return it->second;
  }
  LogicalResult checkStreams(ArrayRef<Operation *> ops);
  void ownInputs(Sequence &s);
  void hoistScalars(Sequence &s);
  void merge(Sequence &first, Sequence &second, Operation *end);
  void renumber();

  bool isYield(Operation *op) const {
    auto w = dyn_cast<sched::EventWaitOp>(op);
    return w && w.getStream() == 0 && w.getEvent() == events_.back;
  }
  // Whether `op` of the second micro-batch may run now: what it uses is
  // made and nothing of the first still to come conflicts with it.
  bool mayGoAhead(Operation *op) {
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && pending_.contains(def))
        return false;
    const Access &a = accessOf(op);
    for (Key k : a.writes)
      if (auto it = firstLeft_.find(k);
          it != firstLeft_.end() && (it->second.first || it->second.second))
        return false;
    for (Key k : a.reads)
      if (auto it = firstLeft_.find(k);
          it != firstLeft_.end() && it->second.second)
        return false;
    return true;
  }
  IntegerAttr i32(int64_t v) { return b_.getI32IntegerAttr(v); }
  IntegerAttr i64(int64_t v) { return b_.getI64IntegerAttr(v); }

  sched::ProgramOp step_;
  OpBuilder b_;
  TpPairingEvents events_;
  // The ops of the pair not placed yet.
  DenseSet<Operation *> pending_;
  // Reads and writes of the first micro-batch's ops not placed yet.
  DenseMap<Key, std::pair<int64_t, int64_t>> firstLeft_;
  std::unordered_map<Operation *, Access> accesses_;
};

// The pairs' micro-batches run on stream 0 and the TP stream only, with
// the TP part's events (others, ZeRO 3's gathers, are not ordered for it),
// and every collective of the TP group on the TP stream.
LogicalResult Pairer::checkStreams(ArrayRef<Operation *> ops) {
  for (Operation *op : ops) {
    uint32_t stream = 0;
    if (auto s = op->getAttrOfType<IntegerAttr>("stream"))
      stream = static_cast<uint32_t>(s.getInt());
    int32_t event = events_.send;
    if (auto r = dyn_cast<sched::EventRecordOp>(op))
      event = r.getEvent();
    if (auto w = dyn_cast<sched::EventWaitOp>(op))
      event = w.getEvent();
    if ((stream != 0 && stream != events_.stream) ||
        (event != events_.send && event != events_.back))
      return op->emitOpError()
             << "is on a stream or event that tp_comm_pair_micro_batches "
                "cannot order (stream "
             << stream << ", event " << event
             << "); the pairing takes micro-batches on stream 0 and the TP "
                "stream only";
    // Two ranks could meet it and one of the TP stream in different
    // orders.
    auto c = dyn_cast<sched::CollectiveOp>(op);
    if (c && c.getAxis() == sched::MeshAxis::Tp && stream == 0)
      return op->emitOpError()
             << "is a collective of the TP group on stream 0, where "
                "tp_comm_pair_micro_batches expects every one of a "
                "micro-batch on the TP stream";
  }
  return success();
}

// The micro-batch's staged inputs, copied to buffers of its own, which its
// ops read instead.
void Pairer::ownInputs(Sequence &s) {
  SmallVector<Operation *> ops;
  DenseMap<Attribute, Value> own;
  for (Operation *op : s.ops) {
    if (auto stage = dyn_cast<sched::StageOp>(op)) {
      ops.push_back(op);
      auto get = stage.getBuffer().getDefiningOp<sched::GetGlobalOp>();
      b_.setInsertionPointAfter(op);
      Location loc = op->getLoc();
      auto type = cast<MemRefType>(stage.getBuffer().getType());
      Value copy = sched::AllocOp::create(b_, loc, type, IntegerAttr());
      auto launch = sched::LaunchOp::create(
          b_, loc, b_.getStringAttr("copy"), i32(stage.getStream()),
          i32(stage.getMicroBatch()), ValueRange{stage.getBuffer()},
          ValueRange{copy}, DictionaryAttr());
      setPhaseMark(launch, Phase::Forward);
      ops.push_back(copy.getDefiningOp());
      ops.push_back(launch);
      own[get.getGlobalAttr()] = copy;
      continue;
    }
    for (OpOperand &use : op->getOpOperands())
      if (auto get = use.get().getDefiningOp<sched::GetGlobalOp>())
        if (Value copy = own.lookup(get.getGlobalAttr()))
          use.set(copy);
    ops.push_back(op);
  }
  s.ops = std::move(ops);
}

// A scalar's bookkeeping (the loss's readback, its sum over the
// micro-batches) moves up to right after what it reads is made, with the
// global reads only it uses: the micro-batch's loss is read back at the
// end of its backward otherwise, and the other micro-batch, which writes
// the same loss global, could not go ahead of that.
void Pairer::hoistScalars(Sequence &s) {
  auto scalar = [](Value v) {
    return cast<MemRefType>(v.getType()).getRank() == 0;
  };
  auto isBookkeeping = [&](Operation *op) {
    if (isa<sched::ReadbackOp>(op))
      return true;
    auto l = dyn_cast<sched::LaunchOp>(op);
    return l && l.getStream() == 0 && !l->getOperands().empty() &&
           llvm::all_of(l->getOperands(), scalar);
  };
  for (size_t i = 0; i < s.ops.size(); ++i) {
    Operation *op = s.ops[i];
    if (!isBookkeeping(op))
      continue;
    // It moves up past what neither makes what it reads nor conflicts with
    // it, and the global reads it alone uses, which it meets on the way,
    // go with it.
    const Access &access = accessOf(op);
    SmallVector<Operation *> moving = {op};
    size_t to = i;
    while (to > 0) {
      Operation *before = s.ops[to - 1];
      if (isa<sched::GetGlobalOp>(before) && before->hasOneUse() &&
          *before->user_begin() == op) {
        moving.push_back(before);
        --to;
        continue;
      }
      const bool defines = llvm::any_of(op->getOperands(), [&](Value v) {
        return v.getDefiningOp() == before;
      });
      // Events do not hold it: it touches no buffer the TP stream does.
      if (defines || conflicts(accessOf(before), access))
        break;
      --to;
    }
    std::reverse(moving.begin(), moving.end());
    if (to == i)
      continue;
    SmallVector<Operation *> rest;
    for (size_t j = to; j <= i; ++j)
      if (!llvm::is_contained(moving, s.ops[j]))
        rest.push_back(s.ops[j]);
    llvm::copy(moving, s.ops.begin() + to);
    llvm::copy(rest, s.ops.begin() + to + moving.size());
  }
}

void Pairer::merge(Sequence &first, Sequence &second, Operation *end) {
  pending_.clear();
  firstLeft_.clear();
  for (Sequence *s : {&first, &second})
    pending_.insert(s->ops.begin(), s->ops.end());
  for (Operation *op : first.ops) {
    const Access &a = accessOf(op);
    for (Key k : a.reads)
      ++firstLeft_[k].first;
    for (Key k : a.writes)
      ++firstLeft_[k].second;
  }
  Block *block = first.ops.front()->getBlock();
  auto place = [&](Operation *op) {
    if (end)
      op->moveBefore(end);
    else
      op->moveBefore(block, block->end());
    pending_.erase(op);
  };
  Sequence *seq[2] = {&first, &second};
  int cur = 0;
  while (!first.done() || !second.done()) {
    Sequence &c = *seq[cur], &o = *seq[1 - cur];
    if (c.done()) {
      cur = 1 - cur;
      continue;
    }
    Operation *op = c.peek();
    // The first never waits for the second: the second went ahead only
    // where it did not touch what the first still does.
    if (cur == 1 && !mayGoAhead(op)) {
      cur = 0;
      continue;
    }
    if (isYield(op) && !c.yielded && !o.done() &&
        (cur == 1 || mayGoAhead(o.peek()))) {
      c.yielded = true;
      cur = 1 - cur;
      continue;
    }
    c.yielded = false;
    if (cur == 0) {
      const Access &a = accessOf(op);
      for (Key k : a.reads)
        --firstLeft_[k].first;
      for (Key k : a.writes)
        --firstLeft_[k].second;
    }
    place(op);
    ++c.next;
  }
}

// The TP part's events, numbered from 1 in program order again.
void Pairer::renumber() {
  std::map<std::pair<int32_t, int64_t>, int64_t> renamed;
  std::map<int32_t, int64_t> count;
  auto ours = [&](int32_t e) {
    return e == events_.send || e == events_.back;
  };
  for (Operation &op : step_.getBody().front()) {
    if (auto r = dyn_cast<sched::EventRecordOp>(op); r && ours(r.getEvent())) {
      const int64_t value = ++count[r.getEvent()];
      renamed[{r.getEvent(), int64_t(r.getValue())}] = value;
      r.setValueAttr(i64(value));
    } else if (auto w = dyn_cast<sched::EventWaitOp>(op);
               w && ours(w.getEvent())) {
      w.setValueAttr(i64(renamed.at({w.getEvent(), int64_t(w.getValue())})));
    }
  }
}

LogicalResult Pairer::run(int64_t &pairs) {
  // The micro-batches in program order, each a run of ops with one slot
  // (ops the TP part added have none and go with the op before them).
  Block &body = step_.getBody().front();
  std::vector<std::pair<int64_t, SmallVector<Operation *>>> runs;
  int64_t slot = -1;
  for (Operation &op : body) {
    if (auto a = op.getAttrOfType<IntegerAttr>(kTpPairSlotAttr)) {
      slot = a.getInt();
      op.removeAttr(kTpPairSlotAttr);
    }
    if (runs.empty() || runs.back().first != slot)
      runs.push_back({slot, {}});
    runs.back().second.push_back(&op);
  }
  for (size_t i = 0; i + 1 < runs.size(); ++i) {
    if (runs[i].first < 0 || runs[i + 1].first < 0)
      continue;
    Sequence first, second;
    first.ops = std::move(runs[i].second);
    second.ops = std::move(runs[i + 1].second);
    if (failed(checkStreams(first.ops)) || failed(checkStreams(second.ops)))
      return failure();
    Operation *end = second.ops.back()->getNextNode();
    for (Sequence *s : {&first, &second}) {
      ownInputs(*s);
      hoistScalars(*s);
    }
    merge(first, second, end);
    ++pairs;
    ++i;
  }
  renumber();
  return success();
}

} // namespace

LogicalResult pairMicroBatches(sched::ProgramOp step,
                               const TpPairingEvents &events,
                               int64_t &pairs) {
  return Pairer(step, events).run(pairs);
}

} // namespace braid
