//===- FuseElementwise.cpp - norm, activation, dropout and RoPE fusions ---===//
//
// Graph rewrites on the stage functions after autodiff (docs/fusion.md). Each one
// replaces a group of ops by a fused op that computes the same values; the
// forward and backward halves of a pattern are matched together where the
// backward has something to fuse.
//
//===----------------------------------------------------------------------===//

#include <optional>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"
#include "dialects/braid/StageFunctions.h"

namespace braid {
#define GEN_PASS_DEF_FUSEADDNORMPASS
#define GEN_PASS_DEF_FUSEBIASGELUPASS
#define GEN_PASS_DEF_FUSEBIASDROPOUTADDPASS
#define GEN_PASS_DEF_FUSEBIASSWIGLUPASS
#define GEN_PASS_DEF_FUSEROPEQKVPASS
#include "passes/fuse/FuseElementwise.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

// True when `v` is available at `at`: a block argument of its block or the
// result of an op before it there.
bool availableAt(Value v, Operation *at) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == at->getBlock();
  Operation *def = v.getDefiningOp();
  return def->getBlock() == at->getBlock() && def->isBeforeInBlock(at);
}

// The dropout producing `v` when the add reading `v` is its only use.
DropoutOp soleDropout(Value v) {
  auto d = v.getDefiningOp<DropoutOp>();
  return d && d->hasOneUse() ? d : DropoutOp();
}

//===----------------------------------------------------------------------===//
// add + norm
//===----------------------------------------------------------------------===//

struct AddNormMatch {
  Value residual, branch;
  DropoutOp dropout; // folded into the fused op, when there is one
};

// The add (and dropout) under a norm's input, if the norm can absorb them.
std::optional<AddNormMatch> matchAddNorm(Operation *norm, Value input,
                                         ValueRange vectors) {
  auto add = input.getDefiningOp<AddOp>();
  if (!add || add->getBlock() != norm->getBlock())
    return std::nullopt;
  for (Value v : vectors)
    if (!availableAt(v, add))
      return std::nullopt;
  AddNormMatch m{add.getLhs(), add.getRhs(), DropoutOp()};
  if (DropoutOp d = soleDropout(add.getRhs())) {
    m.dropout = d;
    m.branch = d.getInput();
  } else if (DropoutOp d = soleDropout(add.getLhs())) {
    m.dropout = d;
    m.residual = add.getRhs();
    m.branch = d.getInput();
  }
  return m;
}

struct FuseAddNormPass : impl::FuseAddNormPassBase<FuseAddNormPass> {
  void runOnOperation() override {
    FailureOr<SmallVector<func::FuncOp>> funcs =
        stageFunctions(getOperation(), "braid-fuse-add-norm");
    if (failed(funcs))
      return signalPassFailure();
    for (func::FuncOp func : *funcs)
      fuseIn(func);
  }

  void fuseIn(func::FuncOp func) {
    SmallVector<Operation *> norms;
    func.walk([&](Operation *op) {
      if (isa<RMSNormOp, LayerNormOp>(op))
        norms.push_back(op);
    });
    // The sums the fused forward ops return: backward input gradients of
    // norms over them fuse with the residual's gradient sum.
    llvm::SmallPtrSet<Value, 16> sums;
    for (Operation *op : norms) {
      Value sum = fuseForward(op);
      if (sum)
        sums.insert(sum);
    }
    SmallVector<Operation *> grads;
    func.walk([&](Operation *op) {
      if (auto g = dyn_cast<RMSNormGradInputOp>(op);
          g && sums.contains(g.getInput()))
        grads.push_back(op);
      if (auto g = dyn_cast<LayerNormGradInputOp>(op);
          g && sums.contains(g.getInput()))
        grads.push_back(op);
    });
    for (Operation *op : grads)
      fuseBackward(op);
  }

