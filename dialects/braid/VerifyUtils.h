//===- VerifyUtils.h - shape and dtype checks of braid ops ------*- C++ -*-===//
//
// The building blocks of the op verifiers, shared by every file that defines
// braid ops (BraidOps.cpp, the fused ops).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include <string>

#include "llvm/ADT/STLExtras.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace braid::verify {

using namespace mlir;

inline RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

inline ArrayRef<int64_t> shapeOf(Value v) { return tensorOf(v).getShape(); }

inline int64_t lastDim(Value v) { return shapeOf(v).back(); }

// All dimensions but the last.
inline SmallVector<int64_t> leading(Value v) {
  auto s = shapeOf(v);
  return SmallVector<int64_t>(s.drop_back());
}

inline std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") +
         (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return s + "]";
}

inline LogicalResult expectShape(Operation *op, Value v, ArrayRef<int64_t> expected,
                          StringRef what) {
  if (shapeOf(v) == expected)
    return success();
  return op->emitOpError() << what << " has shape " << shapeStr(shapeOf(v))
                           << ", expected " << shapeStr(expected);
}

inline LogicalResult expectSameElementType(Operation *op, Value a, Value b,
                                    StringRef whatA, StringRef whatB) {
  if (tensorOf(a).getElementType() == tensorOf(b).getElementType())
    return success();
  return op->emitOpError() << whatA << " and " << whatB
                           << " must have the same element type";
}

inline LogicalResult expectMinRank(Operation *op, Value v, int64_t rank,
                            StringRef what) {
  if (tensorOf(v).getRank() >= rank)
    return success();
  return op->emitOpError() << what << " must have rank >= " << rank;
}

inline LogicalResult expectRank(Operation *op, Value v, int64_t rank, StringRef what) {
  if (tensorOf(v).getRank() == rank)
    return success();
  return op->emitOpError() << what << " must have rank " << rank;
}

inline SmallVector<int64_t> append(ArrayRef<int64_t> prefix, int64_t last) {
  SmallVector<int64_t> s(prefix);
  s.push_back(last);
  return s;
}

// Checks that `v` has the shape of `like` and its element type.
inline LogicalResult expectLike(Operation *op, Value v, Value like, StringRef what,
                         StringRef likeWhat) {
  if (failed(expectShape(op, v, shapeOf(like), what)))
    return failure();
  return expectSameElementType(op, v, like, what, likeWhat);
}

// A weight-gradient result has the element type of the gradient it is
// computed from, or f32: weight-gradient kernels may accumulate bf16 inputs
// into f32 gradients (docs/kernels.md, "Storage precision").
inline LogicalResult expectWeightGradType(Operation *op, Value result, Value grad,
                                   StringRef what, StringRef gradWhat) {
  Type r = tensorOf(result).getElementType();
  if (r.isF32() || r == tensorOf(grad).getElementType())
    return success();
  return op->emitOpError() << what << " must be f32 or have the element type "
                           << "of " << gradWhat;
}

// The gradient of a norm's weight (or bias): a vector over the normalised
// dimension of `input`.
inline LogicalResult verifyNormVectorGrad(Operation *op, Value input, Value vecGrad,
                                   StringRef what) {
  if (failed(expectWeightGradType(op, vecGrad, input, what, "input")))
    return failure();
  return expectShape(op, vecGrad, {lastDim(input)}, what);
}

// A norm's weight (and bias) are vectors over the normalised dimension.
inline LogicalResult verifyNormVector(Operation *op, Value input, Value vec,
                               StringRef what) {
  if (failed(expectSameElementType(op, vec, input, what, "input")))
    return failure();
  return expectShape(op, vec, {lastDim(input)}, what);
}

inline LogicalResult verifyPositive(Operation *op, double v, StringRef what) {
  if (v > 0)
    return success();
  return op->emitOpError() << what << " must be positive";
}

inline LogicalResult verifyProbability(Operation *op, double p, StringRef what) {
  if (p >= 0 && p < 1)
    return success();
  return op->emitOpError() << what << " must be in [0, 1)";
}

// Head packing shared by attention, repeat_kv and rope.
inline LogicalResult verifyHeads(Operation *op, int64_t numHeads, int64_t numKVHeads) {
  if (numHeads <= 0 || numKVHeads <= 0)
    return op->emitOpError("num_heads and num_kv_heads must be positive");
  if (numHeads % numKVHeads != 0)
    return op->emitOpError() << "num_kv_heads (" << numKVHeads
                             << ") must divide num_heads (" << numHeads << ")";
  return success();
}

inline LogicalResult verifyHeadPacking(Operation *op, Value v, int64_t heads,
                                StringRef what) {
  if (lastDim(v) % heads != 0)
    return op->emitOpError() << what << " last dimension " << lastDim(v)
                             << " is not a multiple of " << heads << " heads";
  return success();
}

// Context parallel (the `cp` and `cp_kv_step` attributes of the attention
// ops): with `cp` the queries are a CP rank's part of the sequence, the keys
// either the whole sequence (no kvStep) or another rank's part (kvStep, a
// ring step).
struct AttentionCp {
  bool cp = false;
  std::optional<int64_t> kvStep;
};

struct AttentionShapes {
  Value query, key, value, probs;
  int64_t numHeads, numKVHeads;
  bool causal;
  double scale, dropout;
  AttentionCp cp = {};
};

