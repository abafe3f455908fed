//===- TpOverlap.cpp - the TP sums hidden behind compute ------------------===//
//
// braid-overlap's part for tensor parallel (braid.tp_comm_chunks), after
// braid-shard and braid-lower-to-sched have put every TP sum on stream 0
// right where its value is made:
//  * forward: a row-parallel GEMM (`linear`) followed by the all-reduce of
//    its output is cut into pieces along its first dimension above 1
//    (sched.view): stream 0 computes piece i + 1 while the TP stream sums
//    piece i, each piece handed over by an event; stream 0 waits for the
//    last sum before it goes on;
//  * backward: the all-reduce of a column-parallel input gradient runs on
//    the TP stream, and the weight-gradient launches that stream 0 had
//    just before it, which neither feed nor read it, move behind it, so
//    they compute while the sum is in flight; stream 0 waits for the sum
//    right before the first op that reads it;
//  * sequence parallel, forward and backward: an all-gather along the
//    sequence whose readers are GEMMs becomes a ring over the P blocks:
//    at step t stream 0 computes the GEMMs on the block it holds while the
//    TP stream passes that block on to the next rank and receives the one
//    before (a shift), so each block's GEMMs hide the next block's
//    transfer; and a reduce-scatter of GEMM outputs (a sum of them, in
//    backward) becomes a ring in which step t computes the GEMMs' rows of
//    one part, adds the running sum received from the rank before, and
//    passes it on while step t + 1 computes. Each block moves in up to
//    tp_comm_chunks pieces, so that the first GEMM on a received block can
//    start before the whole block is there. The GEMMs of a ring work on
//    the parts in the order the ring meets them, which depends on the
//    rank: the plan, the same on every rank, keeps them stacked in that
//    order (stack_parts and unstack_parts with `ring`), so every GEMM reads
//    and writes fixed views. An all-gather no GEMM reads block by block
//    (backward's re-gathers for the weight gradients) is passed round the
//    ring on the TP stream ahead of its reader.
// The micro-batches are stated one by one first, since a sched.repeat body
// holds no events. Events and the stream are the first ones free.
// With braid.tp_comm_pairs there are no pieces and no rings: every TP
// collective of a micro-batch moves whole to the TP stream, stream 0
// waiting right before the first op that reads it, and TpPairing.cpp then
// runs the micro-batches two by two, each beside the other's collectives.
//
//===----------------------------------------------------------------------===//

#include "passes/TpOverlap.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "llvm/ADT/DenseSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "dialects/braid/Marks.h"
#include "passes/analysis/Unroll.h"

using namespace mlir;

namespace braid {
namespace {

bool isTpSum(Operation *op, uint32_t stream) {
  auto c = dyn_cast<sched::CollectiveOp>(op);
  return c && c.getKind() == sched::CollectiveKind::AllReduceSum &&
         c.getAxis() == sched::MeshAxis::Tp && c.getStream() == stream &&
         c.getBuffers().size() == 1;
}

// The next op after `op` that the runtime runs (not a buffer or a read of
// a global).
Operation *nextRun(Operation *op) {
  Operation *n = op->getNextNode();
  while (n && isa<sched::GetGlobalOp, sched::AllocOp, sched::ViewOp>(n))
    n = n->getNextNode();
  return n;
}

// A row-parallel GEMM whose output the next op sums over the TP group.
sched::CollectiveOp summedGemm(sched::LaunchOp l) {
  if (l.getKernel() != "linear" || l.getStream() != 0 ||
      l.getOuts().size() != 1 ||
      !l.getOuts()[0].getDefiningOp<sched::AllocOp>() ||
      !l.getIns()[0].getDefiningOp<sched::AllocOp>())
    return {};
  Operation *next = nextRun(l);
  if (!next || !isTpSum(next, 0) ||
      cast<sched::CollectiveOp>(next).getBuffers()[0] != l.getOuts()[0])
    return {};
  return cast<sched::CollectiveOp>(next);
}

// The integer parameter `name` of a launch, `otherwise` when it has none.
int64_t param(sched::LaunchOp l, StringRef name, int64_t otherwise) {
  DictionaryAttr params = l.getParamsAttr();
  auto v = params ? params.getAs<IntegerAttr>(name) : IntegerAttr();
  return v ? v.getInt() : otherwise;
}

// A plain stacking along the sequence (dimension 1, contiguous parts), as
// braid-lower-to-sched puts around sequence parallel's collectives.
bool isSequenceStacking(sched::LaunchOp l, StringRef kernel) {
  return l && l.getKernel() == kernel && l.getStream() == 0 &&
         l.getIns().size() == 1 && l.getOuts().size() == 1 &&
         param(l, "dim", 0) == 1 && param(l, "balanced", 0) == 0 &&
         param(l, "ring", 0) == 0;
}

bool isGemm(sched::LaunchOp l) {
  return l && l.getStream() == 0 && l.getOuts().size() == 1 &&
         (l.getKernel() == "linear" || l.getKernel() == "linear_grad_input");
}

// The blocks of `b` rows that `stacked` holds along dimension 0.
int64_t blocksOf(Value stacked, int64_t b) {
  return cast<MemRefType>(stacked.getType()).getDimSize(0) /
         std::max<int64_t>(1, b);
}

void sortInProgramOrder(SmallVectorImpl<sched::LaunchOp> &launches) {
  llvm::sort(launches, [](sched::LaunchOp a, sched::LaunchOp b) {
    return a->isBeforeInBlock(b);
  });
}

// A buffer of the step's own (not a global or a view).
bool isAlloc(Value v) { return v && v.getDefiningOp<sched::AllocOp>(); }

// The one launch that writes `buffer` and the one op that reads it, or
// null when it has other writers or readers.
std::pair<sched::LaunchOp, Operation *> writerAndReader(Value buffer) {
  sched::LaunchOp writer;
  Operation *reader = nullptr;
  for (Operation *user : buffer.getUsers()) {
    auto l = dyn_cast<sched::LaunchOp>(user);
    if (l && llvm::is_contained(l.getOuts(), buffer)) {
      if (writer || llvm::is_contained(l.getIns(), buffer))
        return {};
      writer = l;
      continue;
    }
    if (reader)
      return {};
    reader = user;
  }
  return {writer, reader};
}

class TpOverlapper {
public:
  TpOverlapper(sched::ProgramOp step, int64_t chunks, bool pairs)
      : step_(step), b_(step.getContext()), chunks_(chunks), pairs_(pairs) {}

