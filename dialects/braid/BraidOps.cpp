//===- BraidOps.cpp - braid dialect ops -----------------------------------===//
//
// Verifiers check every shape and dtype invariant that lowering and the
// runtime kernels rely on, so that a malformed graph fails here with a message
// and never reaches a kernel.
//
//===----------------------------------------------------------------------===//

#include "dialects/braid/BraidOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace braid;

namespace {

RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

ArrayRef<int64_t> shapeOf(Value v) { return tensorOf(v).getShape(); }

int64_t lastDim(Value v) { return shapeOf(v).back(); }

// All dimensions but the last.
SmallVector<int64_t> leading(Value v) {
  auto s = shapeOf(v);
  return SmallVector<int64_t>(s.drop_back());
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") +
         (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return s + "]";
}

LogicalResult expectShape(Operation *op, Value v, ArrayRef<int64_t> expected,
                          StringRef what) {
  if (shapeOf(v) == expected)
    return success();
  return op->emitOpError() << what << " has shape " << shapeStr(shapeOf(v))
                           << ", expected " << shapeStr(expected);
}

LogicalResult expectSameElementType(Operation *op, Value a, Value b,
                                    StringRef whatA, StringRef whatB) {
  if (tensorOf(a).getElementType() == tensorOf(b).getElementType())
    return success();
  return op->emitOpError() << whatA << " and " << whatB
                           << " must have the same element type";
}

LogicalResult expectMinRank(Operation *op, Value v, int64_t rank,
                            StringRef what) {
  if (tensorOf(v).getRank() >= rank)
    return success();
  return op->emitOpError() << what << " must have rank >= " << rank;
}

LogicalResult expectRank(Operation *op, Value v, int64_t rank, StringRef what) {
  if (tensorOf(v).getRank() == rank)
    return success();
  return op->emitOpError() << what << " must have rank " << rank;
}

SmallVector<int64_t> append(ArrayRef<int64_t> prefix, int64_t last) {
  SmallVector<int64_t> s(prefix);
  s.push_back(last);
  return s;
}

// Checks that `v` has the shape of `like` and its element type.
LogicalResult expectLike(Operation *op, Value v, Value like, StringRef what,
                         StringRef likeWhat) {
  if (failed(expectShape(op, v, shapeOf(like), what)))
    return failure();
  return expectSameElementType(op, v, like, what, likeWhat);
}

// A weight-gradient result has the element type of the gradient it is
// computed from, or f32: weight-gradient kernels may accumulate bf16 inputs
// into f32 gradients (docs/kernels.md, "Storage precision").
LogicalResult expectWeightGradType(Operation *op, Value result, Value grad,
                                   StringRef what, StringRef gradWhat) {
  Type r = tensorOf(result).getElementType();
  if (r.isF32() || r == tensorOf(grad).getElementType())
    return success();
  return op->emitOpError() << what << " must be f32 or have the element type "
                           << "of " << gradWhat;
}

// The gradient of a norm's weight (or bias): a vector over the normalised
// dimension of `input`.
LogicalResult verifyNormVectorGrad(Operation *op, Value input, Value vecGrad,
                                   StringRef what) {
  if (failed(expectWeightGradType(op, vecGrad, input, what, "input")))
    return failure();
  return expectShape(op, vecGrad, {lastDim(input)}, what);
}

// A norm's weight (and bias) are vectors over the normalised dimension.
LogicalResult verifyNormVector(Operation *op, Value input, Value vec,
                               StringRef what) {
  if (failed(expectSameElementType(op, vec, input, what, "input")))
    return failure();
  return expectShape(op, vec, {lastDim(input)}, what);
}

LogicalResult verifyPositive(Operation *op, double v, StringRef what) {
  if (v > 0)
    return success();
  return op->emitOpError() << what << " must be positive";
}

LogicalResult verifyProbability(Operation *op, double p, StringRef what) {
  if (p >= 0 && p < 1)
    return success();
  return op->emitOpError() << what << " must be in [0, 1)";
}

// Head packing shared by attention, repeat_kv and rope.
LogicalResult verifyHeads(Operation *op, int64_t numHeads, int64_t numKVHeads) {
  if (numHeads <= 0 || numKVHeads <= 0)
    return op->emitOpError("num_heads and num_kv_heads must be positive");
  if (numHeads % numKVHeads != 0)
    return op->emitOpError() << "num_kv_heads (" << numKVHeads
                             << ") must divide num_heads (" << numHeads << ")";
  return success();
}

LogicalResult verifyHeadPacking(Operation *op, Value v, int64_t heads,
                                StringRef what) {
  if (lastDim(v) % heads != 0)
    return op->emitOpError() << what << " last dimension " << lastDim(v)
                             << " is not a multiple of " << heads << " heads";
  return success();
}

struct AttentionShapes {
  Value query, key, value, probs;
  int64_t numHeads, numKVHeads;
  bool causal;
  double scale, dropout;
};

LogicalResult verifyAttention(Operation *op, const AttentionShapes &a) {
  if (failed(verifyHeads(op, a.numHeads, a.numKVHeads)) ||
      failed(expectRank(op, a.query, 3, "query")) ||
      failed(expectRank(op, a.key, 3, "key")) ||
      failed(verifyHeadPacking(op, a.query, a.numHeads, "query")) ||
      failed(verifyHeadPacking(op, a.key, a.numKVHeads, "key")) ||
      failed(expectLike(op, a.value, a.key, "value", "key")) ||
      failed(expectSameElementType(op, a.key, a.query, "key", "query")) ||
      failed(verifyPositive(op, a.scale, "scale")) ||
      failed(verifyProbability(op, a.dropout, "dropout")))
    return failure();
  auto q = shapeOf(a.query), k = shapeOf(a.key);
  int64_t headDim = q[2] / a.numHeads;
  if (k[2] / a.numKVHeads != headDim)
    return op->emitOpError() << "query head dim " << headDim
                             << " differs from key head dim "
                             << k[2] / a.numKVHeads;
  if (k[0] != q[0])
    return op->emitOpError("query and key batch sizes differ");
  if (a.causal && k[1] != q[1])
    return op->emitOpError("causal attention needs equal query and key lengths");
  if (failed(expectSameElementType(op, a.probs, a.query, "probs", "query")))
    return failure();
  return expectShape(op, a.probs, {q[0], a.numHeads, q[1], k[1]}, "probs");
}

// `narrow` holds num_kv_heads heads, `wide` num_heads heads.
LogicalResult verifyRepeatKV(Operation *op, Value narrow, Value wide,
                             int64_t numHeads, int64_t numKVHeads,
                             StringRef narrowWhat, StringRef wideWhat) {
  if (failed(verifyHeads(op, numHeads, numKVHeads)) ||
      failed(expectMinRank(op, narrow, 1, narrowWhat)) ||
      failed(verifyHeadPacking(op, narrow, numKVHeads, narrowWhat)) ||
      failed(expectSameElementType(op, wide, narrow, wideWhat, narrowWhat)))
    return failure();
  int64_t headDim = lastDim(narrow) / numKVHeads;
  return expectShape(op, wide, append(leading(narrow), headDim * numHeads),
                     wideWhat);
}

LogicalResult verifyRoPE(Operation *op, Value input, Value result,
                         int64_t numHeads, double theta, StringRef inputWhat,
                         StringRef resultWhat) {
  if (failed(expectRank(op, input, 3, inputWhat)))
    return failure();
  if (numHeads <= 0)
    return op->emitOpError("num_heads must be positive");
  if (failed(verifyHeadPacking(op, input, numHeads, inputWhat)) ||
      failed(verifyPositive(op, theta, "theta")) ||
      failed(expectLike(op, result, input, resultWhat, inputWhat)))
    return failure();
  if ((lastDim(input) / numHeads) % 2 != 0)
    return op->emitOpError("rope needs an even head dim");
  return success();
}

LogicalResult verifyLabels(Operation *op, Value logits, Value labels,
                           Value lse) {
  if (failed(expectMinRank(op, logits, 2, "logits")) ||
      failed(expectShape(op, labels, leading(logits), "labels")))
    return failure();
  return expectShape(op, lse, leading(logits), "lse");
}

} // namespace

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

LogicalResult AttentionOp::verify() {
  AttentionShapes a{getQuery(),
                    getKey(),
                    getValue(),
                    getProbs(),
                    static_cast<int64_t>(getNumHeads()),
                    static_cast<int64_t>(getNumKvHeads()),
                    getCausal(),
                    getScale().convertToDouble(),
                    getDropout().convertToDouble()};
  if (failed(verifyAttention(*this, a)))
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
                    getDropout().convertToDouble()};
  if (failed(verifyAttention(*this, a)) ||
      failed(expectLike(*this, getGrad(), getQuery(), "gradient", "query")) ||
      failed(expectLike(*this, getQueryGrad(), getQuery(), "query gradient",
                        "query")) ||
      failed(expectLike(*this, getKeyGrad(), getKey(), "key gradient", "key")))
    return failure();
  return expectLike(*this, getValueGrad(), getValue(), "value gradient",
                    "value");
}

LogicalResult RepeatKVOp::verify() {
  return verifyRepeatKV(*this, getInput(), getResult(), getNumHeads(),
                        getNumKvHeads(), "input", "result");
}

LogicalResult RepeatKVGradInputOp::verify() {
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

#define GET_OP_CLASSES
#include "dialects/braid/BraidOps.cpp.inc"
