//===- FuseGqa.cpp - attention reads grouped K/V heads in place -----------===//
//
// attention(q, repeat_kv(k), repeat_kv(v)) -> attention(q, k, v) with
// num_kv_heads = Hkv, and, for each attention_grad_input reading its probs,
// repeat_kv_grad_input(attention_grad_input(...).dk) -> the grouped dk the
// kernel writes directly (the same for dv). A group is rewritten whole or
// not at all: a backward op that does not match, or whose key/value
// gradient is read by anything but its repeat_kv_grad_input, leaves the
// group alone.
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
#define GEN_PASS_DEF_FUSEGQAPASS
#include "passes/fuse/FuseAttention.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

// The repeat_kv that widens `v` to `numHeads` heads, or null.
RepeatKVOp wideningOf(Value v, int64_t numHeads) {
  auto rep = v.getDefiningOp<RepeatKVOp>();
  // A TP rank's slice of replicated kv heads reads no kv head per group.
  if (!rep || static_cast<int64_t>(rep.getNumHeads()) != numHeads ||
      rep.getTpSlice().value_or(false))
    return {};
  return rep;
}

// The only user of `grad` when it is a repeat_kv_grad_input undoing `rep`.
RepeatKVGradInputOp narrowingOf(Value grad, RepeatKVOp rep) {
  if (!grad.hasOneUse())
    return {};
  auto sum = dyn_cast<RepeatKVGradInputOp>(*grad.getUsers().begin());
  if (!sum || sum.getNumHeads() != rep.getNumHeads() ||
      sum.getNumKvHeads() != rep.getNumKvHeads() ||
      sum.getInputGrad().getType() != rep.getInput().getType())
    return {};
  return sum;
}

struct Backward {
  AttentionGradInputOp grad;
  RepeatKVGradInputOp keySum, valueSum;
};

// Rewrites one attention and its backward ops; false when they do not
// match.
bool fuse(AttentionOp at) {
  const int64_t h = at.getNumHeads();
  if (static_cast<int64_t>(at.getNumKvHeads()) != h)
    return false;
  RepeatKVOp repK = wideningOf(at.getKey(), h);
  RepeatKVOp repV = wideningOf(at.getValue(), h);
  if (!repK || !repV || repK.getNumKvHeads() != repV.getNumKvHeads())
    return false;
  SmallVector<Backward> backward;
  for (Operation *user : at.getProbs().getUsers()) {
    auto g = dyn_cast<AttentionGradInputOp>(user);
    if (!g)
      continue; // reads the probabilities, which do not change
    if (g.getProbs() != at.getProbs() || g.getQuery() != at.getQuery() ||
        g.getKey() != at.getKey() || g.getValue() != at.getValue() ||
        !sameAttention(at, g))
      return false;
    Backward bw{g, narrowingOf(g.getKeyGrad(), repK),
                narrowingOf(g.getValueGrad(), repV)};
    if (!bw.keySum || !bw.valueSum)
      return false;
    backward.push_back(bw);
  }

  OpBuilder b(at);
  IntegerAttr hkv = repK.getNumKvHeadsAttr();
  auto fwd = AttentionOp::create(
      b, at.getLoc(), at.getResult().getType(), at.getProbs().getType(),
      at.getQuery(), repK.getInput(), repV.getInput(), at.getSegmentIds(),
      at.getNumHeadsAttr(), hkv, at.getCausalAttr(), at.getScaleAttr(),
      at.getDropoutAttr(), at.getRngOffsetAttr(), at.getPrefixAttr(),
      at.getHeadShardAttr(), at.getCpAttr(), at.getCpKvStepAttr());
  copyMarks(at, fwd);
  at.replaceAllUsesWith(fwd.getResults());
  at.erase();
  for (Backward &bw : backward) {
    AttentionGradInputOp g = bw.grad;
    b.setInsertionPoint(g);
    auto ng = AttentionGradInputOp::create(
        b, g.getLoc(), g.getQueryGrad().getType(),
        bw.keySum.getInputGrad().getType(),
        bw.valueSum.getInputGrad().getType(), g.getGrad(), g.getQuery(),
        repK.getInput(), repV.getInput(), fwd.getProbs(), g.getSegmentIds(),
        g.getNumHeadsAttr(), hkv, g.getCausalAttr(), g.getScaleAttr(),
        g.getDropoutAttr(), g.getRngOffsetAttr(), g.getPrefixAttr(),
        g.getHeadShardAttr(), g.getCpAttr(), g.getCpKvStepAttr());
    copyMarks(g, ng);
    g.getQueryGrad().replaceAllUsesWith(ng.getQueryGrad());
    bw.keySum.getInputGrad().replaceAllUsesWith(ng.getKeyGrad());
    bw.valueSum.getInputGrad().replaceAllUsesWith(ng.getValueGrad());
    bw.keySum.erase();
    bw.valueSum.erase();
    g.erase();
  }
  // The widened copies go once nothing else reads them.
  if (repK.getResult().use_empty())
    repK.erase();
  if (repV != repK && repV.getResult().use_empty())
    repV.erase();
  return true;
}

struct FuseGqaPass : impl::FuseGqaPassBase<FuseGqaPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> candidates;
    getOperation().walk([&](AttentionOp at) { candidates.push_back(at); });
    for (AttentionOp at : candidates)
      fuse(at);
  }
};

} // namespace
} // namespace braid