  // Rewrites `norm` over an add; returns the fused op's sum, or null.
  Value fuseForward(Operation *norm) {
    auto floatAttr = [&](double v) {
      return OpBuilder(norm).getF32FloatAttr(static_cast<float>(v));
    };
    auto rms = dyn_cast<RMSNormOp>(norm);
    auto layer = dyn_cast<LayerNormOp>(norm);
    Value input = rms ? rms.getInput() : layer.getInput();
    SmallVector<Value> vectors;
    if (rms)
      vectors = {rms.getWeight()};
    else
      vectors = {layer.getWeight(), layer.getBias()};
    std::optional<AddNormMatch> m = matchAddNorm(norm, input, vectors);
    if (!m)
      return Value();
    auto add = input.getDefiningOp<AddOp>();
    OpBuilder b(add);
    FloatAttr p = floatAttr(m->dropout ? m->dropout.getP().convertToDouble()
                                       : 0.0);
    IntegerAttr offset =
        b.getI64IntegerAttr(m->dropout ? m->dropout.getRngOffset() : 0);
    // Sequence parallel: the draws of each rank's part of the sequence.
    IntegerAttr tpDim = m->dropout ? m->dropout.getTpDimAttr() : IntegerAttr();
    // Context parallel: the draws of each rank's part of the sequence.
    IntegerAttr cpDim = m->dropout ? m->dropout.getCpDimAttr() : IntegerAttr();
    Value sum;
    if (rms) {
      auto f = FusedAddRMSNormOp::create(
          b, norm->getLoc(), input.getType(), rms.getResult().getType(),
          rms.getRstd().getType(), m->residual, m->branch, rms.getWeight(),
          rms.getEpsAttr(), p, offset, tpDim, cpDim);
      copyMarks(rms, f);
      rms.getResult().replaceAllUsesWith(f.getResult());
      rms.getRstd().replaceAllUsesWith(f.getRstd());
      sum = f.getSum();
    } else {
      auto f = FusedAddLayerNormOp::create(
          b, norm->getLoc(), input.getType(), layer.getResult().getType(),
          layer.getMean().getType(), layer.getRstd().getType(), m->residual,
          m->branch, layer.getWeight(), layer.getBias(), layer.getEpsAttr(),
          p, offset, tpDim, cpDim);
      copyMarks(layer, f);
      layer.getResult().replaceAllUsesWith(f.getResult());
      layer.getMean().replaceAllUsesWith(f.getMean());
      layer.getRstd().replaceAllUsesWith(f.getRstd());
      sum = f.getSum();
    }
    add.getResult().replaceAllUsesWith(sum);
    norm->erase();
    add->erase();
    if (m->dropout)
      m->dropout->erase();
    return sum;
  }

  // norm_grad_input followed by the add that sums it with the residual's
  // gradient.
  void fuseBackward(Operation *grad) {
    Value dx = grad->getResult(0);
    if (!dx.hasOneUse())
      return;
    auto add = dyn_cast<AddOp>(*dx.getUsers().begin());
    if (!add || add->getBlock() != grad->getBlock())
      return;
    Value other = add.getLhs() == dx ? add.getRhs() : add.getLhs();
    OpBuilder b(add);
    Value fused;
    if (auto g = dyn_cast<RMSNormGradInputOp>(grad))
      fused = FusedAddRMSNormGradInputOp::create(
          b, grad->getLoc(), dx.getType(), g.getGrad(), g.getInput(),
          g.getWeight(), g.getRstd(), other);
    else if (auto g = dyn_cast<LayerNormGradInputOp>(grad))
      fused = FusedAddLayerNormGradInputOp::create(
          b, grad->getLoc(), dx.getType(), g.getGrad(), g.getInput(),
          g.getWeight(), g.getMean(), g.getRstd(), other);
    copyMarks(grad, fused.getDefiningOp());
    add.getResult().replaceAllUsesWith(fused);
    add->erase();
    grad->erase();
  }
};

//===----------------------------------------------------------------------===//
// bias + GELU
//===----------------------------------------------------------------------===//

// `linear` again, without its bias, at the same place.
Value withoutBias(LinearOp linear) {
  OpBuilder b(linear);
  auto bare = LinearOp::create(b, linear.getLoc(),
                               linear.getResult().getType(), linear.getInput(),
                               linear.getWeight(), Value(), {});
  copyMarks(linear, bare);
  return bare;
}

struct FuseBiasGeluPass : impl::FuseBiasGeluPassBase<FuseBiasGeluPass> {
  void runOnOperation() override {
    FailureOr<SmallVector<func::FuncOp>> funcs =
        stageFunctions(getOperation(), "braid-fuse-bias-gelu");
    if (failed(funcs))
      return signalPassFailure();
    for (func::FuncOp func : *funcs)
      fuseIn(func);
  }

  void fuseIn(func::FuncOp func) {
    SmallVector<GeLUOp> gelus;
    func.walk([&](GeLUOp op) { gelus.push_back(op); });
    for (GeLUOp gelu : gelus)
      fuse(gelu);
  }

  void fuse(GeLUOp gelu) {
    auto linear = gelu.getInput().getDefiningOp<LinearOp>();
    if (!linear || !linear.getBias())
      return;
    Value pre = linear.getResult();
    // Every reader of the pre-activation must be this GELU or its
    // gradient; anything else needs the biased value itself.
    SmallVector<GeLUGradInputOp> grads;
    for (Operation *user : pre.getUsers()) {
      if (user == gelu.getOperation())
        continue;
      auto g = dyn_cast<GeLUGradInputOp>(user);
      if (!g || g.getGrad() == pre)
        return;
      grads.push_back(g);
    }
    Value bias = linear.getBias();
    Value h = withoutBias(linear);
    OpBuilder b(gelu);
    auto fused = FusedBiasGeLUOp::create(b, gelu.getLoc(),
                                         gelu.getResult().getType(), h, bias);
    copyMarks(gelu, fused);
    gelu.getResult().replaceAllUsesWith(fused.getResult());
    gelu->erase();
    for (GeLUGradInputOp g : grads) {
      b.setInsertionPoint(g);
      auto fg = FusedBiasGeLUGradInputOp::create(
          b, g.getLoc(), g.getInputGrad().getType(), g.getGrad(), h, bias);
      copyMarks(g, fg);
      g.getInputGrad().replaceAllUsesWith(fg.getInputGrad());
      g->erase();
    }
    linear->erase();
  }
};

