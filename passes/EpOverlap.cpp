//===- EpOverlap.cpp - expert parallel's exchanges beside compute ---------===//
//
// braid-overlap's part for expert parallel (braid.ep_comm_overlap). Every
// collective along ep (the gather of the token counts, the dispatch of
// the token rows to their experts' ranks and the combine back, their
// gradients, the gradient norm's gather) moves from its compute stream to
// a stream of its own, the EP stream, handed over by an event after what
// that compute stream did before it; the compute stream waits for it only
// before the first op that needs its result. One EP stream takes every
// exchange in program order, so every rank of the group meets them in the
// same order even where two compute streams issue them (DualPipeV's FB
// pairs). The micro-batches leave their sched.repeat first, since a
// repeat's body holds no events.
//
// What the compute stream runs while an exchange is in flight comes from
// the exchange's own layer: the ops of one layer that run one after the
// other on one compute stream (a window) are ordered again, each op after every op before
// it that writes what it reads or touches what it writes, so every buffer
// sees its readers and writers in the order it had and the numbers are
// the same bit for bit. The order is made one op at a time:
//  * an exchange goes as soon as what it reads is made;
//  * then what leads to a later exchange and needs no wait (the router,
//    the permutation, the experts' input gradients), so the next exchange
//    starts early;
//  * then, while exchanges are in flight, work that needs none of them:
//    in the forward the shared expert and the router's losses beside the
//    dispatch, in the backward the router's and the shared expert's
//    gradients beside the dispatch of the output gradient, and the
//    experts' weight gradients (made after the input gradients: the B/W
//    split) beside the combine of the input gradients;
//  * only then an op that waits.
// Work that needs no exchange is split between the exchanges in flight
// and the later ones of the window that have none of their own (the
// forward's combine, whose every op before it feeds it), by the bytes
// they move: the forward's dispatch takes half of the shared expert, the
// combine the rest. At the end of a window its stream waits for whatever
// is still in flight.
//
//===----------------------------------------------------------------------===//

#include "passes/EpOverlap.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "llvm/ADT/BitVector.h"
#include "mlir/IR/Builders.h"

#include "dialects/braid/Marks.h"
#include "passes/analysis/BufferAccess.h"
#include "passes/analysis/Unroll.h"

using namespace mlir;

namespace braid {
namespace {

bool isExchange(Operation *op) {
  auto c = dyn_cast<sched::CollectiveOp>(op);
  return c && c.getAxis() == sched::MeshAxis::Ep;
}

// Buffers, views and global reads run nothing: a window takes them along.
bool runsNothing(Operation *op) {
  return isa<sched::AllocOp, sched::ViewOp, sched::GetGlobalOp>(op);
}

// The stream a launch or collective runs on.
std::optional<uint32_t> streamOf(Operation *op) {
  if (auto l = dyn_cast<sched::LaunchOp>(op))
    return l.getStream();
  if (auto c = dyn_cast<sched::CollectiveOp>(op))
    return c.getStream();
  return std::nullopt;
}

int64_t elementsOf(Value v) {
  return cast<MemRefType>(v.getType()).getNumElements();
}

int64_t lastDimOf(Value v) {
  auto t = cast<MemRefType>(v.getType());
  return t.getRank() == 0 ? 1 : t.getShape().back();
}

// A launch's work, to balance with only: a GEMM's 2 M N K (the grouped
// ones at their bound of rows), anything else one per element written.
double costOf(Operation *op) {
  auto l = dyn_cast<sched::LaunchOp>(op);
  if (!l)
    return 0;
  double written = 0;
  for (Value v : l.getOuts())
    written += static_cast<double>(elementsOf(v));
  StringRef kernel = l.getKernel();
  const bool gemm = kernel == "linear" || kernel.contains("_linear");
  if (!gemm || l.getIns().size() < 2)
    return written;
  if (kernel.ends_with("_grad_weight"))
    return 2.0 * static_cast<double>(elementsOf(l.getIns()[0])) *
           static_cast<double>(lastDimOf(l.getIns()[1]));
  return 2.0 * written * static_cast<double>(lastDimOf(l.getIns()[0]));
}

int64_t bytesOf(sched::CollectiveOp c) {
  int64_t bytes = 0;
  for (Value v : c.getOutputs().empty() ? c.getBuffers() : c.getOutputs()) {
    auto t = cast<MemRefType>(v.getType());
    bytes += t.getNumElements() * t.getElementTypeBitWidth() / 8;
  }
  return bytes;
}

class EpOverlapper {
public:
  explicit EpOverlapper(sched::ProgramOp program)
      : program_(program), b_(program.getContext()) {}

  EpOverlapStats run();

private:
  // One layer's ops on one compute stream, in program order, and the op
  // after them.
  struct Window {
    SmallVector<Operation *> ops;
    Operation *next = nullptr;
    uint32_t stream = 0;
  };
  // The order a window is given: an op that runs (in it, an exchange is
  // issued to the EP stream), or the window's wait for event value
  // `wait`.
  struct Item {
    int node = -1;
    int64_t wait = 0;
  };