  FailureOr<TpOverlapStats> run();

private:
  // States the micro-batches out of their repeats; returns how many.
  int64_t unroll();
  void chunkGemm(sched::LaunchOp gemm, sched::CollectiveOp sum);
  void hideBackwardSum(sched::CollectiveOp sum);
  void toTpStream(sched::CollectiveOp c);
  void waitBeforeReader(ValueRange buffers, Location loc);
  void moveWhole(sched::CollectiveOp c);
  // Sequence parallel's all-gather along the sequence (an all-gather of
  // stacked parts, then unstack_parts into the whole) and the GEMMs that
  // read the whole, which its ring computes block by block; `others` read
  // the whole too, which the ring then rebuilds from its blocks.
  struct GatherRing {
    sched::CollectiveOp gather;
    sched::LaunchOp unstack;
    SmallVector<sched::LaunchOp> gemms;
    bool others = false;
  };
  // Sequence parallel's reduce-scatter along the sequence (stack_parts,
  // then a reduce-scatter of the stacked parts) of a sum of GEMM outputs
  // (`terms`, added by `adds`).
  struct ScatterRing {
    sched::LaunchOp stack;
    sched::CollectiveOp scatter;
    SmallVector<sched::LaunchOp> terms, adds;
  };
  std::optional<GatherRing> matchGatherRing(sched::CollectiveOp c);
  std::optional<ScatterRing> matchScatterRing(sched::LaunchOp stack);
  bool collectTerms(Value sum, ScatterRing &ring);
  void gatherRing(GatherRing &ring);
  void scatterRing(ScatterRing &ring);
  // An all-gather along the sequence that no GEMM reads block by block
  // (backward's re-gather of a column-parallel input for its weight
  // gradient): its stacked parts, which only `unstack` reads.
  struct Prefetch {
    sched::CollectiveOp gather;
    sched::LaunchOp unstack;
  };
  std::optional<Prefetch> matchPrefetch(sched::CollectiveOp c);
  void prefetch(Prefetch &p);
  // A view of rows [first, first + n) of dimension 0 of a buffer (the
  // buffer itself when that is all of it).
  Value rows(Value base, int64_t first, int64_t n, Location loc);
  // One step of a ring on the TP stream; `handOver` first when stream 0
  // made `in`.
  void shift(Value in, Value out, Location loc, bool handOver = true);
  // The pieces each block of a ring is cut into: tp_comm_chunks, or fewer
  // so that they divide the block's `rows`.
  int64_t piecesOf(int64_t rows) const {
    int64_t k = std::min(chunks_, rows);
    while (k > 1 && rows % k != 0)
      --k;
    return std::max<int64_t>(k, 1);
  }
  IntegerAttr i32(int64_t v) { return b_.getI32IntegerAttr(v); }
  IntegerAttr i64(int64_t v) { return b_.getI64IntegerAttr(v); }
  // Stream 0 hands over to the TP stream / is handed back.
  void handOver(Location loc) {
    ++sent_;
    sched::EventRecordOp::create(b_, loc, i32(sendEvent_), i64(sent_), i32(0));
    sched::EventWaitOp::create(b_, loc, i32(sendEvent_), i64(sent_),
                               i32(stream_));
  }
  void handBackRecord(Location loc) {
    ++back_;
    sched::EventRecordOp::create(b_, loc, i32(backEvent_), i64(back_),
                                 i32(stream_));
  }
  void handBackWait(Location loc) {
    sched::EventWaitOp::create(b_, loc, i32(backEvent_), i64(back_), i32(0));
  }

