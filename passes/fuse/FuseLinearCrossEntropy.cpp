//===- FuseLinearCrossEntropy.cpp - LM head chunked with cross-entropy ----===//
//
// braid-fuse-linear-cross-entropy (FuseLoss.td). The group it matches, in
// the graph autodiff produces:
//
//   %logits = braid.linear %x, %w                       (no bias)
//   %loss, %lse = braid.cross_entropy %logits, %labels
//   %dl = braid.cross_entropy_grad_input %logits, %labels, %lse
//   %dx = braid.linear_grad_input %dl, %w
//   %dw = braid.linear_grad_weight %dl, %x              (no bias)
//
// becomes one braid.linear_cross_entropy_with_grad at the place of the
// cross-entropy; without a backward (no %dl) the forward alone becomes
// braid.linear_cross_entropy. %logits must have no other reader, and %dl
// exactly the two readers above: otherwise the logits or their gradient
// would still have to exist, and nothing is gained.
//
// Under tensor parallel braid-shard has made the loss vocabulary-parallel:
//
//   %logits = braid.linear %x, %w                       (W: a vocabulary shard)
//   %stats = braid.cross_entropy_stats %logits, %labels
//   ... all-gather, %loss, %lse = braid.cross_entropy_combine ...
//   %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {vocab_shard}
//   %dx = braid.linear_grad_input %dl, %w
//   %dw = braid.linear_grad_weight %dl, %x
//
// The statistics become braid.linear_cross_entropy_stats at their place,
// and the backward braid.linear_cross_entropy_grad at the place of %dl
// (the lse it needs is the group's, known only after the all-gather).
//
//===----------------------------------------------------------------------===//

#include <algorithm>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"

