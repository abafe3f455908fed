//===- Overlap.cpp - gradient buckets reduced while backward runs ---------===//
//
// See OverlapPass in Passes.td. The pass finds the hand-overs that
// braid-lower-to-sched puts after the micro-batches (record 1 on stream 0,
// wait on the communication stream, the collectives and the launches that
// stream runs, and at the end record 2 there and wait on stream 0). Before
// each, it takes the micro-batch that hands over (out of the repeat, if it
// is in one) and hands its buffers to the communication stream bucket by
// bucket as they become final.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/EpOverlap.h"
#include "passes/TpOverlap.h"

#include <cmath>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "dialects/sched/SchedOps.h"
#include "passes/analysis/Unroll.h"

namespace braid {

#define GEN_PASS_DEF_OVERLAPPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// Event 1 hands buckets to the communication stream; event 2 hands their
// results back.
constexpr int32_t kHandOverEvent = 1;
constexpr int32_t kHandBackEvent = 2;

bool isEvent(Operation *op, int32_t event, int64_t value) {
  if (auto r = dyn_cast_or_null<sched::EventRecordOp>(op))
    return r.getEvent() == event && r.getValue() == value;
  if (auto w = dyn_cast_or_null<sched::EventWaitOp>(op))
    return w.getEvent() == event && w.getValue() == value;
  return false;
}

// The op after `op` that is not a global read.
Operation *nextNonGlobal(Operation *op) {
  Operation *n = op->getNextNode();
  while (n && isa<sched::GetGlobalOp>(n))
    n = n->getNextNode();
  return n;
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

// One hand-over: the communication stream's work on what stream 0 hands it.
struct HandOver {
  sched::EventRecordOp record;
  sched::EventWaitOp wait;
  // After the wait: collectives and launches on the communication stream,
  // and the global reads and buffers they use.
  SmallVector<Operation *> work;
};

// The step's hand-overs and the hand-back after the last; none when the
// step has no collective; failure when it has ones this pass does not know.
struct Reductions {
  SmallVector<HandOver> handOvers;
  sched::EventRecordOp backRecord;
  sched::EventWaitOp backWait;
  int32_t comm = 0;
};

// The collectives of the gradient reduction: not braid-shard's over the TP
// and CP groups, nor expert parallel's over EP, which stay where the
// micro-batch (or the norm) has them.
SmallVector<sched::CollectiveOp> reductionCollectives(Block &body) {
  SmallVector<sched::CollectiveOp> out;
  for (auto c : body.getOps<sched::CollectiveOp>())
    if (c.getAxis() != sched::MeshAxis::Tp &&
        c.getAxis() != sched::MeshAxis::Cp &&
        c.getAxis() != sched::MeshAxis::Ep)
      out.push_back(c);
  return out;
}

FailureOr<std::optional<Reductions>> findReductions(sched::ProgramOp step) {
  Block &body = step.getBody().front();
  SmallVector<sched::CollectiveOp> collectives = reductionCollectives(body);
  if (collectives.empty())
    return std::optional<Reductions>();
  Reductions r;
  auto unknown = [&](Operation *at, const Twine &why) {
    return at->emitOpError()
           << "is not where braid-lower-to-sched's reduction has it (" << why
           << "); braid-overlap runs once, right after it";
  };
  DenseSet<Operation *> claimed;
  int64_t expected = 1;
  for (Operation &op : body) {
    if (!isEvent(&op, kHandOverEvent, expected) ||
        !isa<sched::EventRecordOp>(op))
      continue;
    HandOver h;
    h.record = cast<sched::EventRecordOp>(op);
    h.wait = dyn_cast_or_null<sched::EventWaitOp>(nextNonGlobal(&op));
    if (h.record.getStream() != 0 || !h.wait ||
        !isEvent(h.wait, kHandOverEvent, expected))
      return unknown(&op, "no wait on the communication stream after it");
    if (r.handOvers.empty())
      r.comm = h.wait.getStream();
    else if (h.wait.getStream() != r.comm)
      return unknown(h.wait, "a second communication stream");
    for (Operation *w = h.wait->getNextNode(); w; w = w->getNextNode()) {
      auto onComm = [&](uint32_t stream) {
        return static_cast<int32_t>(stream) == r.comm;
      };
      if (isa<sched::GetGlobalOp, sched::AllocOp>(w) ||
          (isa<sched::CollectiveOp>(w) &&
           onComm(cast<sched::CollectiveOp>(w).getStream())) ||
          (isa<sched::LaunchOp>(w) &&
           onComm(cast<sched::LaunchOp>(w).getStream()))) {
        h.work.push_back(w);
        continue;
      }
      break;
    }
    // Reads and buffers after the last collective or launch belong to what
    // follows.
    while (!h.work.empty() &&
           isa<sched::GetGlobalOp, sched::AllocOp>(h.work.back()))
      h.work.pop_back();
    for (Operation *w : h.work)
      claimed.insert(w);
    r.handOvers.push_back(std::move(h));
    ++expected;
  }
  if (r.handOvers.empty())
    return unknown(collectives.front(), "no hand-over by event 1 before it");
  // Gathers of weights (ZeRO 3) have their own events.
  for (auto c : collectives)
    if (!claimed.contains(c) && c.getStream() == r.comm &&
        c.getKind() != sched::CollectiveKind::AllGather)
      return unknown(c, "a collective on the communication stream outside "
                        "every hand-over");
  Operation *end = r.handOvers.back().work.empty()
                       ? r.handOvers.back().wait
                       : r.handOvers.back().work.back();
  r.backRecord =
      dyn_cast_or_null<sched::EventRecordOp>(nextNonGlobal(end));
  r.backWait = r.backRecord ? dyn_cast_or_null<sched::EventWaitOp>(
                                  nextNonGlobal(r.backRecord))
                            : nullptr;
  if (!r.backRecord || !r.backWait ||
      !isEvent(r.backRecord, kHandBackEvent, 1) ||
      !isEvent(r.backWait, kHandBackEvent, 1) ||
      r.backRecord.getStream() != static_cast<uint32_t>(r.comm) ||
      r.backWait.getStream() != 0)
    return unknown(end, "no hand-back by event 2 after the last hand-over");
  return std::optional<Reductions>(std::move(r));
}

class Overlapper {
public:
  Overlapper(Reductions r, int64_t bucketBytes, int64_t chunks,
             MLIRContext *ctx)
      : r_(std::move(r)), b_(ctx), bucketBytes_(bucketBytes),
        chunks_(chunks) {}

  // Returns the number of buckets.
  int64_t run() {
    Operation *previousEnd = nullptr;
    for (HandOver &h : r_.handOvers) {
      Operation *end = h.work.empty() ? h.wait.getOperation() : h.work.back();
      split(h, previousEnd);
      previousEnd = end;
    }
    // Erase the old hand-overs, users before the values they use.
    for (HandOver &h : llvm::reverse(r_.handOvers)) {
      for (Operation *w : llvm::reverse(h.work))
        if (!moved_.contains(w) && w->use_empty())
          w->erase();
      h.wait->erase();
      h.record->erase();
    }
    r_.backRecord->erase();
    r_.backWait.setValue(back_);
    return back_;
  }

private:
  // One buffer a collective of the hand-over reads, and what goes with it.
  struct Item {
    sched::CollectiveOp collective;
    Value in, out;
    // The launches of the communication stream that read `out`.
    SmallVector<sched::LaunchOp> then;
    // The launch after which `in` is final; null for the micro-batch's end.
    Operation *writer = nullptr;
  };

  // The ops that compute what hand-over `h` reduces: a micro-batch stated
  // out between the previous hand-over and this one, or the last iteration
  // of the repeat right before it, which this takes out of the repeat.
  SmallVector<Operation *> producers(HandOver &h, Operation *previousEnd) {
    Operation *before = h.record->getPrevNode();
    while (before && isa<sched::GetGlobalOp>(before))
      before = before->getPrevNode();
    if (auto repeat = dyn_cast_or_null<sched::RepeatOp>(before)) {
      const uint32_t last = repeat.getCount() - 1;
      b_.setInsertionPointAfter(repeat);
      IRMapping map;
      SmallVector<Operation *> ops = cloneIteration(b_, repeat, last, map);
      if (last == 0)
        repeat->erase();
      else
        repeat.setCount(last);
      return ops;
    }
    SmallVector<Operation *> ops;
    Operation *op = previousEnd ? previousEnd->getNextNode()
                                : &h.record->getBlock()->front();
    for (; op != h.record.getOperation(); op = op->getNextNode())
      ops.push_back(op);
    return ops;
  }

  void split(HandOver &h, Operation *previousEnd) {
    workOps_.clear();
    workOps_.insert(h.work.begin(), h.work.end());
    SmallVector<Operation *> ops = producers(h, previousEnd);
    // The launch that last writes each buffer, by value (transient) or
    // global.
    DenseMap<Value, Operation *> lastByValue;
    DenseMap<Attribute, Operation *> lastByGlobal;
    for (Operation *op : ops)
      if (auto launch = dyn_cast<sched::LaunchOp>(op))
        for (Value out : launch.getOuts()) {
          if (FlatSymbolRefAttr g = globalOf(out))
            lastByGlobal[g] = op;
          else
            lastByValue[out] = op;
        }
    DenseMap<Operation *, SmallVector<Item>> finalAfter;
    SmallVector<Item> unwritten;
    for (Operation *w : h.work) {
      auto c = dyn_cast<sched::CollectiveOp>(w);
      if (!c)
        continue;
      for (auto [i, in] : llvm::enumerate(c.getBuffers())) {
        Item item{c, in, c.getOutputs().empty() ? Value() : c.getOutputs()[i],
                  {}};
        for (Operation *u : h.work)
          if (auto l = dyn_cast<sched::LaunchOp>(u);
              l && item.out && llvm::is_contained(l.getIns(), item.out))
            item.then.push_back(l);
        FlatSymbolRefAttr g = globalOf(in);
        Operation *writer = g ? lastByGlobal.lookup(g) : lastByValue.lookup(in);
        if (writer && !ops.empty() && writer != ops.back()) {
          item.writer = writer;
          finalAfter[writer].push_back(std::move(item));
        } else {
          unwritten.push_back(std::move(item)); // with the last bucket
        }
      }
    }
    SmallVector<Item> pending;
    int64_t pendingBytes = 0;
    for (Operation *op : ops) {
      auto it = finalAfter.find(op);
      if (it == finalAfter.end())
        continue;
      for (Item &item : it->second) {
        pendingBytes += bufferBytes(item.in);
        pending.push_back(std::move(item));
      }
      if (pendingBytes >= bucketBytes_) {
        emitPieces(op, pending, h);
        pending.clear();
        pendingBytes = 0;
      }
    }
    for (Item &item : unwritten)
      pending.push_back(std::move(item));
    emitPieces(ops.empty() ? h.record->getPrevNode() : ops.back(), pending,
               h);
  }

  // A closed bucket, cut into at most chunks_ pieces of about equal bytes
  // in the order its buffers became final. Each piece is handed over after
  // the launch that last writes one of its buffers (`end` for those no
  // launch writes), so the first pieces are reduced while the rest are
  // still being computed. A piece ends only where the next buffer becomes
  // final later, so that pieces have hand-overs of their own.
  void emitPieces(Operation *end, ArrayRef<Item> items, HandOver &h) {
    int64_t total = 0;
    for (const Item &item : items)
      total += bufferBytes(item.in);
    const int64_t pieces = std::max<int64_t>(1, chunks_);
    SmallVector<Item> piece;
    int64_t bytes = 0, made = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      Operation *at = items[i].writer ? items[i].writer : end;
      piece.push_back(items[i]);
      bytes += bufferBytes(items[i].in);
      const bool lastItem = i + 1 == items.size();
      Operation *next =
          lastItem ? nullptr : (items[i + 1].writer ? items[i + 1].writer : end);
      if (lastItem || (next != at && made + 1 < pieces &&
                       bytes * pieces >= total * (made + 1))) {
        emitBucket(at, piece, h);
        piece.clear();
        ++made;
      }
    }
  }

  // A value the bucket's ops use, available at the insertion point: a
  // fresh read of its global, or its buffer moved here when the hand-over
  // made it.
  Value available(Value v, Location loc) {
    if (FlatSymbolRefAttr g = globalOf(v))
      return sched::GetGlobalOp::create(b_, loc, v.getType(), g);
    if (auto alloc = v.getDefiningOp<sched::AllocOp>();
        alloc && workOps_.contains(alloc) && !moved_.contains(alloc)) {
      alloc->moveBefore(b_.getInsertionBlock(), b_.getInsertionPoint());
      moved_.insert(alloc);
    }
    return v;
  }

  // After `after`, stream 0 hands the bucket over (event 1 reaches the
  // next value) and the communication stream runs its collectives, one per
  // kind (or one per buffer when buckets are 0 MiB) and what follows them,
  // then raises event 2. With whole gradients in transient buffers, stream
  // 0 keeps at most two buckets in flight: handing over bucket k, it waits
  // for bucket k - 2, so the buffers the reduction has read become free.
  void emitBucket(Operation *after, ArrayRef<Item> items, HandOver &h) {
    if (items.empty())
      return;
    Location loc = h.record.getLoc();
    b_.setInsertionPointAfter(after);
    ++value_;
    auto i32 = [&](int64_t v) { return b_.getI32IntegerAttr(v); };
    auto i64 = [&](int64_t v) { return b_.getI64IntegerAttr(v); };
    sched::EventRecordOp::create(b_, loc, i32(kHandOverEvent), i64(value_),
                                 i32(0));
    const bool transient = llvm::any_of(
        items, [](const Item &item) { return !globalOf(item.in); });
    if (transient && value_ > 2)
      sched::EventWaitOp::create(b_, loc, i32(kHandBackEvent),
                                 i64(value_ - 2), i32(0));
    sched::EventWaitOp::create(b_, loc, i32(kHandOverEvent), i64(value_),
                               i32(r_.comm));
    auto reduce = [&](sched::CollectiveOp kind, ArrayRef<const Item *> group) {
      SmallVector<Value> ins, outs;
      for (const Item *item : group) {
        ins.push_back(available(item->in, loc));
        if (item->out)
          outs.push_back(available(item->out, loc));
      }
      sched::CollectiveOp::create(b_, loc, kind.getKindAttr(),
                                  kind.getAxisAttr(), ins, outs,
                                  i32(r_.comm), kind.getOffsetAttr());
    };
    // Collectives in the order the hand-over had them.
    SmallVector<sched::CollectiveOp> kinds;
    for (const Item &item : items)
      if (!llvm::is_contained(kinds, item.collective))
        kinds.push_back(item.collective);
    llvm::sort(kinds, [](sched::CollectiveOp a, sched::CollectiveOp b) {
      return a->isBeforeInBlock(b);
    });
    for (sched::CollectiveOp kind : kinds) {
      SmallVector<const Item *> group;
      for (const Item &item : items)
        if (item.collective == kind)
          group.push_back(&item);
      if (bucketBytes_ == 0)
        for (const Item *item : group)
          reduce(kind, item);
      else
        reduce(kind, group);
    }
    for (const Item &item : items)
      for (sched::LaunchOp l : item.then) {
        IRMapping map;
        for (Value v : l->getOperands())
          map.map(v, available(v, loc));
        b_.clone(*l, map);
      }
    ++back_;
    sched::EventRecordOp::create(b_, loc, i32(kHandBackEvent), i64(back_),
                                 i32(r_.comm));
  }

  Reductions r_;
  OpBuilder b_;
  const int64_t bucketBytes_;
  const int64_t chunks_;
  // Event 1's and event 2's last values.
  int64_t value_ = 0;
  int64_t back_ = 0;
  // The ops of the hand-over being split, and those of them moved.
  DenseSet<Operation *> workOps_;
  DenseSet<Operation *> moved_;
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
    int64_t chunks = commChunks;
    if (chunks < 0) {
      auto attr = module->getAttrOfType<IntegerAttr>("braid.comm_chunks");
      chunks = attr ? attr.getInt() : 1;
    }
    if (chunks < 1 || chunks > 1024) {
      module.emitError() << "braid-overlap: " << chunks
                         << " pieces per collective; 1 to 1024";
      return signalPassFailure();
    }
    auto tpChunks =
        module->getAttrOfType<IntegerAttr>(BraidDialect::kTpCommChunksAttr);
    auto hideTpSums = [&](sched::ProgramOp program) -> LogicalResult {
      if (!tpChunks || tpChunks.getInt() <= 1 ||
          program.getKind() != sched::ProgramKind::Step)
        return success();
      FailureOr<TpOverlapStats> overlapped = overlapTensorParallel(
          program, tpChunks.getInt(),
          module->hasAttr(BraidDialect::kTpCommPairsAttr));
      if (failed(overlapped))
        return failure();
      const TpOverlapStats &tp = *overlapped;
      tpPairs += tp.pairs;
      tpMovedWhole += tp.movedWhole;
      tpChunkedGemms += tp.chunkedGemms;
      tpHiddenSums += tp.hiddenSums;
      tpGatherRings += tp.gatherRings;
      tpScatterRings += tp.scatterRings;
      tpPrefetchedGathers += tp.prefetchedGathers;
      return success();
    };
    const bool hideExchanges =
        module->hasAttr(BraidDialect::kEpCommOverlapAttr);
    auto hideEpExchanges = [&](sched::ProgramOp program) {
      if (!hideExchanges || program.getKind() != sched::ProgramKind::Step)
        return;
      EpOverlapStats ep = overlapExpertParallel(program);
      epExchanges += ep.exchanges;
      epHidden += ep.hidden;
    };
    // The pipeline ranks' stage programs (braid-lower-pipeline's nested
    // modules) get the TP part only: their data-parallel sums stay where
    // the pipeline placed them.
    for (auto stage : module.getOps<ModuleOp>())
      for (auto program : stage.getOps<sched::ProgramOp>()) {
        if (failed(hideTpSums(program)))
          return signalPassFailure();
        hideEpExchanges(program);
      }
    for (auto program : module.getOps<sched::ProgramOp>()) {
      if (program.getKind() != sched::ProgramKind::Step)
        continue;
      if (failed(hideTpSums(program)))
        return signalPassFailure();
      hideEpExchanges(program);
      FailureOr<std::optional<Reductions>> found = findReductions(program);
      if (failed(found))
        return signalPassFailure();
      if (!*found)
        continue;
      numBuckets += Overlapper(std::move(**found),
                               static_cast<int64_t>(std::ceil(
                                   mb * double(int64_t{1} << 20))),
                               chunks, module.getContext())
                        .run();
    }
  }
};

} // namespace
} // namespace braid