  sched::ProgramOp step_;
  OpBuilder b_;
  int64_t chunks_;
  bool pairs_;
  // The rings' views, by (base buffer, first row, rows).
  std::map<std::tuple<const void *, int64_t, int64_t>, Value> views_;
  int32_t sendEvent_ = 0, backEvent_ = 0;
  int64_t sent_ = 0, back_ = 0;
  uint32_t stream_ = 0;
  TpOverlapStats stats_;
};

int64_t TpOverlapper::unroll() {
  // The pairing tells the micro-batches apart by slot (the micro-batch
  // stated out, in program order).
  int64_t slot = 0;
  if (pairs_)
    for (Operation &op : step_.getBody().front())
      op.setAttr(kTpPairSlotAttr, i64(-1));
  unrollRepeats(
      step_,
      [](Operation *op) {
        auto c = dyn_cast<sched::CollectiveOp>(op);
        return c && c.getAxis() == sched::MeshAxis::Tp;
      },
      [&](ArrayRef<Operation *> ops) {
        if (pairs_)
          for (Operation *op : ops)
            op->setAttr(kTpPairSlotAttr, i64(slot));
        ++slot;
      });
  return slot;
}

// Pieces along the first dimension above 1 of the output's leading ones.
void TpOverlapper::chunkGemm(sched::LaunchOp gemm, sched::CollectiveOp sum) {
  Value x = gemm.getIns()[0], y = gemm.getOuts()[0];
  auto yType = cast<MemRefType>(y.getType());
  auto xType = cast<MemRefType>(x.getType());
  int64_t dim = 0;
  while (dim + 1 < yType.getRank() && yType.getDimSize(dim) == 1)
    ++dim;
  const int64_t n = yType.getDimSize(dim);
  const int64_t k = std::min<int64_t>(chunks_, n);
  if (dim + 1 >= yType.getRank() || k < 2)
    return;
  Location loc = gemm.getLoc();
  b_.setInsertionPoint(gemm);
  auto sliced = [](MemRefType t, int64_t dim, int64_t size) {
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] = size;
    return MemRefType::get(shape, t.getElementType());
  };
  int64_t first = 0;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t size = n / k + (i < n % k ? 1 : 0);
    auto xv = sched::ViewOp::create(b_, loc, sliced(xType, dim, size), x,
                                    i64(dim), i64(first));
    auto yv = sched::ViewOp::create(b_, loc, sliced(yType, dim, size), y,
                                    i64(dim), i64(first));
    SmallVector<Value> ins(gemm.getIns());
    ins[0] = xv;
    auto piece = cast<sched::LaunchOp>(b_.clone(*gemm));
    piece.getInsMutable().assign(ins);
    piece.getOutsMutable().assign(ValueRange{yv.getResult()});
    handOver(loc);
    auto s = cast<sched::CollectiveOp>(b_.clone(*sum));
    s.getBuffersMutable().assign(ValueRange{yv.getResult()});
    s.setStreamAttr(i32(stream_));
    first += size;
  }
  handBackRecord(loc);
  handBackWait(loc);
  sum.erase();
  gemm.erase();
  ++stats_.chunkedGemms;
}

void TpOverlapper::hideBackwardSum(sched::CollectiveOp sum) {
  Value buffer = sum.getBuffers()[0];
  // The weight-gradient launches just before the sum that can run after
  // it: nothing between them and the sum touches what they write or writes
  // what they read, and they do not touch the sum's buffer.
  SmallVector<sched::LaunchOp> moved;
  DenseSet<Value> readBetween, writtenBetween;
  readBetween.insert(buffer);
  writtenBetween.insert(buffer);
  for (Operation *op = sum->getPrevNode(); op; op = op->getPrevNode()) {
    if (isa<sched::GetGlobalOp, sched::AllocOp, sched::ViewOp>(op))
      continue;
    auto l = dyn_cast<sched::LaunchOp>(op);
    if (!l || l.getStream() != 0)
      break;
    std::optional<Phase> phase = phaseMark(l);
    const bool independent =
        phase == Phase::WeightGrad &&
        llvm::none_of(l.getOuts(),
                      [&](Value v) {
                        return readBetween.contains(v) ||
                               writtenBetween.contains(v);
                      }) &&
        llvm::none_of(l.getIns(),
                      [&](Value v) { return writtenBetween.contains(v); });
    if (independent) {
      moved.push_back(l);
      continue;
    }
    if (phase == Phase::Forward || layerMark(l) != layerMark(sum))
      break;
    for (Value v : l.getIns())
      readBetween.insert(v);
    for (Value v : l.getOuts())
      writtenBetween.insert(v);
  }
  Location loc = sum.getLoc();
  toTpStream(sum);
  for (sched::LaunchOp l : llvm::reverse(moved))
    l->moveBefore(b_.getInsertionBlock(), b_.getInsertionPoint());
  waitBeforeReader(buffer, loc);
  stats_.hiddenSums += 1;
}