//===----------------------------------------------------------------------===//
// bias + dropout + add
//===----------------------------------------------------------------------===//

struct FuseBiasDropoutAddPass
    : impl::FuseBiasDropoutAddPassBase<FuseBiasDropoutAddPass> {
  void runOnOperation() override {
    FailureOr<SmallVector<func::FuncOp>> funcs =
        stageFunctions(getOperation(), "braid-fuse-bias-dropout-add");
    if (failed(funcs))
      return signalPassFailure();
    for (func::FuncOp func : *funcs)
      fuseIn(func);
  }

  void fuseIn(func::FuncOp func) {
    SmallVector<AddOp> adds;
    func.walk([&](AddOp op) { adds.push_back(op); });
    for (AddOp add : adds)
      for (unsigned side = 0; side < 2; ++side)
        if (fuse(add, side))
          break;
  }

  // Fuses when operand `side` of `add` is a biased linear, through an
  // optional dropout, that nothing else reads.
  bool fuse(AddOp add, unsigned side) {
    Value branch = add->getOperand(side);
    Value residual = add->getOperand(1 - side);
    if (branch == residual)
      return false;
    DropoutOp dropout = soleDropout(branch);
    Value pre = dropout ? dropout.getInput() : branch;
    auto linear = pre.getDefiningOp<LinearOp>();
    if (!linear || !linear.getBias() || !linear->hasOneUse() ||
        linear->getBlock() != add->getBlock())
      return false;
    Value bias = linear.getBias();
    Value h = withoutBias(linear);
    OpBuilder b(add);
    auto fused = FusedBiasDropoutAddOp::create(
        b, add.getLoc(), add.getResult().getType(), h, bias, residual,
        dropout ? dropout.getPAttr() : b.getF32FloatAttr(0.0f),
        dropout ? dropout.getRngOffsetAttr() : b.getI64IntegerAttr(0),
        dropout ? dropout.getTpDimAttr() : IntegerAttr(),
        dropout ? dropout.getCpDimAttr() : IntegerAttr());
    copyMarks(add, fused);
    add.getResult().replaceAllUsesWith(fused.getResult());
    add->erase();
    if (dropout)
      dropout->erase();
    linear->erase();
    return true;
  }
};

//===----------------------------------------------------------------------===//
// bias + SwiGLU
//===----------------------------------------------------------------------===//

// The biased linear producing `v` when its only readers are `swiglu` and
// the SwiGLU gradients in `grads`.
LinearOp biasedFeeding(Value v, Operation *swiglu,
                       SmallVectorImpl<SwiGLUGradInputOp> &grads) {
  auto linear = v.getDefiningOp<LinearOp>();
  if (!linear || !linear.getBias())
    return LinearOp();
  for (Operation *user : v.getUsers()) {
    if (user == swiglu)
      continue;
    auto g = dyn_cast<SwiGLUGradInputOp>(user);
    if (!g || g.getGrad() == v)
      return LinearOp();
    if (!llvm::is_contained(grads, g))
      grads.push_back(g);
  }
  return linear;
}

struct FuseBiasSwigluPass : impl::FuseBiasSwigluPassBase<FuseBiasSwigluPass> {
  void runOnOperation() override {
    FailureOr<SmallVector<func::FuncOp>> funcs =
        stageFunctions(getOperation(), "braid-fuse-bias-swiglu");
    if (failed(funcs))
      return signalPassFailure();
    for (func::FuncOp func : *funcs)
      fuseIn(func);
  }

  void fuseIn(func::FuncOp func) {
    SmallVector<SwiGLUOp> ops;
    func.walk([&](SwiGLUOp op) { ops.push_back(op); });
    for (SwiGLUOp op : ops)
      fuse(op);
  }

