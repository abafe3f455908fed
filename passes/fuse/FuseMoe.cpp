//===- FuseMoe.cpp - the router and the permutations in one kernel each ---===//
//
// Three groups of a mixture-of-experts block, each rewritten on its own:
//
//   router   moe_topk(moe_scores(logits))            -> moe_route
//            moe_scores_grad(moe_topk_grad(dw) (+ ds)) -> moe_route_grad
//   permute  moe_gather(x, moe_sort(experts))        -> moe_permute
//   combine  moe_weighted_sum(moe_gather_choices(ys)) -> moe_unpermute
//            moe_gather_choices_grad(moe_weighted_sum_grad(dy).dchoices)
//                                                     -> moe_unpermute_grad
//
// The router's forward fuses alone (its scores stay a result, which the
// balancing loss and any unmatched backward read); a backward that matches
// fuses too. The combine is fused whole or not at all, since the choices
// exist only for the weighted sum and its gradients, and only where the
// experts' rows are no more than the choices (dropless, or a capacity of
// at most the choices). The fused kernels
// call the unfused ones' row functions (kernels/common/MoeRoute.h) or copy
// what they copy, so the results are the same bits.
//
//===----------------------------------------------------------------------===//
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "passes/fuse/FusionSet.h"

namespace braid {
#define GEN_PASS_DEF_FUSEMOEPASS
#include "passes/fuse/FuseMoe.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

// The top-k's gradient that `ds` is, alone or summed with another
// gradient of the scores (`other`, the balancing loss's), for the top-k
// `topk`; null when `ds` is neither.
MoeTopKGradOp topkGradOf(Value ds, MoeTopKOp topk, Value &other,
                         AddOp &sum) {
  auto matches = [&](Value v) -> MoeTopKGradOp {
    auto g = v.getDefiningOp<MoeTopKGradOp>();
    if (!g || !g.getScoresGrad().hasOneUse() ||
        g.getScores() != topk.getScores() ||
        g.getExperts() != topk.getExperts() ||
        g.getNormalize() != topk.getNormalize() ||
        g.getScale() != topk.getScale())
      return {};
    return g;
  };
  other = {};
  sum = {};
  if (MoeTopKGradOp g = matches(ds))
    return g;
  auto add = ds.getDefiningOp<AddOp>();
  if (!add || !ds.hasOneUse() || add.getLhs() == add.getRhs())
    return {};
  for (auto [mine, theirs] : {std::pair{add.getLhs(), add.getRhs()},
                              std::pair{add.getRhs(), add.getLhs()}})
    if (MoeTopKGradOp g = matches(mine)) {
      other = theirs;
      sum = add;
      return g;
    }
  return {};
}

bool fuseRouter(MoeTopKOp topk) {
  auto scores = topk.getScores().getDefiningOp<MoeScoresOp>();
  if (!scores)
    return false;
  // At the scores, which the top-k follows and the other readers of the
  // scores follow too.
  OpBuilder b(scores);
  auto route = MoeRouteOp::create(
      b, topk.getLoc(), topk.getExperts().getType(),
      topk.getWeights().getType(), scores.getScores().getType(),
      scores.getLogits(), topk.getBias(), scores.getSigmoidAttr(),
      topk.getNormalizeAttr(), topk.getScaleAttr());
  copyMarks(topk, route);
  // The backward: each scores gradient of these scores whose input is the
  // top-k's gradient (and the balancing loss's).
  SmallVector<MoeScoresGradOp> grads;
  for (Operation *user : scores.getScores().getUsers())
    if (auto g = dyn_cast<MoeScoresGradOp>(user);
        g && g.getScores() == scores.getScores() &&
        g.getSigmoid() == scores.getSigmoid())
      grads.push_back(g);
  for (MoeScoresGradOp g : grads) {
    Value other;
    AddOp sum;
    MoeTopKGradOp tg = topkGradOf(g.getScoresGrad(), topk, other, sum);
    if (!tg)
      continue;
    b.setInsertionPoint(g);
    auto rg = MoeRouteGradOp::create(
        b, g.getLoc(), g.getLogitsGrad().getType(), tg.getWeightsGrad(),
        route.getScores(), route.getExperts(), other, scores.getSigmoidAttr(),
        topk.getNormalizeAttr(), topk.getScaleAttr());
    copyMarks(g, rg);
    g.getLogitsGrad().replaceAllUsesWith(rg.getLogitsGrad());
    g.erase();
    if (sum)
      sum.erase();
    tg.erase();
  }
  topk.getExperts().replaceAllUsesWith(route.getExperts());
  topk.getWeights().replaceAllUsesWith(route.getWeights());
  scores.getScores().replaceAllUsesWith(route.getScores());
  topk.erase();
  scores.erase();
  return true;
}

bool fusePermute(MoeGatherOp gather) {
  auto sort = gather.getPositions().getDefiningOp<MoeSortOp>();
  // A second gather of the same choices keeps the sort.
  if (!sort || llvm::count_if(sort.getPositions().getUsers(), [](Operation *u) {
                 return isa<MoeGatherOp>(u);
               }) != 1)
    return false;
  // At the sort, whose results the permute's replace, when the tokens are
  // made before it (as braid-import orders them); else at the gather.
  Operation *input = gather.getInput().getDefiningOp();
  const bool atSort = !input || input->isBeforeInBlock(sort);
  OpBuilder b(atSort ? sort.getOperation() : gather.getOperation());
  auto permute = MoePermuteOp::create(
      b, gather.getLoc(), gather.getRows().getType(),
      sort.getPositions().getType(), sort.getOffsets().getType(),
      gather.getInput(), sort.getExperts(), sort.getCapacityAttr());
  copyMarks(gather, permute);
  gather.getRows().replaceAllUsesWith(permute.getRows());
  sort.getPositions().replaceAllUsesWith(permute.getPositions());
  sort.getOffsets().replaceAllUsesWith(permute.getOffsets());
  gather.erase();
  sort.erase();
  return true;
}

struct CombineBackward {
  MoeWeightedSumGradOp grad;
  MoeGatherChoicesGradOp scatter;
};

bool fuseCombine(MoeWeightedSumOp sum) {
  auto gather = sum.getChoices().getDefiningOp<MoeGatherChoicesOp>();
  if (!gather)
    return false;
  // The fused gradient reads the experts' rows where the unfused one reads
  // the choices: in capacity mode with more slots than choices that would
  // keep more for the backward, so the combine stays unfused there.
  auto rowsType = cast<RankedTensorType>(gather.getRows().getType());
  auto positionsType =
      cast<RankedTensorType>(gather.getPositions().getType());
  if (rowsType.getDimSize(0) > positionsType.getNumElements())
    return false;
  SmallVector<CombineBackward> backward;
  for (Operation *user : gather.getChoices().getUsers()) {
    if (user == sum.getOperation())
      continue;
    auto g = dyn_cast<MoeWeightedSumGradOp>(user);
    if (!g || g.getChoices() != gather.getChoices() ||
        g.getWeights() != sum.getWeights() ||
        !g.getChoicesGrad().hasOneUse())
      return false;
    auto scatter =
        dyn_cast<MoeGatherChoicesGradOp>(*g.getChoicesGrad().getUsers().begin());
    if (!scatter || scatter.getPositions() != gather.getPositions() ||
        scatter.getRowsGrad().getType() != gather.getRows().getType())
      return false;
    backward.push_back({g, scatter});
  }
  OpBuilder b(sum);
  auto unpermute = MoeUnpermuteOp::create(
      b, sum.getLoc(), sum.getResult().getType(), gather.getRows(),
      gather.getPositions(), sum.getWeights());
  copyMarks(sum, unpermute);
  sum.getResult().replaceAllUsesWith(unpermute.getResult());
  sum.erase();
  for (CombineBackward &bw : backward) {
    b.setInsertionPoint(bw.grad);
    auto ug = MoeUnpermuteGradOp::create(
        b, bw.grad.getLoc(), gather.getRows().getType(),
        bw.grad.getWeightsGrad().getType(), bw.grad.getGrad(),
        gather.getRows(), gather.getPositions(), sum.getWeights());
    copyMarks(bw.grad, ug);
    bw.scatter.getRowsGrad().replaceAllUsesWith(ug.getRowsGrad());
    bw.grad.getWeightsGrad().replaceAllUsesWith(ug.getWeightsGrad());
    bw.scatter.erase();
    bw.grad.erase();
  }
  gather.erase();
  return true;
}

struct FuseMoePass : impl::FuseMoePassBase<FuseMoePass> {
  void runOnOperation() override {
    SmallVector<MoeTopKOp> routers;
    SmallVector<MoeGatherOp> gathers;
    SmallVector<MoeWeightedSumOp> sums;
    getOperation().walk([&](Operation *op) {
      if (auto t = dyn_cast<MoeTopKOp>(op))
        routers.push_back(t);
      else if (auto g = dyn_cast<MoeGatherOp>(op))
        gathers.push_back(g);
      else if (auto s = dyn_cast<MoeWeightedSumOp>(op))
        sums.push_back(s);
    });
    for (MoeTopKOp t : routers)
      fuseRouter(t);
    for (MoeGatherOp g : gathers)
      fusePermute(g);
    for (MoeWeightedSumOp s : sums)
      fuseCombine(s);
  }
};

} // namespace
} // namespace braid