// Stream 0 hands `c` over to the TP stream, which runs it and records the
// hand-back after it; the builder is left right after that record.
void TpOverlapper::toTpStream(sched::CollectiveOp c) {
  Location loc = c.getLoc();
  b_.setInsertionPoint(c);
  handOver(loc);
  c.setStreamAttr(i32(stream_));
  b_.setInsertionPointAfter(c);
  handBackRecord(loc);
}

// Stream 0 goes on from the insertion point with what does not touch
// `buffers`, up to the first op that does, or that is not one of its own
// launches, and waits for the TP stream there.
void TpOverlapper::waitBeforeReader(ValueRange buffers, Location loc) {
  Operation *at = b_.getInsertionPoint() == b_.getInsertionBlock()->end()
                      ? nullptr
                      : &*b_.getInsertionPoint();
  auto touches = [&](sched::LaunchOp l) {
    return llvm::any_of(l->getOperands(), [&](Value v) {
      auto view = v.getDefiningOp<sched::ViewOp>();
      return llvm::is_contained(buffers, v) ||
             (view && llvm::is_contained(buffers, view.getSource()));
    });
  };
  while (at) {
    auto l = dyn_cast<sched::LaunchOp>(at);
    if (!isa<sched::GetGlobalOp, sched::AllocOp, sched::ViewOp>(at) &&
        (!l || l.getStream() != 0 || touches(l)))
      break;
    at = at->getNextNode();
  }
  if (at)
    b_.setInsertionPoint(at);
  else
    b_.setInsertionPointToEnd(b_.getInsertionBlock());
  handBackWait(loc);
}

// Paired micro-batches: the collective runs whole on the TP stream, and
// the other micro-batch computes beside it (TpPairing.cpp).
void TpOverlapper::moveWhole(sched::CollectiveOp c) {
  toTpStream(c);
  waitBeforeReader(c->getOperands(), c.getLoc());
  stats_.movedWhole += 1;
}

// One view per range of rows of dimension 0 (rows [first, first + n)),
// made where it is first needed: the plan names each view once.
Value TpOverlapper::rows(Value base, int64_t first, int64_t n, Location loc) {
  auto type = cast<MemRefType>(base.getType());
  if (first == 0 && n == type.getDimSize(0))
    return base;
  Value &view = views_[{base.getAsOpaquePointer(), first, n}];
  if (view)
    return view;
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = n;
  view = sched::ViewOp::create(b_, loc,
                               MemRefType::get(shape, type.getElementType()),
                               base, i64(0), i64(first))
             .getResult();
  return view;
}

// One step of a ring on the TP stream: `in` to the next rank, `out` from
// the one before.
void TpOverlapper::shift(Value in, Value out, Location loc, bool handOver) {
  if (handOver)
    this->handOver(loc);
  MLIRContext *ctx = b_.getContext();
  sched::CollectiveOp::create(
      b_, loc,
      sched::CollectiveKindAttr::get(ctx, sched::CollectiveKind::Shift),
      sched::MeshAxisAttr::get(ctx, sched::MeshAxis::Tp), ValueRange{in},
      ValueRange{out}, i32(stream_), b_.getSI32IntegerAttr(1));
  handBackRecord(loc);
}

std::optional<TpOverlapper::GatherRing>
TpOverlapper::matchGatherRing(sched::CollectiveOp c) {
  if (c.getKind() != sched::CollectiveKind::AllGather ||
      c.getAxis() != sched::MeshAxis::Tp || c.getStream() != 0 ||
      c.getBuffers().size() != 1 || c.getOutputs().size() != 1 ||
      !isAlloc(c.getOutputs()[0]) || !c.getOutputs()[0].hasNUses(2))
    return std::nullopt;
  auto unstack = dyn_cast_or_null<sched::LaunchOp>(nextRun(c));
  if (!isSequenceStacking(unstack, "unstack_parts") ||
      unstack.getIns()[0] != c.getOutputs()[0] ||
      !isAlloc(unstack.getOuts()[0]) ||
      cast<MemRefType>(unstack.getOuts()[0].getType()).getRank() != 3)
    return std::nullopt;
  GatherRing ring{c, unstack, {}, false};
  Value whole = unstack.getOuts()[0];
  for (Operation *user : whole.getUsers()) {
    if (user == unstack.getOperation())
      continue;
    auto l = dyn_cast<sched::LaunchOp>(user);
    // A GEMM over the whole whose other operands are globals (weights,
    // biases) can move up to the gather and run there block by block.
    const bool gemm =
        isGemm(l) && l->getBlock() == c->getBlock() &&
        l.getIns()[0] == whole && isAlloc(l.getOuts()[0]) &&
        llvm::all_of(l.getIns().drop_front(), [&](Value v) {
          return v != whole && v.getDefiningOp<sched::GetGlobalOp>();
        });
    if (gemm)
      ring.gemms.push_back(l);
    else
      ring.others = true;
  }
  if (ring.gemms.empty())
    return std::nullopt;
  sortInProgramOrder(ring.gemms);
  return ring;
}

