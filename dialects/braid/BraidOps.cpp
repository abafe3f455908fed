//===- BraidOps.cpp - braid dialect ops -----------------------------------===//
//
// Verifiers check every shape and dtype invariant that lowering and the
// runtime kernels rely on, so that a malformed graph fails here with a message
// and never reaches a kernel.
//
//===----------------------------------------------------------------------===//

#include "dialects/braid/BraidOps.h"
#include "dialects/braid/VerifyUtils.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace braid;

using namespace braid::verify;

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(expectRank(*this, getTable(), 2, "table")) ||
      failed(expectSameElementType(*this, getResult(), getTable(), "result",
                                   "table")))
    return failure();
  return expectShape(*this, getResult(),
                     append(shapeOf(getIds()), lastDim(getTable())), "result");
}

LogicalResult EmbeddingGradWeightOp::verify() {
  if (failed(expectRank(*this, getTableGrad(), 2, "table gradient")) ||
      failed(expectWeightGradType(*this, getTableGrad(), getGrad(),
                                  "table gradient", "gradient")))
    return failure();
  return expectShape(*this, getGrad(),
                     append(shapeOf(getIds()), lastDim(getTableGrad())),
                     "gradient");
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  Value w = getWeight();
  if (failed(expectRank(*this, w, 2, "weight")) ||
      failed(expectMinRank(*this, getInput(), 1, "input")) ||
      failed(expectSameElementType(*this, w, getInput(), "weight", "input")) ||
      failed(expectSameElementType(*this, getResult(), getInput(), "result",
                                   "input")))
    return failure();
  if (lastDim(getInput()) != shapeOf(w)[1])
    return emitOpError() << "input features " << lastDim(getInput())
                         << " do not match weight in-features " << shapeOf(w)[1];
  if (Value b = getBias())
    if (failed(expectShape(*this, b, {shapeOf(w)[0]}, "bias")) ||
        failed(expectSameElementType(*this, b, w, "bias", "weight")))
      return failure();
  return expectShape(*this, getResult(),
                     append(leading(getInput()), shapeOf(w)[0]), "result");
}

LogicalResult LinearGradInputOp::verify() {
  Value w = getWeight();
  if (failed(expectRank(*this, w, 2, "weight")) ||
      failed(expectMinRank(*this, getGrad(), 1, "gradient")) ||
      failed(expectSameElementType(*this, w, getGrad(), "weight",
                                   "gradient")) ||
      failed(expectSameElementType(*this, getInputGrad(), getGrad(),
                                   "input gradient", "gradient")))
    return failure();
  if (lastDim(getGrad()) != shapeOf(w)[0])
    return emitOpError() << "gradient features " << lastDim(getGrad())
                         << " do not match weight out-features "
                         << shapeOf(w)[0];
  return expectShape(*this, getInputGrad(),
                     append(leading(getGrad()), shapeOf(w)[1]),
                     "input gradient");
}

LogicalResult LinearGradWeightOp::verify() {
  if (failed(expectMinRank(*this, getGrad(), 1, "gradient")) ||
      failed(expectMinRank(*this, getInput(), 1, "input")) ||
      failed(expectSameElementType(*this, getInput(), getGrad(), "input",
                                   "gradient")) ||
      failed(expectShape(*this, getInput(),
                         append(leading(getGrad()), lastDim(getInput())),
                         "input")) ||
      failed(expectShape(*this, getWeightGrad(),
                         {lastDim(getGrad()), lastDim(getInput())},
                         "weight gradient")) ||
      failed(expectWeightGradType(*this, getWeightGrad(), getGrad(),
                                  "weight gradient", "gradient")))
    return failure();
  if (Value db = getBiasGrad())
    if (failed(expectShape(*this, db, {lastDim(getGrad())}, "bias gradient")) ||
        failed(expectWeightGradType(*this, db, getGrad(), "bias gradient",
                                    "gradient")))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  Value x = getInput();
  if (failed(verifyPositive(*this, getEps().convertToDouble(), "eps")) ||
      failed(expectMinRank(*this, x, 1, "input")) ||
      failed(verifyNormVector(*this, x, getWeight(), "weight")) ||
      failed(verifyNormVector(*this, x, getBias(), "bias")) ||
      failed(expectLike(*this, getResult(), x, "result", "input")) ||
      failed(expectShape(*this, getMean(), leading(x), "mean")))
    return failure();
  return expectShape(*this, getRstd(), leading(x), "rstd");
}

