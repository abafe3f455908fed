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
                          double scale, double dropout,
                          const AttentionCp &cp) {
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
  // One length for queries and keys: the masks index both by position
  // (context parallel: by positions in the whole sequence).
  if (k[0] != q[0] || (!cp.cp && k[1] != q[1]))
    return op->emitOpError("query and key must have the same batch and "
                           "sequence sizes");
  if (failed(verifyAttentionCp(op, query, key, cp)) ||
      failed(verifyAttentionMasks(op, query, key, segmentIds, causal, prefix,
                                  cp)))
    return failure();
  return expectShape(op, lse, {q[0], numHeads, q[1]}, "lse");
}

template <typename Op> AttentionCp cpOf(Op op) {
  return {op.getCp().value_or(false), op.getCpKvStep()};
}

} // namespace

LogicalResult FlashAttentionOp::verify() {
  if (failed(verifyFlash(*this, getQuery(), getKey(), getValue(), getLse(),
                         getSegmentIds(), getNumHeads(), getNumKvHeads(),
                         getCausal(), getPrefix(), getScale().convertToDouble(),
                         getDropout().convertToDouble(), cpOf(*this))))
    return failure();
  return expectLike(*this, getResult(), getQuery(), "result", "query");
}

LogicalResult AttentionMergeOp::verify() {
  Operation *op = *this;
  if (failed(expectRank(op, getA(), 3, "a")) ||
      failed(verifyHeadPacking(op, getA(), static_cast<int64_t>(getNumHeads()), "a")) ||
      failed(expectLike(op, getB(), getA(), "b", "a")) ||
      failed(expectLike(op, getResult(), getA(), "result", "a")))
    return failure();
  auto a = shapeOf(getA());
  const int64_t heads = static_cast<int64_t>(getNumHeads());
  for (auto [v, what] : {std::pair<Value, const char *>{getLseA(), "lse_a"},
                         {getLseB(), "lse_b"},
                         {getLse(), "lse"}})
    if (failed(expectShape(op, v, {a[0], heads, a[1]}, what)))
      return failure();
  return success();
}

LogicalResult FlashAttentionGradInputOp::verify() {
  if (failed(verifyFlash(*this, getQuery(), getKey(), getValue(), getLse(),
                         getSegmentIds(), getNumHeads(), getNumKvHeads(),
                         getCausal(), getPrefix(), getScale().convertToDouble(),
                         getDropout().convertToDouble(), cpOf(*this))) ||
      failed(expectLike(*this, getGrad(), getQuery(), "gradient", "query")) ||
      failed(expectLike(*this, getOutput(), getQuery(), "output", "query")) ||
      failed(expectLike(*this, getQueryGrad(), getQuery(), "query gradient",
                        "query")) ||
      failed(expectLike(*this, getKeyGrad(), getKey(), "key gradient", "key")))
    return failure();
  return expectLike(*this, getValueGrad(), getValue(), "value gradient",
                    "value");
}