// The ring of an all-gather: P steps, step t computing every GEMM on
// block t (this rank's part at step 0, then the part of the rank t
// before) while the TP stream passes block t on and receives block t + 1
// into the gather's stacked buffer. Each block moves in pieces of rows, so
// stream 0 starts on a block's first piece while the rest arrive. Each GEMM
// writes its rows into a stacked output, which unstack_parts in the
// ring's order (block t is part (rank - t) mod P) turns into the GEMM's
// output.
void TpOverlapper::gatherRing(GatherRing &ring) {
  Location loc = ring.gather.getLoc();
  Value part = ring.gather.getBuffers()[0];
  Value stacked = ring.gather.getOutputs()[0];
  Value whole = ring.unstack.getOuts()[0];
  const int64_t b = cast<MemRefType>(part.getType()).getDimSize(0);
  const int64_t parts = blocksOf(stacked, b);
  const int64_t k = piecesOf(b), n = b / k;
  b_.setInsertionPoint(ring.gather);
  auto dimOne = b_.getNamedAttr("dim", i64(1));
  auto ringOrder = b_.getDictionaryAttr(
      {dimOne, b_.getNamedAttr("ring", i64(1))});
  // Each GEMM's output, stacked by block.
  SmallVector<Value> outs;
  for (sched::LaunchOp g : ring.gemms) {
    auto y = cast<MemRefType>(g.getOuts()[0].getType());
    SmallVector<int64_t> shape(y.getShape());
    shape[0] *= parts;
    shape[1] /= parts;
    outs.push_back(sched::AllocOp::create(
                       b_, loc, MemRefType::get(shape, y.getElementType()),
                       IntegerAttr())
                       .getResult());
  }
  // Piece j of block t: of this rank's part at step 0, else of the
  // stacked buffer the ring receives into.
  auto piece = [&](int64_t t, int64_t j) {
    return t == 0 ? rows(part, j * n, n, loc)
                  : rows(stacked, t * b + j * n, n, loc);
  };
  // The back event's value of each piece's arrival.
  SmallVector<int64_t> arrived(parts * k, 0);
  for (int64_t t = 0; t < parts; ++t) {
    // The TP stream passes block t on, piece by piece: stream 0 made
    // block 0; the TP stream itself received the others.
    if (t + 1 < parts)
      for (int64_t j = 0; j < k; ++j) {
        shift(piece(t, j), piece(t + 1, j), loc, t == 0 && j == 0);
        arrived[(t + 1) * k + j] = back_;
      }
    for (int64_t j = 0; j < k; ++j) {
      if (t > 0)
        sched::EventWaitOp::create(b_, loc, i32(backEvent_),
                                   i64(arrived[t * k + j]), i32(0));
      for (auto [g, out] : llvm::zip(ring.gemms, outs)) {
        SmallVector<Value> ins(g.getIns());
        ins[0] = piece(t, j);
        for (Value &v : MutableArrayRef<Value>(ins).drop_front())
          v = b_.clone(*v.getDefiningOp())->getResult(0);
        Value into = rows(out, t * b + j * n, n, loc);
        auto step = cast<sched::LaunchOp>(b_.clone(*g));
        step.getInsMutable().assign(ins);
        step.getOutsMutable().assign(ValueRange{into});
      }
    }
  }
  for (auto [g, out] : llvm::zip(ring.gemms, outs)) {
    Value y = g.getOuts()[0];
    y.getDefiningOp()->moveBefore(b_.getInsertionBlock(),
                                  b_.getInsertionPoint());
    auto unstack = cast<sched::LaunchOp>(b_.clone(*ring.unstack));
    unstack.getInsMutable().assign(ValueRange{out});
    unstack.getOutsMutable().assign(ValueRange{y});
    unstack.setParamsAttr(ringOrder);
    g.erase();
  }
  if (ring.others) {
    // The whole, for its other readers: this rank's part copied into
    // block 0 (a stacking of one part), then the blocks unstacked.
    Value first = rows(stacked, 0, b, loc);
    auto copy = cast<sched::LaunchOp>(b_.clone(*ring.unstack));
    copy.setKernelAttr(b_.getStringAttr("stack_parts"));
    copy.getInsMutable().assign(ValueRange{part});
    copy.getOutsMutable().assign(ValueRange{first});
    copy.setParamsAttr(b_.getDictionaryAttr({dimOne}));
    whole.getDefiningOp()->moveBefore(b_.getInsertionBlock(),
                                      b_.getInsertionPoint());
    auto unstack = cast<sched::LaunchOp>(b_.clone(*ring.unstack));
    unstack.setParamsAttr(ringOrder);
  }
  ring.unstack.erase();
  ring.gather.erase();
  if (whole.use_empty())
    whole.getDefiningOp()->erase();
  ++stats_.gatherRings;
}