LogicalResult LayerNormGradInputOp::verify() {
  Value x = getInput();
  if (failed(expectMinRank(*this, x, 1, "input")) ||
      failed(expectLike(*this, getGrad(), x, "gradient", "input")) ||
      failed(verifyNormVector(*this, x, getWeight(), "weight")) ||
      failed(expectShape(*this, getMean(), leading(x), "mean")) ||
      failed(expectShape(*this, getRstd(), leading(x), "rstd")))
    return failure();
  return expectLike(*this, getInputGrad(), x, "input gradient", "input");
}

LogicalResult LayerNormGradWeightOp::verify() {
  Value x = getInput();
  if (failed(expectMinRank(*this, x, 1, "input")) ||
      failed(expectLike(*this, getGrad(), x, "gradient", "input")) ||
      failed(expectShape(*this, getMean(), leading(x), "mean")) ||
      failed(expectShape(*this, getRstd(), leading(x), "rstd")) ||
      failed(verifyNormVectorGrad(*this, x, getWeightGrad(),
                                  "weight gradient")))
    return failure();
  return verifyNormVectorGrad(*this, x, getBiasGrad(), "bias gradient");
}

LogicalResult RMSNormOp::verify() {
  Value x = getInput();
  if (failed(verifyPositive(*this, getEps().convertToDouble(), "eps")) ||
      failed(expectMinRank(*this, x, 1, "input")) ||
      failed(verifyNormVector(*this, x, getWeight(), "weight")) ||
      failed(expectLike(*this, getResult(), x, "result", "input")))
    return failure();
  return expectShape(*this, getRstd(), leading(x), "rstd");
}

LogicalResult RMSNormGradInputOp::verify() {
  Value x = getInput();
  if (failed(expectMinRank(*this, x, 1, "input")) ||
      failed(expectLike(*this, getGrad(), x, "gradient", "input")) ||
      failed(verifyNormVector(*this, x, getWeight(), "weight")) ||
      failed(expectShape(*this, getRstd(), leading(x), "rstd")))
    return failure();
  return expectLike(*this, getInputGrad(), x, "input gradient", "input");
}

