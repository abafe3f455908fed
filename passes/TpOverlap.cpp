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
//    right before the first op that reads it.
// The micro-batches are stated one by one first, since a sched.repeat body
// holds no events. Events and the stream are the first ones free.
//
//===----------------------------------------------------------------------===//

#include "passes/TpOverlap.h"

#include <algorithm>

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

class TpOverlapper {
public:
  TpOverlapper(sched::ProgramOp step, int64_t chunks)
      : step_(step), b_(step.getContext()), chunks_(chunks) {}

  TpOverlapStats run();

private:
  void unroll();
  void chunkGemm(sched::LaunchOp gemm, sched::CollectiveOp sum);
  void hideBackwardSum(sched::CollectiveOp sum);
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
  int32_t sendEvent_ = 0, backEvent_ = 0;
  int64_t sent_ = 0, back_ = 0;
  uint32_t stream_ = 0;
  TpOverlapStats stats_;
};

void TpOverlapper::unroll() {
  SmallVector<sched::RepeatOp> repeats;
  for (auto r : step_.getBody().front().getOps<sched::RepeatOp>())
    repeats.push_back(r);
  for (sched::RepeatOp r : repeats) {
    bool hasSum = false;
    r.getBody().walk([&](sched::CollectiveOp c) {
      hasSum = hasSum || c.getAxis() == sched::MeshAxis::Tp;
    });
    if (!hasSum)
      continue;
    b_.setInsertionPoint(r);
    for (uint32_t i = 0; i < r.getCount(); ++i) {
      IRMapping map;
      cloneIteration(b_, r, i, map);
    }
    r.erase();
  }
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
  b_.setInsertionPoint(sum);
  handOver(loc);
  sum.setStreamAttr(i32(stream_));
  b_.setInsertionPointAfter(sum);
  handBackRecord(loc);
  for (sched::LaunchOp l : llvm::reverse(moved))
    l->moveBefore(b_.getInsertionBlock(), b_.getInsertionPoint());
  // Stream 0 goes on with what does not read the sum, up to the first op
  // that does, or that is not one of its own launches.
  Operation *at = b_.getInsertionPoint() == b_.getInsertionBlock()->end()
                      ? nullptr
                      : &*b_.getInsertionPoint();
  auto touches = [&](sched::LaunchOp l) {
    return llvm::any_of(l->getOperands(), [&](Value v) {
      auto view = v.getDefiningOp<sched::ViewOp>();
      return v == buffer || (view && view.getSource() == buffer);
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
  stats_.hiddenSums += 1;
}

TpOverlapStats TpOverlapper::run() {
  unroll();
  int32_t event = -1;
  uint32_t stream = 0;
  step_.walk([&](Operation *op) {
    if (auto r = dyn_cast<sched::EventRecordOp>(op))
      event = std::max<int32_t>(event, r.getEvent());
    if (auto w = dyn_cast<sched::EventWaitOp>(op))
      event = std::max<int32_t>(event, w.getEvent());
    if (auto s = op->getAttrOfType<IntegerAttr>("stream"))
      stream = std::max<uint32_t>(stream, s.getInt());
  });
  // Events 0 to 4 belong to the optimizer, the data-parallel hand-overs
  // and ZeRO 3's gathers even where a step does not use them yet.
  sendEvent_ = std::max(event + 1, 5);
  backEvent_ = sendEvent_ + 1;
  stream_ = std::max<uint32_t>(stream + 1, 2);

  // In program order, so that each event's values rise in it.
  struct Work {
    sched::LaunchOp gemm;
    sched::CollectiveOp sum;
  };
  SmallVector<Work> work;
  for (Operation &op : step_.getBody().front()) {
    if (auto l = dyn_cast<sched::LaunchOp>(op)) {
      if (sched::CollectiveOp s = summedGemm(l))
        work.push_back({l, s});
      continue;
    }
    if (isTpSum(&op, 0) && phaseMark(&op) == Phase::InputGrad)
      work.push_back({{}, cast<sched::CollectiveOp>(op)});
  }
  for (Work &w : work) {
    if (w.gemm)
      chunkGemm(w.gemm, w.sum);
    else
      hideBackwardSum(w.sum);
  }
  return stats_;
}

} // namespace

TpOverlapStats overlapTensorParallel(sched::ProgramOp step, int64_t chunks) {
  return TpOverlapper(step, chunks).run();
}

} // namespace braid
