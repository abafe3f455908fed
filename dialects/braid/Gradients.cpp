//===- Gradients.cpp - the gradient rule of each differentiable op --------===//
//
// One DifferentiableOp::buildGradient per forward op. A rule emits the
// input-gradient op (B, `*_grad_input`) for the operands that need a
// gradient and, where the op has weights, the weight-gradient op (W,
// `*_grad_weight`, which has the WeightGradient trait). Weight gradients go
// to gb.gradTarget(weight), so that in BF16 steps they are the f32
// gradients of the parameters themselves.
//
//===----------------------------------------------------------------------===//
#include "dialects/braid/BraidOps.h"

using namespace mlir;

namespace braid {
namespace {

Type typeOf(Value v) { return v.getType(); }

} // namespace

LogicalResult CrossEntropyOp::buildGradient(GradientBuilder &gb) {
  // The loss is the root: its incoming gradient is 1.
  Value dl = CrossEntropyGradInputOp::create(
      gb.builder(), getLoc(), typeOf(getLogits()), getLogits(), getLabels(),
      getLse(), gb.builder().getF32FloatAttr(1.0f), {});
  gb.addGrad(getLogits(), dl);
  return success();
}

LogicalResult LinearOp::buildGradient(GradientBuilder &gb) {
  OpBuilder &b = gb.builder();
  Value dy = gb.grad(getResult());
  if (gb.needsGrad(getInput()))
    gb.addGrad(getInput(), LinearGradInputOp::create(
                               b, getLoc(), typeOf(getInput()), dy,
                               getWeight()));
  if (gb.needsGrad(getWeight()) || (getBias() && gb.needsGrad(getBias()))) {
    Value weight = gb.gradTarget(getWeight());
    Value bias = getBias() ? gb.gradTarget(getBias()) : Value();
    auto w = LinearGradWeightOp::create(b, getLoc(), typeOf(weight),
                                        bias ? typeOf(bias) : Type(), dy,
                                        getInput());
    gb.addGrad(weight, w.getWeightGrad());
    if (bias)
      gb.addGrad(bias, w.getBiasGrad());
  }
  return success();
}

LogicalResult EmbeddingOp::buildGradient(GradientBuilder &gb) {
  Value table = gb.gradTarget(getTable());
  gb.addGrad(table, EmbeddingGradWeightOp::create(gb.builder(), getLoc(),
                                                  typeOf(table),
                                                  gb.grad(getResult()),
                                                  getIds(), {}));
  return success();
}

LogicalResult LayerNormOp::buildGradient(GradientBuilder &gb) {
  OpBuilder &b = gb.builder();
  Value dy = gb.grad(getResult());
  gb.addGrad(getInput(), LayerNormGradInputOp::create(
                             b, getLoc(), typeOf(getInput()), dy, getInput(),
                             getWeight(), getMean(), getRstd()));
  Value weight = gb.gradTarget(getWeight());
  Value bias = gb.gradTarget(getBias());
  auto w = LayerNormGradWeightOp::create(b, getLoc(), typeOf(weight),
                                         typeOf(bias), dy, getInput(),
                                         getMean(), getRstd());
  gb.addGrad(weight, w.getWeightGrad());
  gb.addGrad(bias, w.getBiasGrad());
  return success();
}

LogicalResult RMSNormOp::buildGradient(GradientBuilder &gb) {
  OpBuilder &b = gb.builder();
  Value dy = gb.grad(getResult());
  gb.addGrad(getInput(),
             RMSNormGradInputOp::create(b, getLoc(), typeOf(getInput()), dy,
                                        getInput(), getWeight(), getRstd()));
  Value weight = gb.gradTarget(getWeight());
  gb.addGrad(weight, RMSNormGradWeightOp::create(b, getLoc(), typeOf(weight),
                                                 dy, getInput(), getRstd()));
  return success();
}

LogicalResult AttentionOp::buildGradient(GradientBuilder &gb) {
  auto g = AttentionGradInputOp::create(
      gb.builder(), getLoc(), typeOf(getQuery()), typeOf(getKey()),
      typeOf(getValue()), gb.grad(getResult()), getQuery(), getKey(),
      getValue(), getProbs(), getSegmentIds(), getNumHeadsAttr(),
      getNumKvHeadsAttr(), getCausalAttr(), getScaleAttr(), getDropoutAttr(),
      getRngOffsetAttr(), getPrefixAttr(), {}, {}, {});
  gb.addGrad(getQuery(), g.getQueryGrad());
  gb.addGrad(getKey(), g.getKeyGrad());
  gb.addGrad(getValue(), g.getValueGrad());
  return success();
}

LogicalResult RepeatKVOp::buildGradient(GradientBuilder &gb) {
  gb.addGrad(getInput(), RepeatKVGradInputOp::create(
                             gb.builder(), getLoc(), typeOf(getInput()),
                             gb.grad(getResult()), getNumHeadsAttr(),
                             getNumKvHeadsAttr(), {}, {}));
  return success();
}

LogicalResult RoPEOp::buildGradient(GradientBuilder &gb) {
  gb.addGrad(getInput(),
             RoPEGradInputOp::create(gb.builder(), getLoc(),
                                     typeOf(getInput()), gb.grad(getResult()),
                                     getNumHeadsAttr(), getThetaAttr(), {}));
  return success();
}

LogicalResult GeLUOp::buildGradient(GradientBuilder &gb) {
  gb.addGrad(getInput(),
             GeLUGradInputOp::create(gb.builder(), getLoc(),
                                     typeOf(getInput()), gb.grad(getResult()),
                                     getInput()));
  return success();
}

LogicalResult SwiGLUOp::buildGradient(GradientBuilder &gb) {
  auto g = SwiGLUGradInputOp::create(gb.builder(), getLoc(), typeOf(getGate()),
                                     typeOf(getUp()), gb.grad(getResult()),
                                     getGate(), getUp());
  gb.addGrad(getGate(), g.getGateGrad());
  gb.addGrad(getUp(), g.getUpGrad());
  return success();
}

LogicalResult AddOp::buildGradient(GradientBuilder &gb) {
  Value dy = gb.grad(getResult());
  gb.addGrad(getLhs(), dy);
  gb.addGrad(getRhs(), dy);
  return success();
}

LogicalResult DropoutOp::buildGradient(GradientBuilder &gb) {
  gb.addGrad(getInput(), DropoutGradInputOp::create(
                             gb.builder(), getLoc(), typeOf(getInput()),
                             gb.grad(getResult()), getPAttr(),
                             getRngOffsetAttr(), {}, {}));
  return success();
}

LogicalResult CastOp::buildGradient(GradientBuilder &gb) {
  // The opposite cast: the gradient keeps the type of the value it is of.
  gb.addGrad(getInput(), CastOp::create(gb.builder(), getLoc(),
                                        typeOf(getInput()),
                                        gb.grad(getResult())));
  return success();
}

LogicalResult SplitOp::buildGradient(GradientBuilder &gb) {
  SmallVector<Value> partGrads;
  for (Value part : getParts()) {
    Value g = gb.grad(part);
    if (!g)
      return emitOpError("autodiff needs a gradient for every part of a split");
    partGrads.push_back(g);
  }
  gb.addGrad(getInput(), SplitGradInputOp::create(gb.builder(), getLoc(),
                                                  typeOf(getInput()),
                                                  partGrads));
  return success();
}

// Mixture of experts (docs/moe.md). The router's choices are integers and
// take no gradient; its logits get the weights' gradient.
LogicalResult MoeRouteOp::buildGradient(GradientBuilder &gb) {
  Value dw = gb.grad(getWeights());
  if (!dw)
    return emitOpError("autodiff needs the router weights' gradient");
  gb.addGrad(getLogits(),
             MoeRouteGradOp::create(gb.builder(), getLoc(), typeOf(getLogits()),
                                    dw, getScores(), getExperts(),
                                    gb.grad(getScores()), getSigmoidAttr(),
                                    getNormalizeAttr(), getScaleAttr()));
  return success();
}

// The unfused router (braid-fuse-moe makes the two one moe_route): the
// scores' gradient is the sum of the top-k's and the balancing loss's.
LogicalResult MoeScoresOp::buildGradient(GradientBuilder &gb) {
  Value ds = gb.grad(getScores());
  if (!ds)
    return success();
  gb.addGrad(getLogits(), MoeScoresGradOp::create(
                              gb.builder(), getLoc(), typeOf(getLogits()), ds,
                              getScores(), getSigmoidAttr()));
  return success();
}

LogicalResult MoeTopKOp::buildGradient(GradientBuilder &gb) {
  Value dw = gb.grad(getWeights());
  if (!dw)
    return emitOpError("autodiff needs the router weights' gradient");
  gb.addGrad(getScores(),
             MoeTopKGradOp::create(gb.builder(), getLoc(), typeOf(getScores()),
                                   dw, getScores(), getExperts(),
                                   getNormalizeAttr(), getScaleAttr()));
  return success();
}

// The balancing losses are roots: their own gradient is 1.
LogicalResult MoeAuxLossOp::buildGradient(GradientBuilder &gb) {
  gb.addGrad(getScores(),
             MoeAuxLossGradOp::create(
                 gb.builder(), getLoc(), typeOf(getScores()), getScores(),
                 getCounts(), getCoeffAttr(), getTopKAttr(), getSigmoidAttr(),
                 getPartsAttr()));
  return success();
}

LogicalResult MoeZLossOp::buildGradient(GradientBuilder &gb) {
  gb.addGrad(getLogits(),
             MoeZLossGradOp::create(gb.builder(), getLoc(), typeOf(getLogits()),
                                    getLogits(), getCoeffAttr()));
  return success();
}

// moe_permute's and moe_gather's: each token's gradient, the sum of its
// rows'.
static void addPermuteGrad(GradientBuilder &gb, Location loc, Value input,
                           Value rows, Value positions) {
  if (Value drows = gb.grad(rows))
    gb.addGrad(input, MoePermuteGradOp::create(gb.builder(), loc,
                                               typeOf(input), drows,
                                               positions));
}

LogicalResult MoePermuteOp::buildGradient(GradientBuilder &gb) {
  addPermuteGrad(gb, getLoc(), getInput(), getRows(), getPositions());
  return success();
}

LogicalResult MoeUnpermuteOp::buildGradient(GradientBuilder &gb) {
  auto g = MoeUnpermuteGradOp::create(
      gb.builder(), getLoc(), typeOf(getRows()), typeOf(getWeights()),
      gb.grad(getResult()), getRows(), getPositions(), getWeights());
  gb.addGrad(getRows(), g.getRowsGrad());
  gb.addGrad(getWeights(), g.getWeightsGrad());
  return success();
}

// The unfused permutations: the gather's gradient is the fused permute's;
// the unpermute's is the weighted sum's and then the gather's.
LogicalResult MoeGatherOp::buildGradient(GradientBuilder &gb) {
  addPermuteGrad(gb, getLoc(), getInput(), getRows(), getPositions());
  return success();
}

LogicalResult MoeGatherChoicesOp::buildGradient(GradientBuilder &gb) {
  Value dc = gb.grad(getChoices());
  if (!dc)
    return success();
  gb.addGrad(getRows(), MoeGatherChoicesGradOp::create(
                            gb.builder(), getLoc(), typeOf(getRows()), dc,
                            getPositions()));
  return success();
}

LogicalResult MoeWeightedSumOp::buildGradient(GradientBuilder &gb) {
  auto g = MoeWeightedSumGradOp::create(
      gb.builder(), getLoc(), typeOf(getChoices()), typeOf(getWeights()),
      gb.grad(getResult()), getChoices(), getWeights());
  gb.addGrad(getChoices(), g.getChoicesGrad());
  gb.addGrad(getWeights(), g.getWeightsGrad());
  return success();
}

// Sub-units: the split and the join are each other's adjoints; integer
// parts (the router's choices) take no gradient.
LogicalResult MoeSplitTokensOp::buildGradient(GradientBuilder &gb) {
  if (!gb.needsGrad(getInput()))
    return success();
  SmallVector<Value> partGrads;
  for (Value part : getParts()) {
    Value g = gb.grad(part);
    if (!g)
      return emitOpError("autodiff needs a gradient for every part of the "
                         "tokens");
    partGrads.push_back(g);
  }
  gb.addGrad(getInput(),
             MoeJoinTokensOp::create(gb.builder(), getLoc(), typeOf(getInput()),
                                     partGrads));
  return success();
}

LogicalResult MoeJoinTokensOp::buildGradient(GradientBuilder &gb) {
  SmallVector<Type> types;
  for (Value part : getParts())
    types.push_back(part.getType());
  auto split = MoeSplitTokensOp::create(gb.builder(), getLoc(), types,
                                        gb.grad(getResult()));
  for (auto [part, g] : llvm::zip(getParts(), split.getParts()))
    gb.addGrad(part, g);
  return success();
}

LogicalResult MoeBatchedLinearOp::buildGradient(GradientBuilder &gb) {
  OpBuilder &b = gb.builder();
  Value dy = gb.grad(getResult());
  if (gb.needsGrad(getInput()))
    gb.addGrad(getInput(),
               MoeBatchedLinearGradInputOp::create(
                   b, getLoc(), typeOf(getInput()), dy, getWeight()));
  Value weight = gb.gradTarget(getWeight());
  gb.addGrad(weight, MoeBatchedLinearGradWeightOp::create(
                         b, getLoc(), typeOf(weight), dy, getInput()));
  return success();
}

// Expert parallel's exchanges are each other's adjoints: the rows a rank
// sent come back with their gradients by the way back, and so on.
namespace {
template <typename Back, typename Exchange>
LogicalResult exchangeGradient(Exchange op, GradientBuilder &gb) {
  if (gb.needsGrad(op.getRows()))
    gb.addGrad(op.getRows(),
               Back::create(gb.builder(), op.getLoc(), typeOf(op.getRows()),
                            gb.grad(op.getResult()), op.getCounts(),
                            op.getAxisAttr()));
  return success();
}
} // namespace

LogicalResult CommDispatchOp::buildGradient(GradientBuilder &gb) {
  return exchangeGradient<CommCombineOp>(*this, gb);
}

LogicalResult CommCombineOp::buildGradient(GradientBuilder &gb) {
  return exchangeGradient<CommDispatchOp>(*this, gb);
}

// Hot-expert replication: splitting and merging rows are each other's
// adjoints, and a replica's weight gradient goes back to its owner.
LogicalResult MoeSplitRowsOp::buildGradient(GradientBuilder &gb) {
  Value dcold = gb.grad(getCold()), dhot = gb.grad(getHotRows());
  if (!dcold || !dhot)
    return emitOpError("autodiff needs the gradients of both the cold and "
                       "the hot rows");
  gb.addGrad(getRows(),
             MoeMergeRowsOp::create(gb.builder(), getLoc(), typeOf(getRows()),
                                    dcold, dhot, getOffsets(), getHot()));
  return success();
}

LogicalResult MoeMergeRowsOp::buildGradient(GradientBuilder &gb) {
  auto hot = cast<RankedTensorType>(getHot().getType());
  auto split = MoeSplitRowsOp::create(
      gb.builder(), getLoc(), typeOf(getCold()), typeOf(getHotRows()),
      RankedTensorType::get({hot.getDimSize(0) + 1}, hot.getElementType()),
      gb.grad(getResult()), getOffsets(), getHot());
  gb.addGrad(getCold(), split.getCold());
  gb.addGrad(getHotRows(), split.getHotRows());
  return success();
}

LogicalResult CommReplicateExpertsOp::buildGradient(GradientBuilder &gb) {
  Value target = gb.gradTarget(getWeight());
  gb.addGrad(target, CommReduceReplicasOp::create(
                         gb.builder(), getLoc(), typeOf(target),
                         gb.grad(getResult()), getHot(), getAxisAttr()));
  return success();
}

LogicalResult MoeGroupedLinearOp::buildGradient(GradientBuilder &gb) {
  OpBuilder &b = gb.builder();
  Value dy = gb.grad(getResult());
  if (gb.needsGrad(getInput()))
    gb.addGrad(getInput(), MoeGroupedLinearGradInputOp::create(
                               b, getLoc(), typeOf(getInput()), dy, getWeight(),
                               getOffsets()));
  Value weight = gb.gradTarget(getWeight());
  gb.addGrad(weight,
             MoeGroupedLinearGradWeightOp::create(
                 b, getLoc(), typeOf(weight), dy, getInput(), getOffsets()));
  return success();
}

} // namespace braid