LogicalResult RMSNormGradWeightOp::verify() {
  Value x = getInput();
  if (failed(expectMinRank(*this, x, 1, "input")) ||
      failed(expectLike(*this, getGrad(), x, "gradient", "input")) ||
      failed(expectShape(*this, getRstd(), leading(x), "rstd")))
    return failure();
  return verifyNormVectorGrad(*this, x, getWeightGrad(), "weight gradient");
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// An absent prefix is 0.
static int64_t prefixOf(IntegerAttr prefix) {
  return prefix ? prefix.getInt() : 0;
}

// The op's context-parallel attributes.
template <typename Op> static AttentionCp cpOf(Op op) {
  return {op.getCp().value_or(false), op.getCpKvStep()};
}

LogicalResult AttentionOp::verify() {
  AttentionShapes a{getQuery(),
                    getKey(),
                    getValue(),
                    getProbs(),
                    static_cast<int64_t>(getNumHeads()),
                    static_cast<int64_t>(getNumKvHeads()),
                    getCausal(),
                    getScale().convertToDouble(),
                    getDropout().convertToDouble(),
                    cpOf(*this)};
  if (failed(verifyAttention(*this, a)) ||
      failed(verifyAttentionMasks(*this, getQuery(), getKey(),
                                  getSegmentIds(), getCausal(),
                                  prefixOf(getPrefixAttr()), a.cp)))
    return failure();
  return expectLike(*this, getResult(), getQuery(), "result", "query");
}

LogicalResult AttentionGradInputOp::verify() {
  AttentionShapes a{getQuery(),
                    getKey(),
                    getValue(),
                    getProbs(),
                    static_cast<int64_t>(getNumHeads()),
                    static_cast<int64_t>(getNumKvHeads()),
                    getCausal(),
                    getScale().convertToDouble(),
                    getDropout().convertToDouble(),
                    cpOf(*this)};
  if (failed(verifyAttention(*this, a)) ||
      failed(verifyAttentionMasks(*this, getQuery(), getKey(),
                                  getSegmentIds(), getCausal(),
                                  prefixOf(getPrefixAttr()), a.cp)) ||
      failed(expectLike(*this, getGrad(), getQuery(), "gradient", "query")) ||
      failed(expectLike(*this, getQueryGrad(), getQuery(), "query gradient",
                        "query")) ||
      failed(expectLike(*this, getKeyGrad(), getKey(), "key gradient", "key")))
    return failure();
  return expectLike(*this, getValueGrad(), getValue(), "value gradient",
                    "value");
}

LogicalResult DocumentIdsOp::verify() {
  if (failed(expectRank(*this, getTokens(), 2, "tokens")) ||
      failed(expectLike(*this, getIds(), getTokens(), "ids", "tokens")))
    return failure();
  const int64_t separator = getSeparatorAttr().getInt();
  if (separator < 0 || separator > INT32_MAX)
    return emitOpError() << "separator " << separator
                         << " is not a token id (0 .. 2^31 - 1)";
  return success();
}

// With tp_slice the narrow side holds every kv head and the wide side one
// TP rank's query heads, which need not be a multiple of the kv heads.
static LogicalResult verifyRepeatKVSlice(Operation *op, Value narrow,
                                         Value wide, int64_t numHeads,
                                         int64_t numKVHeads,
                                         std::optional<int64_t> group,
                                         StringRef narrowWhat,
                                         StringRef wideWhat) {
  if (!group || *group <= 0)
    return op->emitOpError(
        "tp_slice needs a positive group (query heads per kv head)");
  return verifyRepeatKV(op, narrow, wide, numHeads, numKVHeads, narrowWhat,
                        wideWhat, /*wideHeadsWhole=*/false);
}

LogicalResult RepeatKVOp::verify() {
  if (getTpSlice().value_or(false))
    return verifyRepeatKVSlice(*this, getInput(), getResult(), getNumHeads(),
                               getNumKvHeads(), getGroup(), "input",
                               "result");
  return verifyRepeatKV(*this, getInput(), getResult(), getNumHeads(),
                        getNumKvHeads(), "input", "result");
}

LogicalResult RepeatKVGradInputOp::verify() {
  if (getTpSlice().value_or(false))
    return verifyRepeatKVSlice(*this, getInputGrad(), getGrad(),
                               getNumHeads(), getNumKvHeads(), getGroup(),
                               "input gradient", "gradient");
  return verifyRepeatKV(*this, getInputGrad(), getGrad(), getNumHeads(),
                        getNumKvHeads(), "input gradient", "gradient");
}

LogicalResult RoPEOp::verify() {
  return verifyRoPE(*this, getInput(), getResult(), getNumHeads(),
                    getTheta().convertToDouble(), "input", "result");
}

LogicalResult RoPEGradInputOp::verify() {
  return verifyRoPE(*this, getGrad(), getInputGrad(), getNumHeads(),
                    getTheta().convertToDouble(), "gradient", "input gradient");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult GeLUOp::verify() {
  return expectLike(*this, getResult(), getInput(), "result", "input");
}

LogicalResult GeLUGradInputOp::verify() {
  if (failed(expectLike(*this, getGrad(), getInput(), "gradient", "input")))
    return failure();
  return expectLike(*this, getInputGrad(), getInput(), "input gradient",
                    "input");
}

LogicalResult SwiGLUOp::verify() {
  if (failed(expectLike(*this, getUp(), getGate(), "up", "gate")))
    return failure();
  return expectLike(*this, getResult(), getGate(), "result", "gate");
}

LogicalResult SwiGLUGradInputOp::verify() {
  if (failed(expectLike(*this, getUp(), getGate(), "up", "gate")) ||
      failed(expectLike(*this, getGrad(), getGate(), "gradient", "gate")) ||
      failed(expectLike(*this, getGateGrad(), getGate(), "gate gradient",
                        "gate")))
    return failure();
  return expectLike(*this, getUpGrad(), getGate(), "up gradient", "gate");
}

LogicalResult AddOp::verify() {
  if (failed(expectLike(*this, getRhs(), getLhs(), "rhs", "lhs")))
    return failure();
  return expectLike(*this, getResult(), getLhs(), "result", "lhs");
}

LogicalResult DropoutOp::verify() {
  if (failed(verifyProbability(*this, getP().convertToDouble(), "p")))
    return failure();
  return expectLike(*this, getResult(), getInput(), "result", "input");
}

LogicalResult DropoutGradInputOp::verify() {
  if (failed(verifyProbability(*this, getP().convertToDouble(), "p")))
    return failure();
  return expectLike(*this, getInputGrad(), getGrad(), "input gradient",
                    "gradient");
}

// Split and its gradient relate one wide tensor to equal narrow parts.
static LogicalResult verifySplit(Operation *op, Value wide, ValueRange parts) {
  if (parts.size() < 2)
    return op->emitOpError("needs at least two parts");
  Value first = parts.front();
  if (failed(expectMinRank(op, wide, 1, "split tensor")) ||
      failed(expectMinRank(op, first, 1, "first part")))
    return failure();
  for (Value part : parts)
    if (failed(expectLike(op, part, first, "part", "first part")))
      return failure();
  if (failed(expectSameElementType(op, first, wide, "parts", "split tensor")))
    return failure();
  int64_t n = static_cast<int64_t>(parts.size());
  return expectShape(op, wide, append(leading(first), lastDim(first) * n),
                     "split tensor");
}

LogicalResult SplitOp::verify() {
  return verifySplit(*this, getInput(), getParts());
}

LogicalResult SplitGradInputOp::verify() {
  return verifySplit(*this, getInputGrad(), getPartGrads());
}

//===----------------------------------------------------------------------===//
// Precision
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  if (failed(expectShape(*this, getResult(), shapeOf(getInput()), "result")))
    return failure();
  Type from = tensorOf(getInput()).getElementType();
  if (from == tensorOf(getResult()).getElementType())
    return emitOpError() << "casts " << from << " to " << from
                         << "; a cast converts between f32 and bf16, so "
                            "remove it";
  return success();
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::verify() {
  return verifyLabels(*this, getLogits(), getLabels(), getLse());
}

LogicalResult CrossEntropyGradInputOp::verify() {
  if (failed(verifyLabels(*this, getLogits(), getLabels(), getLse())))
    return failure();
  return expectLike(*this, getLogitsGrad(), getLogits(), "logits gradient",
                    "logits");
}

LogicalResult CrossEntropyStatsOp::verify() {
  if (failed(expectMinRank(*this, getLogits(), 2, "logits")) ||
      failed(expectShape(*this, getLabels(), leading(getLogits()), "labels")))
    return failure();
  return expectShape(*this, getStats(), append(leading(getLogits()), 3),
                     "stats");
}

LogicalResult CrossEntropyCombineOp::verify() {
  ArrayRef<int64_t> stats = shapeOf(getStats());
  ArrayRef<int64_t> labels = shapeOf(getLabels());
  if (labels.empty() || stats.size() != labels.size() + 1 ||
      stats.back() != 3 || stats[0] % labels[0] != 0 ||
      stats.drop_front().drop_back() != labels.drop_front())
    return emitOpError()
           << "stats must be the group's [3]-statistics of each label's "
              "token stacked along dimension 0, not "
           << getStats().getType() << " for labels " << getLabels().getType();
  return expectShape(*this, getLse(), labels, "lse");
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult CommAllReduceOp::verify() {
  return expectLike(*this, getResult(), getInput(), "result", "input");
}

// `whole` is `part` with dimension `dim` a multiple of part's.
static LogicalResult verifyParts(Operation *op, Value part, Value whole,
                                 int64_t dim) {
  ArrayRef<int64_t> p = shapeOf(part), w = shapeOf(whole);
  if (failed(expectSameElementType(op, whole, part, "whole", "part")))
    return failure();
  bool fits = dim >= 0 && static_cast<size_t>(dim) < p.size() &&
              p.size() == w.size() && p[dim] > 0 && w[dim] % p[dim] == 0;
  for (size_t d = 0; fits && d < p.size(); ++d)
    fits = static_cast<int64_t>(d) == dim || p[d] == w[d];
  if (!fits)
    return op->emitOpError() << tensorOf(whole) << " is not " << tensorOf(part)
                             << " joined along dimension " << dim;
  return success();
}

LogicalResult CommAllGatherOp::verify() {
  return verifyParts(*this, getInput(), getResult(), getDim().value_or(0));
}

LogicalResult CommReduceScatterOp::verify() {
  return verifyParts(*this, getResult(), getInput(), getDim());
}

LogicalResult CommShiftOp::verify() {
  if (getOffset() == 0)
    return emitOpError("an offset of 0 passes nothing; use 1 or -1");
  return expectLike(*this, getResult(), getInput(), "result", "input");
}

// Rows [N, ...] and [R, ...] of one row shape and element type; counts of
// one or more.
static LogicalResult verifyExchange(Operation *op, Value rows, Value counts,
                                    Value result) {
  ArrayRef<int64_t> a = shapeOf(rows), b = shapeOf(result);
  if (failed(expectSameElementType(op, result, rows, "result", "rows")))
    return failure();
  if (a.empty() || a.size() != b.size() || a.drop_front() != b.drop_front())
    return op->emitOpError() << tensorOf(result) << " does not have the rows' "
                             << "shape " << tensorOf(rows)
                             << " but for the number of rows";
  if (shapeOf(counts).size() != 1 || shapeOf(counts)[0] < 1)
    return op->emitOpError("counts must be one dimension of one or more");
  return success();
}

LogicalResult CommDispatchOp::verify() {
  return verifyExchange(*this, getRows(), getCounts(), getResult());
}

LogicalResult CommCombineOp::verify() {
  return verifyExchange(*this, getRows(), getCounts(), getResult());
}

// Hot-expert replication's weights: a share [m, ...] and H slots [H, ...]
// of the same expert shape and type, hot [H].
static LogicalResult verifyReplicas(Operation *op, Value share, Value slots,
                                    Value hot) {
  ArrayRef<int64_t> a = shapeOf(share), b = shapeOf(slots);
  if (failed(expectSameElementType(op, slots, share, "replicas", "share")))
    return failure();
  if (a.size() < 2 || a.size() != b.size() || a.drop_front() != b.drop_front())
    return op->emitOpError() << tensorOf(slots) << " and " << tensorOf(share)
                             << " are not stacked expert weights of one "
                             << "shape";
  return expectShape(op, hot, {b[0]}, "hot");
}

LogicalResult CommReplicateExpertsOp::verify() {
  return verifyReplicas(*this, getWeight(), getResult(), getHot());
}

LogicalResult CommReduceReplicasOp::verify() {
  return verifyReplicas(*this, getResult(), getGrad(), getHot());
}

LogicalResult TakePartOp::verify() {
  return verifyParts(*this, getResult(), getInput(), getDim());
}

#define GET_OP_CLASSES
#include "dialects/braid/BraidInterfaces.cpp.inc"
#include "dialects/braid/BraidOps.cpp.inc"
