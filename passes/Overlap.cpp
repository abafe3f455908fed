//===- Overlap.cpp - gradient buckets reduced during the last backward ----===//
//
// See OverlapPass in Passes.td. The pass finds the reduction
// braid-lower-to-sched puts after the micro-batches (record 1 on stream 0,
// wait on the communication stream, one collective, record 2, wait on 0),
// takes the last micro-batch out of the repeat and hands its gradients to
// the communication stream bucket by bucket as they become final.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include <cmath>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "dialects/sched/SchedOps.h"

namespace braid {

#define GEN_PASS_DEF_OVERLAPPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// Event 1 hands buckets to the communication stream; event 2 (left as
// braid-lower-to-sched made it) hands the sums back to stream 0.
constexpr int32_t kHandOverEvent = 1;

// braid-lower-to-sched's reduction in a step program.
struct Reduction {
  sched::RepeatOp repeat;
  sched::EventRecordOp handOver;
  sched::EventWaitOp take;
  sched::CollectiveOp collective;
};

bool isEvent(Operation *op, int32_t event, int64_t value) {
  if (auto r = dyn_cast_or_null<sched::EventRecordOp>(op))
    return r.getEvent() == event && r.getValue() == value;
  if (auto w = dyn_cast_or_null<sched::EventWaitOp>(op))
    return w.getEvent() == event && w.getValue() == value;
  return false;
}

// The op before `op` that is not a global read.
Operation *previousNonGlobal(Operation *op) {
  Operation *p = op->getPrevNode();
  while (p && isa<sched::GetGlobalOp>(p))
    p = p->getPrevNode();
  return p;
}

// nullopt when the step has no reduction; failure when it has one this
// pass does not know.
FailureOr<std::optional<Reduction>> findReduction(sched::ProgramOp step) {
  SmallVector<sched::CollectiveOp> collectives(
      step.getBody().front().getOps<sched::CollectiveOp>());
  if (collectives.empty())
    return std::optional<Reduction>();
  Reduction r;
  r.collective = collectives.front();
  auto unknown = [&](const Twine &why) {
    return r.collective.emitOpError()
           << "is not the reduction braid-lower-to-sched makes (" << why
           << "); braid-overlap runs once, right after it";
  };
  if (collectives.size() != 1)
    return unknown("the step has several collectives");
  r.take = dyn_cast_or_null<sched::EventWaitOp>(
      previousNonGlobal(r.collective));
  r.handOver = r.take ? dyn_cast_or_null<sched::EventRecordOp>(
                            r.take->getPrevNode())
                      : nullptr;
  if (!r.take || !r.handOver || !isEvent(r.take, kHandOverEvent, 1) ||
      !isEvent(r.handOver, kHandOverEvent, 1) ||
      r.take.getStream() != r.collective.getStream() ||
      r.handOver.getStream() != 0)
    return unknown("no hand-over by event 1 before it");
  r.repeat = dyn_cast_or_null<sched::RepeatOp>(r.handOver->getPrevNode());
  if (!r.repeat)
    return unknown("no sched.repeat of the micro-batches before it");
  return std::optional<Reduction>(r);
}

int64_t bufferBytes(Value v) {
  auto type = cast<MemRefType>(v.getType());
  return type.getNumElements() *
         static_cast<int64_t>(type.getElementTypeBitWidth() / 8);
}

FlatSymbolRefAttr globalOf(Value v) {
  auto get = v.getDefiningOp<sched::GetGlobalOp>();
  return get ? get.getGlobalAttr() : FlatSymbolRefAttr();
}

class Overlapper {
public:
  Overlapper(Reduction r, int64_t bucketBytes)
      : r_(r), b_(r.collective.getContext()), bucketBytes_(bucketBytes),
        comm_(r.collective.getStream()) {}