std::optional<TpOverlapper::Prefetch>
TpOverlapper::matchPrefetch(sched::CollectiveOp c) {
  if (c.getKind() != sched::CollectiveKind::AllGather ||
      c.getAxis() != sched::MeshAxis::Tp || c.getStream() != 0 ||
      c.getBuffers().size() != 1 || c.getOutputs().size() != 1 ||
      !isAlloc(c.getOutputs()[0]) || !c.getOutputs()[0].hasNUses(2))
    return std::nullopt;
  auto unstack = dyn_cast_or_null<sched::LaunchOp>(nextRun(c));
  if (!isSequenceStacking(unstack, "unstack_parts") ||
      unstack.getIns()[0] != c.getOutputs()[0])
    return std::nullopt;
  return Prefetch{c, unstack};
}

// The gather's parts passed round the ring on the TP stream (P - 1 shifts
// into blocks 1 .. P - 1 of the stacked buffer, block t being part
// (rank - t) mod P), started right after the last op before it that the
// TP stream runs or that touches its input: so the transfer runs while
// stream 0 computes what lies between. Stream 0 waits for it where the
// gather was, copies its own part into block 0 and unstacks in the ring's
// order.
void TpOverlapper::prefetch(Prefetch &p) {
  Value part = p.gather.getBuffers()[0];
  Value stacked = p.gather.getOutputs()[0];
  auto touchesPart = [&](Operation *op) {
    return llvm::any_of(op->getOperands(), [&](Value v) {
      auto view = v.getDefiningOp<sched::ViewOp>();
      return v == part || (view && view.getSource() == part);
    });
  };
  auto onTpStream = [&](Operation *op) {
    auto s = op->getAttrOfType<IntegerAttr>("stream");
    return s && s.getInt() == stream_;
  };
  Operation *start = p.gather;
  for (Operation *op = p.gather->getPrevNode(); op; op = op->getPrevNode()) {
    if (onTpStream(op) || touchesPart(op) || op == part.getDefiningOp())
      break;
    start = op;
  }
  Location loc = p.gather.getLoc();
  b_.setInsertionPoint(start);
  stacked.getDefiningOp()->moveBefore(start);
  const int64_t b = cast<MemRefType>(part.getType()).getDimSize(0);
  const int64_t parts = blocksOf(stacked, b);
  for (int64_t t = 0; t + 1 < parts; ++t)
    shift(t == 0 ? part : rows(stacked, t * b, b, loc),
          rows(stacked, (t + 1) * b, b, loc), loc, t == 0);
  const int64_t arrived = back_;
  b_.setInsertionPoint(p.gather);
  sched::EventWaitOp::create(b_, loc, i32(backEvent_), i64(arrived), i32(0));
  // This rank's part into block 0: a stacking of one part.
  auto dimOne = b_.getNamedAttr("dim", i64(1));
  Value own = rows(stacked, 0, b, loc);
  auto copy = cast<sched::LaunchOp>(b_.clone(*p.unstack));
  copy.setKernelAttr(b_.getStringAttr("stack_parts"));
  copy.getInsMutable().assign(ValueRange{part});
  copy.getOutsMutable().assign(ValueRange{own});
  copy.setParamsAttr(b_.getDictionaryAttr({dimOne}));
  p.unstack.setParamsAttr(b_.getDictionaryAttr(
      {dimOne, b_.getNamedAttr("ring", i64(1))}));
  p.gather.erase();
  ++stats_.prefetchedGathers;
}

// Whether `sum`, read by `reader` only, is a GEMM's output or a sum of
// such (braid.add's kernel), each GEMM's input safe to read later, at the
// reduce-scatter: no launch between the GEMM and it writes the input.
bool TpOverlapper::collectTerms(Value sum, ScatterRing &ring) {
  auto [writer, reader] = writerAndReader(sum);
  if (!writer || !reader || !isAlloc(sum) || writer->getBlock() !=
                                                  ring.stack->getBlock())
    return false;
  if (writer.getKernel() == "add" && writer.getStream() == 0 &&
      writer.getIns().size() == 2) {
    ring.adds.push_back(writer);
    return collectTerms(writer.getIns()[0], ring) &&
           collectTerms(writer.getIns()[1], ring);
  }
  if (!isGemm(writer) ||
      cast<MemRefType>(sum.getType()).getRank() != 3 ||
      !llvm::all_of(writer.getIns().drop_front(), [](Value v) {
        return v.getDefiningOp<sched::GetGlobalOp>();
      }))
    return false;
  Value input = writer.getIns()[0];
  for (Operation *op = writer->getNextNode(); op != ring.stack.getOperation();
       op = op->getNextNode()) {
    auto l = dyn_cast<sched::LaunchOp>(op);
    auto c = dyn_cast<sched::CollectiveOp>(op);
    if ((l && llvm::is_contained(l.getOuts(), input)) ||
        (c && (llvm::is_contained(c.getOutputs(), input) ||
               llvm::is_contained(c.getBuffers(), input))))
      return false;
  }
  ring.terms.push_back(writer);
  return true;
}