  void fuse(SwiGLUOp swiglu) {
    if (swiglu.getGate() == swiglu.getUp())
      return;
    SmallVector<SwiGLUGradInputOp> grads;
    LinearOp gate = biasedFeeding(swiglu.getGate(), swiglu, grads);
    LinearOp up = biasedFeeding(swiglu.getUp(), swiglu, grads);
    if (!gate || !up)
      return;
    // Each gradient must read this gate and this up, in their places.
    for (SwiGLUGradInputOp g : grads)
      if (g.getGate() != swiglu.getGate() || g.getUp() != swiglu.getUp())
        return;
    Value bg = gate.getBias(), bu = up.getBias();
    Value g0 = withoutBias(gate), u0 = withoutBias(up);
    OpBuilder b(swiglu);
    auto fused = FusedBiasSwiGLUOp::create(
        b, swiglu.getLoc(), swiglu.getResult().getType(), g0, u0, bg, bu);
    copyMarks(swiglu, fused);
    swiglu.getResult().replaceAllUsesWith(fused.getResult());
    swiglu->erase();
    for (SwiGLUGradInputOp g : grads) {
      b.setInsertionPoint(g);
      auto fg = FusedBiasSwiGLUGradInputOp::create(
          b, g.getLoc(), g.getGateGrad().getType(), g.getUpGrad().getType(),
          g.getGrad(), g0, u0, bg, bu);
      copyMarks(g, fg);
      g.getGateGrad().replaceAllUsesWith(fg.getGateGrad());
      g.getUpGrad().replaceAllUsesWith(fg.getUpGrad());
      g->erase();
    }
    gate->erase();
    up->erase();
  }
};

//===----------------------------------------------------------------------===//
// RoPE in the q/k projection's epilogue
//===----------------------------------------------------------------------===//

struct FuseRopeQkvPass : impl::FuseRopeQkvPassBase<FuseRopeQkvPass> {
  void runOnOperation() override {
    FailureOr<SmallVector<func::FuncOp>> funcs =
        stageFunctions(getOperation(), "braid-fuse-rope-qkv");
    if (failed(funcs))
      return signalPassFailure();
    for (func::FuncOp func : *funcs)
      fuseIn(func);
  }

  void fuseIn(func::FuncOp func) {
    SmallVector<RoPEOp> ropes;
    func.walk([&](RoPEOp op) { ropes.push_back(op); });
    for (RoPEOp rope : ropes)
      fuse(rope);
  }

  void fuse(RoPEOp rope) {
    auto linear = rope.getInput().getDefiningOp<LinearOp>();
    if (!linear || !linear->hasOneUse())
      return;
    Value w = linear.getWeight();
    OpBuilder b(rope);
    auto fused = FusedLinearRoPEOp::create(
        b, rope.getLoc(), rope.getResult().getType(), linear.getInput(), w,
        linear.getBias(), rope.getNumHeadsAttr(), rope.getThetaAttr(),
        rope.getCpAttr());
    copyMarks(rope, fused);
    const int64_t numHeads = rope.getNumHeads();
    const APFloat theta = rope.getTheta();
    const BoolAttr cp = rope.getCpAttr();
    rope.getResult().replaceAllUsesWith(fused.getResult());
    rope->erase();
    linear->erase();
    // Backward: the projection's input gradient reads the rotated-back
    // gradient of a rope_grad_input with this rope's parameters.
    SmallVector<LinearGradInputOp> grads;
    for (Operation *user : w.getUsers())
      if (auto g = dyn_cast<LinearGradInputOp>(user))
        grads.push_back(g);
    for (LinearGradInputOp g : grads)
      fuseBackward(g, numHeads, theta, cp);
  }

  void fuseBackward(LinearGradInputOp gradInput, int64_t numHeads,
                    const APFloat &theta, BoolAttr cp) {
    auto ropeGrad = gradInput.getGrad().getDefiningOp<RoPEGradInputOp>();
    if (!ropeGrad || ropeGrad.getNumHeads() != numHeads ||
        ropeGrad.getTheta() != theta || ropeGrad.getCpAttr() != cp)
      return;
    Value unrotated = ropeGrad.getInputGrad();
    // Its readers: this input gradient and weight gradients only.
    Operation *first = gradInput;
    for (Operation *user : unrotated.getUsers()) {
      if (user != gradInput.getOperation() && !isa<LinearGradWeightOp>(user))
        return;
      if (user->getBlock() != gradInput->getBlock())
        return;
      if (user->isBeforeInBlock(first))
        first = user;
    }
    if (!availableAt(gradInput.getWeight(), first))
      return;
    OpBuilder b(first);
    auto fused = FusedLinearRoPEGradInputOp::create(
        b, gradInput.getLoc(), gradInput.getInputGrad().getType(),
        unrotated.getType(), ropeGrad.getGrad(), gradInput.getWeight(),
        ropeGrad.getNumHeadsAttr(), ropeGrad.getThetaAttr(),
        ropeGrad.getCpAttr());
    copyMarks(gradInput, fused);
    gradInput.getInputGrad().replaceAllUsesWith(fused.getInputGrad());
    gradInput->erase();
    unrotated.replaceAllUsesWith(fused.getLinearGrad());
    ropeGrad->erase();
  }
};

} // namespace
} // namespace braid
