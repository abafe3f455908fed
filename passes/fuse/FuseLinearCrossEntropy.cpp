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
  CrossEntropyOp ce;
  // All three null (forward only) or none.
  CrossEntropyGradInputOp ceGrad;
  LinearGradInputOp gradInput;
  LinearGradWeightOp gradWeight;
};

// The group around a cross_entropy, or nothing when it does not match.
std::optional<Group> match(CrossEntropyOp ce) {
  Group g;
  g.ce = ce;
  g.linear = ce.getLogits().getDefiningOp<LinearOp>();
  if (!g.linear || g.linear.getBias())
    return std::nullopt;
  // An empty vocabulary or no rows: nothing to chunk (the fused ops refuse
  // both).
  auto xType = cast<RankedTensorType>(g.linear.getInput().getType());
  auto wType = cast<RankedTensorType>(g.linear.getWeight().getType());
  if (wType.getDimSize(0) == 0 || xType.getNumElements() == 0)
    return std::nullopt;
  Value logits = g.linear.getResult();
  Value x = g.linear.getInput(), w = g.linear.getWeight();
  for (Operation *user : logits.getUsers()) {
    if (user == ce.getOperation())
      continue;
    auto grad = dyn_cast<CrossEntropyGradInputOp>(user);
    if (!grad || g.ceGrad || grad.getLogits() != logits ||
        grad.getLabels() != ce.getLabels() || grad.getLse() != ce.getLse())
      return std::nullopt;
    g.ceGrad = grad;
  }
  // Only the backward reads the lse.
  for (Operation *user : ce.getLse().getUsers())
    if (user != g.ceGrad.getOperation())
      return std::nullopt;
  if (!g.ceGrad)
    return g;
  Value dl = g.ceGrad.getLogitsGrad();
  for (Operation *user : dl.getUsers()) {
    if (auto gi = dyn_cast<LinearGradInputOp>(user)) {
      if (g.gradInput || gi.getGrad() != dl || gi.getWeight() != w)
        return std::nullopt;
      g.gradInput = gi;
    } else if (auto gw = dyn_cast<LinearGradWeightOp>(user)) {
      if (g.gradWeight || gw.getGrad() != dl || gw.getInput() != x ||
          gw.getBiasGrad())
        return std::nullopt;
      g.gradWeight = gw;
    } else {
      return std::nullopt;
    }
  }
  if (!g.gradInput || !g.gradWeight)
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

void rewrite(Group g, int64_t chunk, int64_t minRows) {
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
    auto xType = cast<RankedTensorType>(x.getType());
    const int64_t vocab = cast<RankedTensorType>(w.getType()).getDimSize(0);
    const int64_t rows = xType.getNumElements() / xType.getShape().back();
    auto workspace = RankedTensorType::get(
        {chunkRows(chunk, minRows, vocab, rows), vocab}, b.getF32Type());
    auto fused = LinearCrossEntropyWithGradOp::create(
        b, g.ce.getLoc(), g.ce.getLoss().getType(),
        g.gradInput.getInputGrad().getType(),
        g.gradWeight.getWeightGrad().getType(), workspace, x, w, labels,
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
    getOperation().walk([&](CrossEntropyOp ce) {
      if (std::optional<Group> g = match(ce))
        groups.push_back(*g);
    });
    for (Group &g : groups)
      rewrite(g, chunk, minChunkRows);
  }
};

} // namespace
} // namespace braid