std::optional<TpOverlapper::ScatterRing>
TpOverlapper::matchScatterRing(sched::LaunchOp stack) {
  if (!isSequenceStacking(stack, "stack_parts") ||
      !isAlloc(stack.getOuts()[0]) || !stack.getOuts()[0].hasNUses(2))
    return std::nullopt;
  auto scatter = dyn_cast_or_null<sched::CollectiveOp>(nextRun(stack));
  if (!scatter ||
      scatter.getKind() != sched::CollectiveKind::ReduceScatterSum ||
      scatter.getAxis() != sched::MeshAxis::Tp || scatter.getStream() != 0 ||
      scatter.getBuffers().size() != 1 ||
      scatter.getBuffers()[0] != stack.getOuts()[0] ||
      !isAlloc(scatter.getOutputs()[0]))
    return std::nullopt;
  ScatterRing ring{stack, scatter, {}, {}};
  if (!collectTerms(stack.getIns()[0], ring))
    return std::nullopt;
  sortInProgramOrder(ring.terms);
  return ring;
}

// The ring of a reduce-scatter: every GEMM's input stacked in the ring's
// order (ring_offset 1: block t is part (rank - t - 1) mod P, the part
// whose sum this rank adds to at step t); step t computes the GEMMs' rows
// of block t piece by piece, adds them and the running sum received from
// the rank before, and, but at the last step, passes each piece on as soon
// as it is made, while stream 0 computes the next. After P steps the sum
// of this rank's own part is complete; stream 0 adds the last pieces that
// arrive right before the first op that reads it.
void TpOverlapper::scatterRing(ScatterRing &ring) {
  Location loc = ring.scatter.getLoc();
  Value out = ring.scatter.getOutputs()[0];
  auto partType = cast<MemRefType>(out.getType());
  const int64_t b = partType.getDimSize(0);
  const int64_t parts = blocksOf(ring.stack.getOuts()[0], b);
  const int64_t k = piecesOf(b), n = b / k;
  b_.setInsertionPoint(ring.stack);
  out.getDefiningOp()->moveBefore(ring.stack);
  auto alloc = [&](MemRefType type) {
    return sched::AllocOp::create(b_, loc, type, IntegerAttr()).getResult();
  };
  auto stackedOf = [&](Value v) {
    auto type = cast<MemRefType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= parts;
    shape[1] /= parts;
    return MemRefType::get(shape, type.getElementType());
  };
  auto ringOrder = b_.getDictionaryAttr(
      {b_.getNamedAttr("dim", i64(1)), b_.getNamedAttr("ring", i64(1)),
       b_.getNamedAttr("ring_offset", i64(1))});
  SmallVector<Value> inputs;
  for (sched::LaunchOp g : ring.terms) {
    Value in = alloc(stackedOf(g.getIns()[0]));
    auto stack = cast<sched::LaunchOp>(b_.clone(*ring.stack));
    stack.getInsMutable().assign(ValueRange{g.getIns()[0]});
    stack.getOutsMutable().assign(ValueRange{in});
    stack.setParamsAttr(ringOrder);
    inputs.push_back(in);
  }
  // Sums are `add` launches with the stacking's micro-batch and marks.
  auto add = [&](Value a, Value c, Value into) {
    auto l = cast<sched::LaunchOp>(b_.clone(*ring.stack));
    l.setKernelAttr(b_.getStringAttr("add"));
    l.removeParamsAttr();
    l.getInsMutable().assign(ValueRange{a, c});
    l.getOutsMutable().assign(ValueRange{into});
  };
  // received: the running sum the rank before passed on at the step
  // before (its pieces arriving at back event values `arrived`).
  Value received, sum;
  SmallVector<int64_t> arrived(k, 0);
  for (int64_t t = 0; t < parts; ++t) {
    const bool last = t + 1 == parts;
    sum = alloc(partType);
    Value next = last ? Value() : alloc(partType);
    SmallVector<int64_t> sent(k, 0);
    for (int64_t j = 0; j < k; ++j) {
      // This piece's terms, added in the order the unsharded sum has them.
      Value acc;
      for (size_t i = 0; i < ring.terms.size(); ++i) {
        const bool lastTerm = i + 1 == ring.terms.size();
        Value in = rows(inputs[i], t * b + j * n, n, loc);
        Value into = lastTerm && (!received || last)
                         ? rows(sum, j * n, n, loc)
                         : alloc(MemRefType::get(
                               [&] {
                                 SmallVector<int64_t> s(partType.getShape());
                                 s[0] = n;
                                 return s;
                               }(),
                               partType.getElementType()));
        SmallVector<Value> ins(ring.terms[i].getIns());
        ins[0] = in;
        // The first term writes the piece's sum; the others their own
        // rows, added to it.
        Value target = acc ? alloc(cast<MemRefType>(acc.getType())) : into;
        auto g = cast<sched::LaunchOp>(b_.clone(*ring.terms[i]));
        g.getInsMutable().assign(ins);
        g.getOutsMutable().assign(ValueRange{target});
        if (acc)
          add(acc, target, into);
        acc = into;
      }
      if (received && !last) {
        sched::EventWaitOp::create(b_, loc, i32(backEvent_), i64(arrived[j]),
                                   i32(0));
        add(rows(received, j * n, n, loc), acc, rows(sum, j * n, n, loc));
      }
      if (!last) {
        shift(rows(sum, j * n, n, loc), rows(next, j * n, n, loc), loc);
        sent[j] = back_;
      }
    }
    if (!last) {
      received = next;
      arrived = sent;
    }
  }
  // The last sum's pieces arrive while stream 0 goes on with what does not
  // read the result (in backward, the weight gradients and the gathers they
  // read): it waits for them, and adds them, right before the first reader.
  Operation *reader = nullptr;
  for (Operation *user : out.getUsers())
    if (user != ring.scatter.getOperation() &&
        user->getBlock() == ring.stack->getBlock() &&
        ring.stack->isBeforeInBlock(user) &&
        (!reader || user->isBeforeInBlock(reader)))
      reader = user;
  OpBuilder::InsertPoint here = b_.saveInsertionPoint();
  if (reader)
    b_.setInsertionPoint(reader);
  sched::EventWaitOp::create(b_, loc, i32(backEvent_), i64(arrived[k - 1]),
                             i32(0));
  add(received, sum, out);
  b_.restoreInsertionPoint(here);
  SmallVector<Operation *> dead = {ring.scatter, ring.stack};
  for (sched::LaunchOp a : ring.adds)
    dead.push_back(a);
  for (sched::LaunchOp g : ring.terms)
    dead.push_back(g);
  for (Operation *op : dead) {
    SmallVector<Value> buffers(op->getOperands());
    op->erase();
    for (Value v : buffers)
      if (isAlloc(v) && v.use_empty())
        v.getDefiningOp()->erase();
  }
  ++stats_.scatterRings;
}

