//===- FusedAttentionOps.cpp - verifiers of the fused attention ops
//-----------===//
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/VerifyUtils.h"

using namespace mlir;
using namespace braid;
using namespace braid::verify;

namespace {

// What flash attention adds to the reference checks: the lse replaces
// probs, the prefix and the segment ids.
LogicalResult verifyFlash(Operation *op, Value query, Value key, Value value,
                          Value lse, Value segmentIds, int64_t numHeads,
                          int64_t numKVHeads, bool causal, int64_t prefix,
                          double scale, double dropout) {
  if (failed(verifyHeads(op, numHeads, numKVHeads)) ||
      failed(expectRank(op, query, 3, "query")) ||
      failed(expectRank(op, key, 3, "key")) ||
      failed(verifyHeadPacking(op, query, numHeads, "query")) ||
      failed(verifyHeadPacking(op, key, numKVHeads, "key")) ||
      failed(expectLike(op, value, key, "value", "key")) ||
      failed(expectSameElementType(op, key, query, "key", "query")) ||
      failed(verifyPositive(op, scale, "scale")) ||
      failed(verifyProbability(op, dropout, "dropout")))
    return failure();
  auto q = shapeOf(query), k = shapeOf(key);
  if (k[2] / numKVHeads != q[2] / numHeads)
    return op->emitOpError()
           << "query head dim " << q[2] / numHeads
           << " differs from key head dim " << k[2] / numKVHeads;
  // One length for queries and keys: the masks index both by position.
  if (k[0] != q[0] || k[1] != q[1])
    return op->emitOpError("query and key must have the same batch and "
                           "sequence sizes");
  if (failed(verifyAttentionMasks(op, query, key, segmentIds, causal,
                                  prefix)))
    return failure();
  return expectShape(op, lse, {q[0], numHeads, q[1]}, "lse");
}

} // namespace

LogicalResult FlashAttentionOp::verify() {
  if (failed(verifyFlash(*this, getQuery(), getKey(), getValue(), getLse(),
                         getSegmentIds(), getNumHeads(), getNumKvHeads(),
                         getCausal(), getPrefix(), getScale().convertToDouble(),
                         getDropout().convertToDouble())))
    return failure();
  return expectLike(*this, getResult(), getQuery(), "result", "query");
}

LogicalResult FlashAttentionGradInputOp::verify() {
  if (failed(verifyFlash(*this, getQuery(), getKey(), getValue(), getLse(),
                         getSegmentIds(), getNumHeads(), getNumKvHeads(),
                         getCausal(), getPrefix(), getScale().convertToDouble(),
                         getDropout().convertToDouble())) ||
      failed(expectLike(*this, getGrad(), getQuery(), "gradient", "query")) ||
      failed(expectLike(*this, getOutput(), getQuery(), "output", "query")) ||
      failed(expectLike(*this, getQueryGrad(), getQuery(), "query gradient",
                        "query")) ||
      failed(expectLike(*this, getKeyGrad(), getKey(), "key gradient", "key")))
    return failure();
  return expectLike(*this, getValueGrad(), getValue(), "value gradient",
                    "value");
}