  SmallVector<Window> windows();
  void reorder(const Window &w);
  void place(Operation *op, const Window &w);

  IntegerAttr i32(int64_t v) { return b_.getI32IntegerAttr(v); }
  IntegerAttr i64(int64_t v) { return b_.getI64IntegerAttr(v); }

  sched::ProgramOp program_;
  OpBuilder b_;
  // Each compute stream's event that hands its work over to the EP stream
  // (one stream records each event), and its last value.
  struct HandOver {
    int32_t event = 0;
    int64_t value = 0;
  };
  HandOver &handOverOf(uint32_t stream) {
    auto [it, added] = handOvers_.try_emplace(stream);
    if (added)
      it->second.event = nextEvent_++;
    return it->second;
  }

  std::map<uint32_t, HandOver> handOvers_;
  // Event `backEvent_` hands each exchange back, with value `back_`.
  int32_t backEvent_ = 0, nextEvent_ = 0;
  int64_t back_ = 0;
  uint32_t stream_ = 0;
  EpOverlapStats stats_;
};

SmallVector<EpOverlapper::Window> EpOverlapper::windows() {
  SmallVector<Window> out;
  Window current;
  LayerAttr layer;
  bool exchanges = false;
  auto flush = [&](Operation *next) {
    if (exchanges) {
      current.next = next;
      out.push_back(std::move(current));
    }
    current = Window();
    exchanges = false;
  };
  for (Operation &op : program_.getBody().front()) {
    if (runsNothing(&op)) {
      if (!current.ops.empty())
        current.ops.push_back(&op);
      continue;
    }
    std::optional<uint32_t> stream = streamOf(&op);
    if (!stream) {
      flush(&op);
      continue;
    }
    if (!current.ops.empty() &&
        (layerMark(&op) != layer || *stream != current.stream))
      flush(&op);
    layer = layerMark(&op);
    current.stream = *stream;
    current.ops.push_back(&op);
    exchanges = exchanges || isExchange(&op);
  }
  flush(nullptr);
  return out;
}

void EpOverlapper::place(Operation *op, const Window &w) {
  if (w.next)
    op->moveBefore(w.next);
  else
    op->moveBefore(&program_.getBody().front(),
                   program_.getBody().front().end());
}

void EpOverlapper::reorder(const Window &w) {
  SmallVector<Operation *> pure, nodes;
  for (Operation *op : w.ops)
    (runsNothing(op) ? pure : nodes).push_back(op);
  const int n = static_cast<int>(nodes.size());

  // What each op must follow: directly (preds) and at all (ancestors).
  std::vector<BufferAccess> access;
  for (Operation *op : nodes)
    access.push_back(bufferAccess(op));
  std::vector<SmallVector<int>> preds(n);
  std::vector<llvm::BitVector> ancestors(n, llvm::BitVector(n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i; ++j)
      if (conflicts(access[j], access[i])) {
        preds[i].push_back(j);
        ancestors[i] |= ancestors[j];
        ancestors[i].set(j);
      }
  std::vector<bool> exchange(n);
  std::vector<double> cost(n);
  std::vector<int64_t> bytes(n, 0);
  SmallVector<int> exchanges;
  for (int i = 0; i < n; ++i) {
    exchange[i] = isExchange(nodes[i]);
    cost[i] = costOf(nodes[i]);
    if (exchange[i]) {
      bytes[i] = bytesOf(cast<sched::CollectiveOp>(nodes[i]));
      exchanges.push_back(i);
    }
  }
  // Whether an exchange has work of its own to run beside it: work that
  // an earlier exchange makes possible and that neither leads to it nor
  // follows from it (the backward's weight gradients beside the combine
  // of the input gradients), at least a quarter of the work in between.
  std::vector<bool> hasOwn(n, false);
  for (int x : exchanges) {
    double own = 0, chain = 0;
    for (int i = 0; i < n; ++i) {
      if (exchange[i] || i == x)
        continue;
      const bool afterEarlier = llvm::any_of(exchanges, [&](int e) {
        return ancestors[x].test(e) && ancestors[i].test(e);
      });
      if (!afterEarlier)
        continue;
      if (ancestors[x].test(i))
        chain += cost[i];
      else if (!ancestors[i].test(x))
        own += cost[i];
    }
    hasOwn[x] = own > 0 && own >= 0.25 * chain;
  }

  // An exchange is done once issued.
  std::vector<bool> done(n, false), waited(n, false);
  std::vector<int64_t> value(n, 0);
  std::vector<bool> coveredOne(n, false);
  SmallVector<int> inFlight;
  SmallVector<Item> order;
  double budget = 0, filled = 0;
  bool rebudget = false;

  auto ready = [&](int i) {
    return !done[i] &&
           llvm::all_of(preds[i], [&](int p) { return done[p]; });
  };
  auto needsWait = [&](int i) {
    return llvm::any_of(preds[i],
                        [&](int p) { return exchange[p] && !waited[p]; });
  };
  auto leadsToLater = [&](int i) {
    return llvm::any_of(exchanges, [&](int x) {
      return !done[x] && ancestors[x].test(i);
    });
  };
  auto needsNone = [&](int i) {
    return llvm::none_of(exchanges, [&](int x) {
      return !waited[x] && ancestors[i].test(x);
    });
  };
  auto newBudget = [&] {
    double pool = 0;
    for (int i = 0; i < n; ++i)
      if (!done[i] && !exchange[i] && !leadsToLater(i) && needsNone(i))
        pool += cost[i];
    double mine = 0, later = 0;
    for (int x : inFlight)
      mine += static_cast<double>(bytes[x]);
    for (int x : exchanges)
      if (!done[x] && !hasOwn[x])
        later += static_cast<double>(bytes[x]);
    budget = mine + later > 0 ? pool * mine / (mine + later) : pool;
    filled = 0;
  };
  auto emit = [&](int i) {
    if (needsWait(i)) {
      int64_t upTo = 0;
      for (int p : preds[i])
        if (exchange[p] && !waited[p])
          upTo = std::max(upTo, value[p]);
      order.push_back({-1, upTo});
      for (int x : inFlight)
        if (value[x] <= upTo)
          waited[x] = true;
      llvm::erase_if(inFlight, [&](int x) { return waited[x]; });
    } else {
      for (int x : inFlight)
        coveredOne[x] = true;
    }
    done[i] = true;
    order.push_back({i, 0});
  };
  auto lowest = [&](auto &&accept) {
    for (int i = 0; i < n; ++i)
      if (!exchange[i] && ready(i) && accept(i))
        return i;
    return -1;
  };

  for (int emitted = 0; emitted < n; ++emitted) {
    auto x = llvm::find_if(exchanges, [&](int e) { return ready(e); });
    if (x != exchanges.end()) {
      done[*x] = true;
      value[*x] = ++back_;
      inFlight.push_back(*x);
      order.push_back({*x, 0});
      rebudget = true;
      continue;
    }
    int i = lowest([&](int j) { return leadsToLater(j) && !needsWait(j); });
    if (i < 0 && !inFlight.empty()) {
      if (rebudget) {
        newBudget();
        rebudget = false;
      }
      if (filled < budget) {
        i = lowest([&](int j) { return !needsWait(j); });
        if (i >= 0)
          filled += cost[i];
      }
    }
    if (i < 0)
      i = lowest([&](int j) { return leadsToLater(j); });
    if (i < 0)
      i = lowest([&](int j) { return needsWait(j); });
    if (i < 0)
      i = lowest([](int) { return true; });
    emit(i);
  }
  if (!inFlight.empty()) {
    int64_t last = 0;
    for (int x : inFlight)
      last = std::max(last, value[x]);
    order.push_back({-1, last});
  }

  // The window in its new order, before the op after it.
  for (Operation *op : pure)
    place(op, w);
  if (w.next)
    b_.setInsertionPoint(w.next);
  else
    b_.setInsertionPointToEnd(&program_.getBody().front());
  bool handOver = true;
  for (const Item &item : order) {
    Location loc =
        item.node >= 0 ? nodes[item.node]->getLoc() : w.ops[0]->getLoc();
    if (item.node < 0) {
      sched::EventWaitOp::create(b_, loc, i32(backEvent_), i64(item.wait),
                                 i32(w.stream));
      continue;
    }
    Operation *op = nodes[item.node];
    if (!exchange[item.node]) {
      place(op, w);
      handOver = true;
      continue;
    }
    if (handOver) {
      HandOver &h = handOverOf(w.stream);
      ++h.value;
      sched::EventRecordOp::create(b_, loc, i32(h.event), i64(h.value),
                                   i32(w.stream));
      sched::EventWaitOp::create(b_, loc, i32(h.event), i64(h.value),
                                 i32(stream_));
      handOver = false;
    }
    place(op, w);
    cast<sched::CollectiveOp>(op).setStreamAttr(i32(stream_));
    sched::EventRecordOp::create(b_, loc, i32(backEvent_),
                                 i64(value[item.node]), i32(stream_));
    ++stats_.exchanges;
    if (coveredOne[item.node])
      ++stats_.hidden;
  }
}

EpOverlapStats EpOverlapper::run() {
  unrollRepeats(program_, [](Operation *op) {
    auto c = dyn_cast<sched::CollectiveOp>(op);
    return c && c.getAxis() == sched::MeshAxis::Ep;
  });
  // After the TP part's events and stream, where it ran.
  FreeEventAndStream free = firstFree(program_, 5);
  backEvent_ = free.event;
  nextEvent_ = backEvent_ + 1;
  stream_ = free.stream;
  for (const Window &w : windows())
    reorder(w);
  return stats_;
}

} // namespace

EpOverlapStats overlapExpertParallel(sched::ProgramOp program) {
  return EpOverlapper(program).run();
}

} // namespace braid