FailureOr<TpOverlapStats> TpOverlapper::run() {
  const int64_t microBatches = unroll();
  // Events 0 to 4 belong to the optimizer, the data-parallel hand-overs
  // and ZeRO 3's gathers even where a step does not use them yet.
  FreeEventAndStream free = firstFree(step_, 5);
  sendEvent_ = free.event;
  backEvent_ = sendEvent_ + 1;
  stream_ = free.stream;

  // In program order, so that each event's values rise in it.
  struct Work {
    sched::LaunchOp gemm;
    sched::CollectiveOp sum;
    std::optional<GatherRing> gather;
    std::optional<ScatterRing> scatter;
    std::optional<Prefetch> prefetch;
  };
  std::vector<Work> work;
  SmallVector<sched::CollectiveOp> whole;
  for (Operation &op : step_.getBody().front()) {
    // Paired, the other micro-batch hides each collective whole: no
    // pieces, no rings.
    if (pairs_) {
      auto c = dyn_cast<sched::CollectiveOp>(op);
      auto slot = op.getAttrOfType<IntegerAttr>(kTpPairSlotAttr);
      if (c && c.getAxis() == sched::MeshAxis::Tp && c.getStream() == 0 &&
          slot && slot.getInt() >= 0)
        whole.push_back(c);
      continue;
    }
    if (auto l = dyn_cast<sched::LaunchOp>(op)) {
      if (sched::CollectiveOp s = summedGemm(l))
        work.push_back({l, s, {}, {}, {}});
      else if (std::optional<ScatterRing> r = matchScatterRing(l))
        work.push_back({{}, {}, {}, std::move(r), {}});
      continue;
    }
    auto c = dyn_cast<sched::CollectiveOp>(op);
    if (!c)
      continue;
    if (isTpSum(c, 0) && phaseMark(c) == Phase::InputGrad)
      work.push_back({{}, c, {}, {}, {}});
    else if (std::optional<GatherRing> r = matchGatherRing(c))
      work.push_back({{}, {}, std::move(r), {}, {}});
    else if (std::optional<Prefetch> p = matchPrefetch(c))
      work.push_back({{}, {}, {}, {}, std::move(p)});
  }
  for (sched::CollectiveOp c : whole)
    moveWhole(c);
  for (Work &w : work) {
    if (w.prefetch)
      prefetch(*w.prefetch);
    else if (w.gather)
      gatherRing(*w.gather);
    else if (w.scatter)
      scatterRing(*w.scatter);
    else if (w.gemm)
      chunkGemm(w.gemm, w.sum);
    else
      hideBackwardSum(w.sum);
  }
  if (pairs_ && microBatches == 0)
    return step_.emitOpError()
           << "has no repeat of micro-batches with TP collectives for "
              "tp_comm_pair_micro_batches to pair";
  if (pairs_ && failed(pairMicroBatches(
                    step_, {sendEvent_, backEvent_, stream_}, stats_.pairs)))
    return failure();
  return stats_;
}

} // namespace

FailureOr<TpOverlapStats> overlapTensorParallel(sched::ProgramOp step,
                                                int64_t chunks, bool pairs) {
  return TpOverlapper(step, chunks, pairs).run();
}

} // namespace braid