  // Returns the number of buckets.
  int64_t run() {
    SmallVector<Operation *> last = unrollLastMicroBatch();
    // The gradients (every buffer but the loss sum, which the last
    // micro-batch's final launch writes) by the launch that last writes
    // them.
    DenseMap<Operation *, SmallVector<Value>> finalAfter;
    DenseMap<Attribute, Operation *> lastWriter;
    for (Operation *op : last)
      if (auto launch = dyn_cast<sched::LaunchOp>(op))
        for (Value out : launch.getOuts())
          if (FlatSymbolRefAttr g = globalOf(out))
            lastWriter[g] = op;
    SmallVector<Value> unwritten;
    for (Value v : r_.collective.getBuffers()) {
      Operation *w = lastWriter.lookup(globalOf(v));
      if (w && w != last.back())
        finalAfter[w].push_back(v);
      else
        unwritten.push_back(v); // with the last bucket
    }
    SmallVector<Value> pending;
    int64_t pendingBytes = 0;
    for (Operation *op : last) {
      auto it = finalAfter.find(op);
      if (it == finalAfter.end())
        continue;
      for (Value v : it->second) {
        pending.push_back(v);
        pendingBytes += bufferBytes(v);
      }
      if (pendingBytes >= bucketBytes_) {
        handOver(op, pending);
        pending.clear();
        pendingBytes = 0;
      }
    }
    pending.append(unwritten);
    handOver(last.back(), pending);
    r_.collective->erase();
    r_.take->erase();
    r_.handOver->erase();
    return buckets_;
  }

private:
  // A copy of the repeat's body after it, for the last iteration; the
  // repeat runs one fewer (or goes). Returns the copy's ops.
  SmallVector<Operation *> unrollLastMicroBatch() {
    sched::RepeatOp repeat = r_.repeat;
    const uint32_t last = repeat.getCount() - 1;
    b_.setInsertionPointAfter(repeat);
    IRMapping map;
    SmallVector<Operation *> ops;
    for (Operation &op : repeat.getBody().front()) {
      Operation *copy = b_.clone(op, map);
      if (auto l = dyn_cast<sched::LaunchOp>(copy))
        l.setMicroBatchAttr(
            b_.getI32IntegerAttr(l.getMicroBatch().value_or(0) + last));
      else if (auto s = dyn_cast<sched::StageOp>(copy))
        s.setMicroBatchAttr(b_.getI32IntegerAttr(s.getMicroBatch() + last));
      else if (auto rb = dyn_cast<sched::ReadbackOp>(copy))
        rb.setSlotAttr(b_.getI32IntegerAttr(rb.getSlot() + last));
      ops.push_back(copy);
    }
    if (last == 0)
      repeat->erase();
    else
      repeat.setCount(last);
    return ops;
  }

  // After `after`, stream 0 hands `buffers` over (event 1 reaches the next
  // value) and the communication stream sums them: in one collective, or
  // one per buffer when buckets are 0 MiB.
  void handOver(Operation *after, ArrayRef<Value> buffers) {
    if (buffers.empty())
      return;
    Location loc = r_.collective.getLoc();
    b_.setInsertionPointAfter(after);
    ++value_;
    sched::EventRecordOp::create(b_, loc, b_.getI32IntegerAttr(kHandOverEvent),
                                 b_.getI64IntegerAttr(value_),
                                 b_.getI32IntegerAttr(0));
    sched::EventWaitOp::create(b_, loc, b_.getI32IntegerAttr(kHandOverEvent),
                               b_.getI64IntegerAttr(value_),
                               b_.getI32IntegerAttr(comm_));
    auto reduce = [&](ArrayRef<Value> group) {
      SmallVector<Value> reads;
      for (Value v : group)
        reads.push_back(sched::GetGlobalOp::create(b_, loc, v.getType(),
                                                   globalOf(v)));
      sched::CollectiveOp::create(b_, loc, r_.collective.getKindAttr(),
                                  r_.collective.getAxisAttr(), reads,
                                  b_.getI32IntegerAttr(comm_));
      ++buckets_;
    };
    if (bucketBytes_ == 0)
      for (Value v : buffers)
        reduce(v);
    else
      reduce(buffers);
  }

  Reduction r_;
  OpBuilder b_;
  const int64_t bucketBytes_;
  const int32_t comm_;
  int64_t value_ = 0;
  int64_t buckets_ = 0;
};

struct OverlapPass : impl::OverlapPassBase<OverlapPass> {
  using OverlapPassBase::OverlapPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    double mb = bucketMb;
    if (mb < 0) {
      auto attr = module->getAttrOfType<FloatAttr>("braid.bucket_mb");
      mb = attr ? attr.getValueAsDouble() : 0;
    }
    if (!(mb >= 0 && mb <= double(int64_t{1} << 20))) {
      module.emitError() << "braid-overlap: a bucket of " << mb
                         << " MiB; buckets are 0 to 2^20 MiB";
      return signalPassFailure();
    }
    for (auto program : module.getOps<sched::ProgramOp>()) {
      if (program.getKind() != sched::ProgramKind::Step)
        continue;
      FailureOr<std::optional<Reduction>> found = findReduction(program);
      if (failed(found))
        return signalPassFailure();
      if (!*found)
        continue;
      numBuckets += Overlapper(**found, static_cast<int64_t>(std::ceil(
                                            mb * double(int64_t{1} << 20))))
                        .run();
    }
  }
};

} // namespace
} // namespace braid
