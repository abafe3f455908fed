//===- MoeOps.cpp - verifiers of the mixture-of-experts ops ---------------===//
//
// The token tensors (logits [..., E], choices [..., K], hidden states
// [..., D]) share their leading dimensions; the permuted rows are [R, D]
// with R the choices there are (N * K).
//
//===----------------------------------------------------------------------===//
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/VerifyUtils.h"

using namespace mlir;
using namespace braid::verify;

namespace braid {
namespace {

int64_t numelOf(Value v) { return tensorOf(v).getNumElements(); }

// `choices` [..., K] has the leading dimensions of `tokens` [..., X].
LogicalResult verifyChoices(Operation *op, Value choices, Value tokens,
                            StringRef what, StringRef tokensWhat) {
  if (failed(expectMinRank(op, tokens, 2, tokensWhat)))
    return failure();
  return expectShape(op, choices, append(leading(tokens), lastDim(choices)),
                     what);
}

// The router's choices: K of E experts.
LogicalResult verifyTopK(Operation *op, Value experts, Value scores) {
  if (failed(verifyChoices(op, experts, scores, "experts", "scores")))
    return failure();
  const int64_t k = lastDim(experts), e = lastDim(scores);
  if (k < 1 || k > e)
    return op->emitOpError()
           << "chooses " << k << " experts of " << e << "; 1 to " << e;
  return success();
}

// The router's choice (moe_route, moe_topk): K of the E experts of `rows`
// [..., E] (logits or scores), a weight per choice, a bias per expert.
LogicalResult verifyChoice(Operation *op, Value experts, Value weights,
                           Value bias, Value rows) {
  if (failed(verifyTopK(op, experts, rows)) ||
      failed(expectShape(op, weights, shapeOf(experts), "weights")))
    return failure();
  if (bias && failed(expectShape(op, bias, {lastDim(rows)}, "bias")))
    return failure();
  return success();
}

// The weights' gradient [..., K] of a choice of the experts of `scores`.
LogicalResult verifyChoiceGrad(Operation *op, Value weightsGrad,
                               Value experts, Value scores) {
  if (failed(verifyTopK(op, experts, scores)))
    return failure();
  return expectShape(op, weightsGrad, shapeOf(experts), "weights gradient");
}

// Rows [R, D] permuted from tokens [..., D] by `positions` [..., K]: R is
// a row per choice dropless, E * capacity in capacity mode, so only the
// permute op (which knows which) fixes it.
LogicalResult verifyRows(Operation *op, Value rows, Value tokens,
                         Value positions) {
  if (failed(verifyChoices(op, positions, tokens, "positions", "tokens")) ||
      failed(expectSameElementType(op, rows, tokens, "rows", "tokens")) ||
      failed(expectRank(op, rows, 2, "rows")))
    return failure();
  return expectShape(op, rows, {shapeOf(rows)[0], lastDim(tokens)}, "rows");
}

// Rows [R, width] and a weight [E, out, in] whose `in` (rowsAreInput) or
// `out` is the rows' width.
LogicalResult verifyRowWidth(Operation *op, Value rows, Value weight,
                             bool rowsAreInput) {
  if (failed(expectRank(op, rows, 2, "rows")) ||
      failed(expectRank(op, weight, 3, "weight")))
    return failure();
  const int64_t width = shapeOf(weight)[rowsAreInput ? 2 : 1];
  if (lastDim(rows) != width)
    return op->emitOpError()
           << "rows have " << lastDim(rows) << " columns, the weight "
           << shapeStr(shapeOf(weight)) << " takes " << width;
  return success();
}

// The rows are E equal blocks (capacity mode's slots), E = weight's dim 0.
LogicalResult verifyEqualBlocks(Operation *op, Value rows, Value weight) {
  const int64_t e = shapeOf(weight)[0];
  if (e < 1 || shapeOf(rows)[0] % e != 0)
    return op->emitOpError()
           << shapeOf(rows)[0] << " rows are not equal blocks of " << e
           << " experts";
  return success();
}

// Rows [E * C, width] in E equal blocks, a weight [E, out, in].
LogicalResult verifyBlocks(Operation *op, Value rows, Value weight,
                           bool rowsAreInput) {
  if (failed(verifyRowWidth(op, rows, weight, rowsAreInput)))
    return failure();
  return verifyEqualBlocks(op, rows, weight);
}

// Offsets [B + 1] of blocks that cycle over E experts: one per expert, or
// under expert parallel one per sending rank and local expert.
LogicalResult verifyBlockOffsets(Operation *op, Value offsets,
                                 int64_t experts) {
  if (failed(expectRank(op, offsets, 1, "offsets")))
    return failure();
  const int64_t blocks = shapeOf(offsets)[0] - 1;
  if (experts < 1 || blocks < experts || blocks % experts != 0)
    return op->emitOpError()
           << "offsets " << offsets.getType()
           << " must hold one more than a multiple of the " << experts
           << " experts (a block per expert, or per sending rank and expert)";
  return success();
}

// The rows [R, in], a weight [E, out, in] and offsets [k x E + 1].
LogicalResult verifyGrouped(Operation *op, Value rows, Value weight,
                            Value offsets, bool rowsAreInput) {
  if (failed(verifyRowWidth(op, rows, weight, rowsAreInput)))
    return failure();
  return verifyBlockOffsets(op, offsets, shapeOf(weight)[0]);
}

// dW [E, M, K] of a gradient [R, M] and the rows [R, K] it multiplied.
LogicalResult verifyExpertWeightGrad(Operation *op, Value grad, Value input,
                                     Value weightGrad) {
  if (failed(expectRank(op, grad, 2, "gradient")) ||
      failed(expectRank(op, input, 2, "input")) ||
      failed(expectRank(op, weightGrad, 3, "weight gradient")) ||
      failed(expectWeightGradType(op, weightGrad, grad, "weight gradient",
                                  "gradient")) ||
      failed(
          expectShape(op, input, {shapeOf(grad)[0], lastDim(input)}, "input")))
    return failure();
  return expectShape(op, weightGrad,
                     {shapeOf(weightGrad)[0], lastDim(grad), lastDim(input)},
                     "weight gradient");
}

// The result [R, M] of rows [R, K] through a weight [E, M, K], all of one
// element type (grouped or batched).
LogicalResult verifyExpertResult(Operation *op, Value input, Value weight,
                                 Value result) {
  if (failed(expectSameElementType(op, weight, input, "weight", "input")) ||
      failed(expectSameElementType(op, result, input, "result", "input")))
    return failure();
  return expectShape(op, result, {shapeOf(input)[0], shapeOf(weight)[1]},
                     "result");
}

// The input gradient [R, K] of a gradient [R, M] through [E, M, K].
LogicalResult verifyExpertInputGrad(Operation *op, Value grad, Value weight,
                                    Value inputGrad) {
  if (failed(expectSameElementType(op, inputGrad, grad, "input gradient",
                                   "gradient")))
    return failure();
  return expectShape(op, inputGrad, {shapeOf(grad)[0], shapeOf(weight)[2]},
                     "input gradient");
}

} // namespace

LogicalResult MoeRouteOp::verify() {
  if (failed(verifyChoice(*this, getExperts(), getWeights(), getBias(),
                          getLogits())))
    return failure();
  return expectShape(*this, getScores(), shapeOf(getLogits()), "scores");
}

LogicalResult MoeRouteGradOp::verify() {
  if (failed(verifyChoiceGrad(*this, getWeightsGrad(), getExperts(),
                              getScores())))
    return failure();
  if (getScoresGrad() &&
      failed(expectShape(*this, getScoresGrad(), shapeOf(getScores()),
                         "scores gradient")))
    return failure();
  return expectShape(*this, getLogitsGrad(), shapeOf(getScores()),
                     "logits gradient");
}

LogicalResult MoePermuteOp::verify() {
  if (failed(verifyRows(*this, getRows(), getInput(), getExperts())) ||
      failed(expectShape(*this, getPositions(), shapeOf(getExperts()),
                         "positions")) ||
      failed(expectRank(*this, getOffsets(), 1, "offsets")))
    return failure();
  const int64_t e = shapeOf(getOffsets())[0] - 1;
  if (e < 1)
    return emitOpError("offsets need one entry per expert and one more");
  std::optional<int64_t> capacity = getCapacity();
  if (capacity && *capacity < 1)
    return emitOpError("capacity must be positive");
  return expectShape(
      *this, getRows(),
      {capacity ? e * *capacity : numelOf(getExperts()), lastDim(getInput())},
      "rows");
}

LogicalResult MoePermuteGradOp::verify() {
  return verifyRows(*this, getRowsGrad(), getInputGrad(), getPositions());
}

LogicalResult MoeUnpermuteOp::verify() {
  if (failed(verifyRows(*this, getRows(), getResult(), getPositions())))
    return failure();
  return expectShape(*this, getWeights(), shapeOf(getPositions()), "weights");
}

LogicalResult MoeUnpermuteGradOp::verify() {
  if (failed(verifyRows(*this, getRows(), getGrad(), getPositions())) ||
      failed(expectShape(*this, getWeights(), shapeOf(getPositions()),
                         "weights")) ||
      failed(
          expectLike(*this, getRowsGrad(), getRows(), "rows gradient", "rows")))
    return failure();
  return expectShape(*this, getWeightsGrad(), shapeOf(getWeights()),
                     "weights gradient");
}

LogicalResult MoeScoresOp::verify() {
  if (failed(expectMinRank(*this, getLogits(), 2, "logits")))
    return failure();
  return expectShape(*this, getScores(), shapeOf(getLogits()), "scores");
}

LogicalResult MoeScoresGradOp::verify() {
  if (failed(expectMinRank(*this, getScores(), 2, "scores")) ||
      failed(expectShape(*this, getScoresGrad(), shapeOf(getScores()),
                         "scores gradient")))
    return failure();
  return expectShape(*this, getLogitsGrad(), shapeOf(getScores()),
                     "logits gradient");
}

LogicalResult MoeTopKOp::verify() {
  return verifyChoice(*this, getExperts(), getWeights(), getBias(),
                      getScores());
}

LogicalResult MoeTopKGradOp::verify() {
  if (failed(verifyChoiceGrad(*this, getWeightsGrad(), getExperts(),
                              getScores())))
    return failure();
  return expectShape(*this, getScoresGrad(), shapeOf(getScores()),
                     "scores gradient");
}

LogicalResult MoeSortOp::verify() {
  if (failed(expectMinRank(*this, getExperts(), 2, "experts")) ||
      failed(expectShape(*this, getPositions(), shapeOf(getExperts()),
                         "positions")) ||
      failed(expectRank(*this, getOffsets(), 1, "offsets")))
    return failure();
  if (shapeOf(getOffsets())[0] < 2)
    return emitOpError("offsets need one entry per expert and one more");
  std::optional<int64_t> capacity = getCapacity();
  if (capacity && *capacity < 1)
    return emitOpError("capacity must be positive");
  return success();
}

LogicalResult MoeGatherOp::verify() {
  return verifyRows(*this, getRows(), getInput(), getPositions());
}

// Choices [..., K, D]: a row of D per choice of `positions` [..., K].
static LogicalResult verifyChoiceRows(Operation *op, Value choices,
                                      Value rows, Value positions,
                                      StringRef what) {
  if (failed(expectMinRank(op, positions, 2, "positions")) ||
      failed(expectRank(op, rows, 2, "rows")) ||
      failed(expectSameElementType(op, choices, rows, what, "rows")))
    return failure();
  return expectShape(op, choices, append(shapeOf(positions), lastDim(rows)),
                     what);
}

LogicalResult MoeGatherChoicesOp::verify() {
  return verifyChoiceRows(*this, getChoices(), getRows(), getPositions(),
                          "choices");
}

LogicalResult MoeGatherChoicesGradOp::verify() {
  return verifyChoiceRows(*this, getChoicesGrad(), getRowsGrad(),
                          getPositions(), "choices gradient");
}

// y [..., D] and weights [..., K] from choices [..., K, D].
static LogicalResult verifyWeightedSum(Operation *op, Value choices,
                                       Value weights, Value y) {
  if (failed(expectMinRank(op, choices, 3, "choices")) ||
      failed(expectSameElementType(op, y, choices, "result", "choices")))
    return failure();
  SmallVector<int64_t> shape(shapeOf(choices));
  const int64_t d = shape.back();
  shape.pop_back();
  if (failed(expectShape(op, weights, shape, "weights")))
    return failure();
  shape.back() = d;
  return expectShape(op, y, shape, "result");
}

LogicalResult MoeWeightedSumOp::verify() {
  return verifyWeightedSum(*this, getChoices(), getWeights(), getResult());
}

LogicalResult MoeWeightedSumGradOp::verify() {
  if (failed(verifyWeightedSum(*this, getChoices(), getWeights(), getGrad())) ||
      failed(expectLike(*this, getChoicesGrad(), getChoices(),
                        "choices gradient", "choices")))
    return failure();
  return expectShape(*this, getWeightsGrad(), shapeOf(getWeights()),
                     "weights gradient");
}

LogicalResult MoeGroupedLinearOp::verify() {
  if (failed(verifyGrouped(*this, getInput(), getWeight(), getOffsets(), true)))
    return failure();
  if (std::optional<int64_t> above = getRecomputeAbove(); above && *above < 0)
    return emitOpError() << "recompute_above " << *above
                         << " is not a number of rows";
  return verifyExpertResult(*this, getInput(), getWeight(), getResult());
}

namespace {

// Adaptive recompute's kept rows [K, F] of an activation [R, F]: K from 1
// to R, the same width and element type; offsets [B + 1].
LogicalResult verifyKeptRows(Operation *op, Value kept, Value whole,
                             Value offsets) {
  if (failed(expectRank(op, whole, 2, "rows")) ||
      failed(expectRank(op, kept, 2, "kept")) ||
      failed(expectRank(op, offsets, 1, "offsets")) ||
      failed(expectSameElementType(op, kept, whole, "kept", "rows")))
    return failure();
  const int64_t rows = shapeOf(kept)[0];
  if (rows < 1 || rows > shapeOf(whole)[0] ||
      shapeOf(kept)[1] != shapeOf(whole)[1])
    return op->emitOpError()
           << "kept " << kept.getType() << " is not 1 to "
           << shapeOf(whole)[0] << " rows of " << whole.getType();
  return success();
}

} // namespace

LogicalResult MoeKeepRowsOp::verify() {
  return verifyKeptRows(*this, getKept(), getInput(), getOffsets());
}

LogicalResult MoeRestoreRowsOp::verify() {
  if (getResult().getType() != getRecomputed().getType())
    return emitOpError() << "result " << getResult().getType()
                         << " differs from recomputed "
                         << getRecomputed().getType();
  return verifyKeptRows(*this, getKept(), getRecomputed(), getOffsets());
}

LogicalResult MoeBatchedLinearOp::verify() {
  if (failed(verifyBlocks(*this, getInput(), getWeight(), true)))
    return failure();
  return verifyExpertResult(*this, getInput(), getWeight(), getResult());
}

LogicalResult MoeBatchedLinearGradInputOp::verify() {
  if (failed(verifyBlocks(*this, getGrad(), getWeight(), false)))
    return failure();
  return verifyExpertInputGrad(*this, getGrad(), getWeight(), getInputGrad());
}

LogicalResult MoeBatchedLinearGradWeightOp::verify() {
  if (failed(verifyExpertWeightGrad(*this, getGrad(), getInput(),
                                    getWeightGrad())))
    return failure();
  return verifyEqualBlocks(*this, getGrad(), getWeightGrad());
}

LogicalResult MoeGroupedLinearGradInputOp::verify() {
  if (failed(verifyGrouped(*this, getGrad(), getWeight(), getOffsets(), false)))
    return failure();
  return verifyExpertInputGrad(*this, getGrad(), getWeight(), getInputGrad());
}

LogicalResult MoeGroupedLinearGradWeightOp::verify() {
  if (failed(verifyExpertWeightGrad(*this, getGrad(), getInput(),
                                    getWeightGrad())))
    return failure();
  return verifyBlockOffsets(*this, getOffsets(), shapeOf(getWeightGrad())[0]);
}

LogicalResult MoeBlockCountsOp::verify() {
  if (failed(expectRank(*this, getOffsets(), 1, "offsets")))
    return failure();
  return expectShape(*this, getCounts(), {shapeOf(getOffsets())[0] - 1},
                     "counts");
}

// counts [G x G x m], offsets [G x m + 1].
LogicalResult MoeEpOffsetsOp::verify() {
  if (failed(expectRank(*this, getCounts(), 1, "counts")) ||
      failed(expectRank(*this, getOffsets(), 1, "offsets")))
    return failure();
  const int64_t blocks = shapeOf(getOffsets())[0] - 1;
  const int64_t n = shapeOf(getCounts())[0];
  const int64_t ranks = blocks > 0 ? n / blocks : 0;
  if (blocks < 1 || n % blocks != 0 || ranks < 1 || blocks % ranks != 0)
    return emitOpError() << "counts " << getCounts().getType()
                         << " and offsets " << getOffsets().getType()
                         << " are not G x G x m counts and G x m + 1 offsets";
  return success();
}

// counts and cold [G x E], hot [H].
LogicalResult MoeHotExpertsOp::verify() {
  if (failed(expectRank(*this, getCounts(), 1, "counts")) ||
      failed(expectRank(*this, getHot(), 1, "hot")) ||
      failed(expectShape(*this, getCold(), shapeOf(getCounts()), "cold")))
    return failure();
  const int64_t n = shapeOf(getCounts())[0], ranks = getRanks();
  if (ranks < 1 || n % ranks != 0 || (n / ranks) % ranks != 0)
    return emitOpError() << "counts " << getCounts().getType()
                         << " are not G x E counts of " << ranks
                         << " ranks with E a multiple of G";
  if (shapeOf(getHot())[0] < 1 || shapeOf(getHot())[0] > n / ranks)
    return emitOpError("hot needs 1 to E slots");
  if (!(getThreshold().convertToDouble() >= 1))
    return emitOpError("threshold must be at least 1");
  return success();
}

// rows and cold [N, D], hot rows [Nh, D], offsets [E + 1], hot [H], hot
// offsets [H + 1].
static LogicalResult verifySplit(Operation *op, Value rows, Value cold,
                                 Value hotRows, Value offsets, Value hot,
                                 Value hotOffsets) {
  if (failed(expectRank(op, rows, 2, "rows")) ||
      failed(expectShape(op, cold, shapeOf(rows), "cold")) ||
      failed(expectSameElementType(op, cold, rows, "cold", "rows")) ||
      failed(expectSameElementType(op, hotRows, rows, "hot rows", "rows")) ||
      failed(expectRank(op, hotRows, 2, "hot rows")) ||
      failed(expectRank(op, offsets, 1, "offsets")) ||
      failed(expectRank(op, hot, 1, "hot")))
    return failure();
  if (shapeOf(hotRows)[1] != shapeOf(rows)[1] || shapeOf(hotRows)[0] < 1 ||
      shapeOf(hotRows)[0] > shapeOf(rows)[0])
    return op->emitOpError() << "hot rows " << hotRows.getType()
                             << " are not 1 to all of the rows "
                             << rows.getType();
  if (hotOffsets)
    return expectShape(op, hotOffsets, {shapeOf(hot)[0] + 1}, "hot offsets");
  return success();
}

LogicalResult MoeSplitRowsOp::verify() {
  return verifySplit(*this, getRows(), getCold(), getHotRows(), getOffsets(),
                     getHot(), getHotOffsets());
}

LogicalResult MoeMergeRowsOp::verify() {
  return verifySplit(*this, getResult(), getCold(), getHotRows(),
                     getOffsets(), getHot(), Value());
}

LogicalResult MoeExpertCountsOp::verify() {
  if (failed(expectMinRank(*this, getExperts(), 1, "experts")) ||
      failed(expectRank(*this, getCounts(), 1, "counts")))
    return failure();
  if (shapeOf(getCounts())[0] < 1)
    return emitOpError("counts need at least one expert");
  return success();
}

// The balancing losses' rows [..., E] and their settings.
static LogicalResult verifyBalance(Operation *op, Value rows, double coeff) {
  if (failed(expectMinRank(op, rows, 2, "scores")))
    return failure();
  if (!(coeff >= 0))
    return op->emitOpError("coeff must be non-negative");
  return success();
}

static LogicalResult verifyAux(Operation *op, Value scores, Value counts,
                               double coeff, int64_t topK) {
  if (failed(verifyBalance(op, scores, coeff)) ||
      failed(expectShape(op, counts, {lastDim(scores)}, "counts")))
    return failure();
  if (topK < 1 || topK > lastDim(scores))
    return op->emitOpError()
           << "top_k " << topK << " of " << lastDim(scores) << " experts";
  return success();
}

// Context parallel's parts of the sequence: 1 or more.
static LogicalResult verifyParts(Operation *op, std::optional<uint64_t> parts) {
  if (parts && *parts < 1)
    return op->emitOpError("parts must be positive");
  return success();
}

LogicalResult MoeAuxLossOp::verify() {
  if (failed(verifyParts(*this, getParts())))
    return failure();
  return verifyAux(*this, getScores(), getCounts(),
                   getCoeff().convertToDouble(), getTopK());
}

LogicalResult MoeAuxLossGradOp::verify() {
  if (failed(verifyParts(*this, getParts())) ||
      failed(verifyAux(*this, getScores(), getCounts(),
                       getCoeff().convertToDouble(), getTopK())))
    return failure();
  return expectShape(*this, getScoresGrad(), shapeOf(getScores()),
                     "scores gradient");
}

LogicalResult MoeBiasUpdateOp::verify() {
  if (failed(expectRank(*this, getBias(), 1, "bias")) ||
      failed(expectShape(*this, getCounts(), shapeOf(getBias()), "counts")))
    return failure();
  if (!(getRate().convertToDouble() >= 0))
    return emitOpError("rate must be non-negative");
  return success();
}

LogicalResult MoeZLossOp::verify() {
  return verifyBalance(*this, getLogits(), getCoeff().convertToDouble());
}

LogicalResult MoeZLossGradOp::verify() {
  if (failed(verifyBalance(*this, getLogits(), getCoeff().convertToDouble())))
    return failure();
  return expectShape(*this, getLogitsGrad(), shapeOf(getLogits()),
                     "logits gradient");
}

// Sub-units: `whole` [B, S, X] and its P parts [B, S / P, X], at least two.
static LogicalResult verifyTokenParts(Operation *op, Value whole,
                                      ValueRange parts, StringRef what) {
  if (parts.size() < 2)
    return op->emitOpError()
           << "needs at least two parts, got " << parts.size();
  if (failed(expectRank(op, whole, 3, what)))
    return failure();
  const int64_t p = static_cast<int64_t>(parts.size());
  SmallVector<int64_t> shape(shapeOf(whole));
  if (shape[1] % p != 0)
    return op->emitOpError() << what << "'s sequence of " << shape[1]
                             << " does not split into " << p << " parts";
  shape[1] /= p;
  for (Value part : parts)
    if (failed(expectShape(op, part, shape, "part")) ||
        failed(expectSameElementType(op, part, whole, "part", what)))
      return failure();
  return success();
}

LogicalResult MoeSplitTokensOp::verify() {
  return verifyTokenParts(*this, getInput(), getParts(), "input");
}

LogicalResult MoeJoinTokensOp::verify() {
  return verifyTokenParts(*this, getResult(), getParts(), "result");
}

} // namespace braid
