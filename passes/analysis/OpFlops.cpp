#include "passes/analysis/OpFlops.h"

#include "mlir/IR/BuiltinTypes.h"

#include "dialects/braid/BraidOps.h"

namespace braid {

using namespace mlir;

namespace {

double elements(Value v) {
  auto type = dyn_cast<ShapedType>(v.getType());
  return type && type.hasStaticShape() ? double(type.getNumElements()) : 0;
}

// 2 x (result elements) x K, K being the weight's input features.
double matmulFlops(Value input, Value weight, Value result) {
  auto w = dyn_cast<ShapedType>(weight.getType());
  if (!w || w.getRank() != 2 || !input)
    return 0;
  return 2 * elements(result) * double(w.getDimSize(1));
}

// Both products of [B, H, Sq, Dh] queries with [B, H, Sk, Dh] keys and
// values: 4 B Sq (H Dh) Sk, half of it when causal.
double attentionFlops(Value query, Value key, bool causal) {
  auto k = dyn_cast<ShapedType>(key.getType());
  if (!k || k.getRank() < 2)
    return 0;
  const double flops = 4 * elements(query) * double(k.getDimSize(1));
  return causal ? flops / 2 : flops;
}

// The experts' GEMMs: 2 x (result elements) x K, K the last dimension of
// the [E, M, K] weight, for every row of the result (under expert parallel
// the dropless bound's, the most a micro-batch can route).
double expertGemmFlops(Value weight, Value result) {
  auto w = dyn_cast<ShapedType>(weight.getType());
  if (!w || w.getRank() != 3)
    return 0;
  return 2 * elements(result) * double(w.getDimSize(2));
}

} // namespace

double forwardFlops(Operation *op) {
  if (auto grouped = dyn_cast<MoeGroupedLinearOp>(op))
    return expertGemmFlops(grouped.getWeight(), grouped.getResult());
  if (auto batched = dyn_cast<MoeBatchedLinearOp>(op))
    return expertGemmFlops(batched.getWeight(), batched.getResult());
  if (auto linear = dyn_cast<LinearOp>(op))
    return matmulFlops(linear.getInput(), linear.getWeight(),
                       linear.getResult());
  if (auto fused = dyn_cast<FusedLinearRoPEOp>(op))
    return matmulFlops(fused.getInput(), fused.getWeight(), fused.getResult()) +
           elements(fused.getResult());
  if (auto attention = dyn_cast<AttentionOp>(op))
    return attentionFlops(attention.getQuery(), attention.getKey(),
                          attention.getCausal());
  if (auto flash = dyn_cast<FlashAttentionOp>(op))
    return attentionFlops(flash.getQuery(), flash.getKey(), flash.getCausal());
  if (op->getName().getStringRef().starts_with("braid.comm."))
    return 0;
  double written = 0;
  for (Value result : op->getResults())
    written += elements(result);
  return written;
}

} // namespace braid
