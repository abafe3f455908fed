//===- FuseFlashAttention.cpp - attention without stored probabilities ----===//
//
// %o, %p = attention(q, k, v); %dq, %dk, %dv = attention_grad_input(do, q,
// k, v, %p) becomes %o, %lse = flash_attention(q, k, v) and
// flash_attention_grad_input(do, q, k, v, %o, %lse). The probabilities are
// then never stored: backward recomputes them from the lse.
//
// Only an attention whose probs are read by nothing but backward ops of the
// same q, k, v, masks and attributes is rewritten: another reader would need
// the [B, H, S, S] tensor that no longer exists. The masks (prefix, segment
// ids) carry over; queries and keys must have one length.
//
//===----------------------------------------------------------------------===//
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "passes/fuse/AttentionMatch.h"
#include "passes/fuse/FusionSet.h"

namespace braid {
#define GEN_PASS_DEF_FUSEFLASHATTENTIONPASS
#include "passes/fuse/FuseAttention.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

// The same value, or (context parallel) the same whole sequence gathered
// again for backward.
bool sameKeys(Value a, Value b) {
  if (a == b)
    return true;
  auto ga = a.getDefiningOp<CommAllGatherOp>();
  auto gb = b.getDefiningOp<CommAllGatherOp>();
  return ga && gb && ga.getInput() == gb.getInput() &&
         ga.getAxis() == gb.getAxis() && ga.getDim() == gb.getDim();
}

bool matches(AttentionOp a, AttentionGradInputOp g) {
  return g.getProbs() == a.getProbs() && g.getQuery() == a.getQuery() &&
         sameKeys(g.getKey(), a.getKey()) &&
         sameKeys(g.getValue(), a.getValue()) && sameAttention(a, g);
}

bool fuse(AttentionOp at) {
  SmallVector<AttentionGradInputOp> backward;
  for (Operation *user : at.getProbs().getUsers()) {
    auto g = dyn_cast<AttentionGradInputOp>(user);
    if (!g || !matches(at, g))
      return false;
    backward.push_back(g);
  }
  auto q = cast<RankedTensorType>(at.getQuery().getType());
  auto k = cast<RankedTensorType>(at.getKey().getType());
  // Flash attention's masks index queries and keys by one position.
  // Context parallel's keys may be the whole sequence, queries one part.
  if (k.getDimSize(1) != q.getDimSize(1) && !at.getCp().value_or(false))
    return false;
  const int64_t h = at.getNumHeads();
  auto lseType = RankedTensorType::get({q.getDimSize(0), h, q.getDimSize(1)},
                                       Float32Type::get(at.getContext()));
  OpBuilder b(at);
  // The reference op's masks carry over: an absent prefix is 0.
  IntegerAttr prefix =
      at.getPrefixAttr() ? at.getPrefixAttr() : b.getI64IntegerAttr(0);
  auto fwd = FlashAttentionOp::create(
      b, at.getLoc(), at.getResult().getType(), lseType, at.getQuery(),
      at.getKey(), at.getValue(), at.getSegmentIds(), at.getNumHeadsAttr(),
      at.getNumKvHeadsAttr(), at.getCausalAttr(), prefix, at.getScaleAttr(),
      at.getDropoutAttr(), at.getRngOffsetAttr(), at.getHeadShardAttr(),
      at.getCpAttr(), at.getCpKvStepAttr());
  copyMarks(at, fwd);
  at.getResult().replaceAllUsesWith(fwd.getResult());
  for (AttentionGradInputOp g : backward) {
    b.setInsertionPoint(g);
    auto ng = FlashAttentionGradInputOp::create(
        b, g.getLoc(), g.getQueryGrad().getType(), g.getKeyGrad().getType(),
        g.getValueGrad().getType(), g.getGrad(), g.getQuery(), g.getKey(),
        g.getValue(), fwd.getResult(), fwd.getLse(), g.getSegmentIds(),
        g.getNumHeadsAttr(), g.getNumKvHeadsAttr(), g.getCausalAttr(), prefix,
        g.getScaleAttr(), g.getDropoutAttr(), g.getRngOffsetAttr(),
        g.getHeadShardAttr(), g.getCpAttr(), g.getCpKvStepAttr());
    copyMarks(g, ng);
    g.replaceAllUsesWith(ng.getResults());
    g.erase();
  }
  at.erase();
  return true;
}

struct FuseFlashAttentionPass
    : impl::FuseFlashAttentionPassBase<FuseFlashAttentionPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> candidates;
    getOperation().walk([&](AttentionOp at) { candidates.push_back(at); });
    for (AttentionOp at : candidates)
      fuse(at);
  }
};

} // namespace
} // namespace braid