// What `cp` asks of the sequence lengths: an even query part (two chunks),
// and keys that are the whole sequence (a multiple of it) or one part.
inline LogicalResult verifyAttentionCp(Operation *op, Value query, Value key,
                                       const AttentionCp &cp) {
  auto q = shapeOf(query), k = shapeOf(key);
  if (!cp.cp) {
    if (cp.kvStep)
      return op->emitOpError("cp_kv_step needs cp");
    return success();
  }
  if (q[1] % 2 != 0)
    return op->emitOpError()
           << "a context-parallel query part holds two chunks of the "
              "sequence, so its length must be even, not "
           << q[1];
  if (cp.kvStep) {
    if (*cp.kvStep < 0)
      return op->emitOpError() << "cp_kv_step must be 0 or more, not "
                               << *cp.kvStep;
    if (k[1] != q[1])
      return op->emitOpError("a ring step's keys are one rank's part of the "
                             "sequence: as long as the queries");
    return success();
  }
  if (k[1] < q[1] || k[1] % q[1] != 0)
    return op->emitOpError()
           << "context-parallel keys are the whole sequence, a multiple of "
              "the query part's "
           << q[1] << " positions, not " << k[1];
  return success();
}

inline LogicalResult verifyAttention(Operation *op, const AttentionShapes &a) {
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
  if (failed(verifyAttentionCp(op, a.query, a.key, a.cp)))
    return failure();
  if (!a.cp.cp && a.causal && k[1] != q[1])
    return op->emitOpError("causal attention needs equal query and key lengths");
  if (failed(expectSameElementType(op, a.probs, a.query, "probs", "query")))
    return failure();
  return expectShape(op, a.probs, {q[0], a.numHeads, q[1], k[1]}, "probs");
}

// The masks of attention and flash attention: a prefix in
// [0, sequence length] with causal attention only, and segment ids
// [B, S]. Both index queries and keys by position, so they need one length;
// with `cp`, one position in the whole sequence: the segment ids are the
// whole sequence's.
inline LogicalResult verifyAttentionMasks(Operation *op, Value query,
                                          Value key, Value segmentIds,
                                          bool causal, int64_t prefix,
                                          const AttentionCp &cp = {}) {
  auto q = shapeOf(query), k = shapeOf(key);
  if (cp.cp) {
    if (prefix > 0 && !causal)
      return op->emitOpError("prefix needs causal attention");
    if (prefix < 0)
      return op->emitOpError() << "prefix (" << prefix
                               << ") must be 0 or more";
    if (!segmentIds)
      return success();
    auto seg = shapeOf(segmentIds);
    const bool fits = cp.kvStep ? seg.size() == 2 && seg[0] == q[0] &&
                                      seg[1] >= q[1] && seg[1] % q[1] == 0
                                : seg.size() == 2 && seg[0] == q[0] &&
                                      seg[1] == k[1];
    if (!fits)
      return op->emitOpError()
             << "context-parallel segment_ids are the whole sequence's, "
                "[batch, a multiple of the query part], not "
             << segmentIds.getType();
    return success();
  }
  if ((prefix != 0 || segmentIds) && (k[0] != q[0] || k[1] != q[1]))
    return op->emitOpError("query and key must have the same batch and "
                           "sequence sizes");
  if (prefix < 0 || prefix > q[1])
    return op->emitOpError()
           << "prefix (" << prefix << ") must be in [0, sequence length]";
  if (prefix > 0 && !causal)
    return op->emitOpError("prefix needs causal attention");
  if (segmentIds)
    return expectShape(op, segmentIds, {q[0], q[1]}, "segment_ids");
  return success();
}

// `narrow` holds num_kv_heads heads, `wide` num_heads heads.
// `wideHeadsWhole`: the wide side's heads are a multiple of the narrow
// side's (false for a TP rank's slice of replicated kv heads).
inline LogicalResult verifyRepeatKV(Operation *op, Value narrow, Value wide,
                             int64_t numHeads, int64_t numKVHeads,
                             StringRef narrowWhat, StringRef wideWhat,
                             bool wideHeadsWhole = true) {
  if (!wideHeadsWhole && (numHeads <= 0 || numKVHeads <= 0))
    return op->emitOpError("num_heads and num_kv_heads must be positive");
  if ((wideHeadsWhole && failed(verifyHeads(op, numHeads, numKVHeads))) ||
      failed(expectMinRank(op, narrow, 1, narrowWhat)) ||
      failed(verifyHeadPacking(op, narrow, numKVHeads, narrowWhat)) ||
      failed(expectSameElementType(op, wide, narrow, wideWhat, narrowWhat)))
    return failure();
  int64_t headDim = lastDim(narrow) / numKVHeads;
  return expectShape(op, wide, append(leading(narrow), headDim * numHeads),
                     wideWhat);
}

inline LogicalResult verifyRoPE(Operation *op, Value input, Value result,
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

inline LogicalResult verifyLabels(Operation *op, Value logits, Value labels,
                           Value lse) {
  if (failed(expectMinRank(op, logits, 2, "logits")) ||
      failed(expectShape(op, labels, leading(logits), "labels")))
    return failure();
  return expectShape(op, lse, leading(logits), "lse");
}


} // namespace braid::verify