namespace braid {
#define GEN_PASS_DECL_FUSELINEARCROSSENTROPYPASS
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPYPASS
#include "passes/fuse/FuseLoss.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

struct Group {
  LinearOp linear;
  // One of the two: the whole vocabulary's loss, or a shard's statistics.
  CrossEntropyOp ce;
  CrossEntropyStatsOp stats;
  // All three null (forward only) or none.
  CrossEntropyGradInputOp ceGrad;
  LinearGradInputOp gradInput;
  LinearGradWeightOp gradWeight;
};

// The LM head `linear` that makes `logits`, when it can be chunked.
LinearOp headOf(Value logits) {
  auto linear = logits.getDefiningOp<LinearOp>();
  if (!linear || linear.getBias())
    return {};
  // An empty vocabulary or no rows: nothing to chunk (the fused ops refuse
  // both).
  auto xType = cast<RankedTensorType>(linear.getInput().getType());
  auto wType = cast<RankedTensorType>(linear.getWeight().getType());
  if (wType.getDimSize(0) == 0 || xType.getNumElements() == 0)
    return {};
  return linear;
}

// The logits' one reader besides `loss`, a cross_entropy_grad_input of
// `labels` (with `lse` when given): g.ceGrad; false when there are others.
bool matchLogitsGrad(Group &g, Operation *loss, Value labels, Value lse) {
  Value logits = g.linear.getResult();
  for (Operation *user : logits.getUsers()) {
    if (user == loss)
      continue;
    auto grad = dyn_cast<CrossEntropyGradInputOp>(user);
    if (!grad || g.ceGrad || grad.getLogits() != logits ||
        grad.getLabels() != labels || (lse && grad.getLse() != lse))
      return false;
    g.ceGrad = grad;
  }
  return true;
}

// Whether `a` and `b` hold the same values: one value, or two all-gathers
// of one part (sequence parallel gathers the LM head's input again for its
// weight gradient).
bool sameValue(Value a, Value b) {
  if (a == b)
    return true;
  auto ga = a.getDefiningOp<CommAllGatherOp>();
  auto gb = b.getDefiningOp<CommAllGatherOp>();
  return ga && gb && ga.getInput() == gb.getInput() &&
         ga.getAxis() == gb.getAxis() && ga.getDim() == gb.getDim() &&
         a.getType() == b.getType();
}

// The readers of the logits' gradient: one linear_grad_input of W and one
// linear_grad_weight of x (or of the same values gathered again).
bool matchHeadGrads(Group &g) {
  Value x = g.linear.getInput(), w = g.linear.getWeight();
  Value dl = g.ceGrad.getLogitsGrad();
  for (Operation *user : dl.getUsers()) {
    if (auto gi = dyn_cast<LinearGradInputOp>(user)) {
      if (g.gradInput || gi.getGrad() != dl || gi.getWeight() != w)
        return false;
      g.gradInput = gi;
    } else if (auto gw = dyn_cast<LinearGradWeightOp>(user)) {
      if (g.gradWeight || gw.getGrad() != dl || !sameValue(gw.getInput(), x) ||
          gw.getBiasGrad())
        return false;
      g.gradWeight = gw;
    } else {
      return false;
    }
  }
  return g.gradInput && g.gradWeight;
}

// The group around a cross_entropy, or nothing when it does not match.
std::optional<Group> match(CrossEntropyOp ce) {
  Group g;
  g.ce = ce;
  g.linear = headOf(ce.getLogits());
  if (!g.linear ||
      !matchLogitsGrad(g, ce, ce.getLabels(), ce.getLse()))
    return std::nullopt;
  // Only the backward reads the lse.
  for (Operation *user : ce.getLse().getUsers())
    if (user != g.ceGrad.getOperation())
      return std::nullopt;
  if (g.ceGrad && !matchHeadGrads(g))
    return std::nullopt;
  return g;
}

// The vocabulary-parallel group around a cross_entropy_stats.
std::optional<Group> match(CrossEntropyStatsOp stats) {
  Group g;
  g.stats = stats;
  g.linear = headOf(stats.getLogits());
  if (!g.linear || !matchLogitsGrad(g, stats, stats.getLabels(), Value()) ||
      (g.ceGrad && (!g.ceGrad.getVocabShard().value_or(false) ||
                    !matchHeadGrads(g))))
    return std::nullopt;
  return g;
}

// The rows of a chunk: as many as `chunk` logits hold, but at least
// `minRows` (every chunk reads and writes all of dW, so few rows per chunk
// would make that traffic, not the GEMMs, the cost on a large vocabulary),
// and at most all rows.
int64_t chunkRows(int64_t chunk, int64_t minRows, int64_t vocab,
                  int64_t rows) {
  return std::min(rows, std::max({int64_t{1}, chunk / vocab, minRows}));
}

// The workspace of the kernels with the gradient: one chunk of f32 logits.
RankedTensorType workspaceOf(OpBuilder &b, Value x, Value w, int64_t chunk,
                             int64_t minRows) {
  auto xType = cast<RankedTensorType>(x.getType());
  const int64_t vocab = cast<RankedTensorType>(w.getType()).getDimSize(0);
  const int64_t rows = xType.getNumElements() / xType.getShape().back();
  return RankedTensorType::get({chunkRows(chunk, minRows, vocab, rows), vocab},
                               b.getF32Type());
}

// The vocabulary-parallel group: the statistics at their place, the
// backward at the place of the logits' gradient.
void rewriteShard(Group g, int64_t chunk, int64_t minRows) {
  Value x = g.linear.getInput(), w = g.linear.getWeight();
  OpBuilder b(g.stats);
  auto stats = LinearCrossEntropyStatsOp::create(
      b, g.stats.getLoc(), g.stats.getStats().getType(), x, w,
      g.stats.getLabels(), b.getI64IntegerAttr(chunk));
  copyMarks(g.stats, stats);
  g.stats.getStats().replaceAllUsesWith(stats.getStats());
  if (g.ceGrad) {
    b.setInsertionPoint(g.ceGrad);
    auto grad = LinearCrossEntropyGradOp::create(
        b, g.ceGrad.getLoc(), g.gradInput.getInputGrad().getType(),
        g.gradWeight.getWeightGrad().getType(),
        workspaceOf(b, x, w, chunk, minRows), x, w, g.ceGrad.getLabels(),
        g.ceGrad.getLse(), g.ceGrad.getScaleAttr());
    copyMarks(g.ceGrad, grad);
    g.gradInput.getInputGrad().replaceAllUsesWith(grad.getInputGrad());
    g.gradWeight.getWeightGrad().replaceAllUsesWith(grad.getWeightGrad());
    // The dW reads x itself, which the head's backward follows at once;
    // a gathering again for it goes.
    Value again = g.gradWeight.getInput();
    g.gradInput.erase();
    g.gradWeight.erase();
    g.ceGrad.erase();
    if (again != x && again.use_empty())
      again.getDefiningOp()->erase();
  }
  g.stats.erase();
  g.linear.erase();
}

void rewrite(Group g, int64_t chunk, int64_t minRows) {
  if (g.stats)
    return rewriteShard(g, chunk, minRows);
  OpBuilder b(g.ce);
  Value x = g.linear.getInput(), w = g.linear.getWeight();
  Value labels = g.ce.getLabels();
  auto chunkAttr = b.getI64IntegerAttr(chunk);
  if (!g.ceGrad) {
    auto fwd = LinearCrossEntropyOp::create(
        b, g.ce.getLoc(), g.ce.getLoss().getType(), g.ce.getLse().getType(),
        x, w, labels, chunkAttr);
    copyMarks(g.ce, fwd);
    g.ce.getLoss().replaceAllUsesWith(fwd.getLoss());
  } else {
    auto fused = LinearCrossEntropyWithGradOp::create(
        b, g.ce.getLoc(), g.ce.getLoss().getType(),
        g.gradInput.getInputGrad().getType(),
        g.gradWeight.getWeightGrad().getType(),
        workspaceOf(b, x, w, chunk, minRows), x, w, labels,
        g.ceGrad.getScaleAttr());
    // At the loss's place, so it takes the loss's marks (forward).
    copyMarks(g.ce, fused);
    g.ce.getLoss().replaceAllUsesWith(fused.getLoss());
    g.gradInput.getInputGrad().replaceAllUsesWith(fused.getInputGrad());
    g.gradWeight.getWeightGrad().replaceAllUsesWith(fused.getWeightGrad());
    g.gradInput.erase();
    g.gradWeight.erase();
    g.ceGrad.erase();
  }
  g.ce.erase();
  g.linear.erase();
}

struct FuseLinearCrossEntropyPass
    : impl::FuseLinearCrossEntropyPassBase<FuseLinearCrossEntropyPass> {
  using FuseLinearCrossEntropyPassBase::FuseLinearCrossEntropyPassBase;

  void runOnOperation() override {
    if (chunk <= 0 || minChunkRows <= 0) {
      getOperation().emitError("braid-fuse-linear-cross-entropy: chunk and "
                               "min-chunk-rows must be positive");
      return signalPassFailure();
    }
    SmallVector<Group> groups;
    getOperation().walk([&](Operation *op) {
      std::optional<Group> g;
      if (auto ce = dyn_cast<CrossEntropyOp>(op))
        g = match(ce);
      else if (auto stats = dyn_cast<CrossEntropyStatsOp>(op))
        g = match(stats);
      if (g)
        groups.push_back(*g);
    });
    for (Group &g : groups)
      rewrite(g, chunk, minChunkRows);
  }
};

} // namespace
} // namespace braid
