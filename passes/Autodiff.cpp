//===- Autodiff.cpp - reverse-mode differentiation with a B/W split -------===//
//
// Walks @train_step backwards from the loss. For each forward op whose
// results carry a gradient it emits the input-gradient op (B) for operands
// that need a gradient, and the weight-gradient op (W) when a parameter is
// among its operands. Contributions to a value with several uses are summed
// with braid.add in the order they are produced, which is deterministic.
//
// Mixed precision: when a weight operand is the braid.cast of an f32
// parameter (the bf16 copy compute reads), the W op produces the f32
// gradient of the parameter itself and contributes to it directly. There is
// no bf16 weight gradient and no cast back, so every contribution, and the
// sum over micro-batches, stays in f32. A cast whose result receives a
// gradient any other way passes it back through the opposite cast.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "dialects/braid/BraidOps.h"

namespace braid {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

class Differentiator {
public:
  Differentiator(func::FuncOp func) : func_(func), b_(func.getContext()) {}

  LogicalResult run();

private:
  bool needsGrad(Value v) const { return needsGrad_.contains(v); }
  bool isParam(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && func_.getArgAttr(arg.getArgNumber(), "braid.param");
  }
  void addGrad(Value v, Value g) {
    if (!g || !needsGrad(v))
      return;
    auto [it, inserted] = grads_.try_emplace(v, g);
    if (!inserted)
      it->second = AddOp::create(b_, g.getLoc(), g.getType(), it->second, g);
  }
  Value grad(Value v) const { return grads_.lookup(v); }
  // Where the gradient of weight operand `w` goes: the f32 parameter when
  // `w` is its cast, `w` otherwise.
  Value gradTarget(Value w) {
    auto c = w.getDefiningOp<CastOp>();
    if (c && isParam(c.getInput()) &&
        cast<RankedTensorType>(c.getInput().getType()).getElementType().isF32())
      return c.getInput();
    return w;
  }

  void markNeedsGrad();
  LogicalResult backward(Operation *op);

  func::FuncOp func_;
  OpBuilder b_;
  DenseSet<Value> needsGrad_;
  DenseMap<Value, Value> grads_;
};

// Forward propagation of "depends on a parameter".
void Differentiator::markNeedsGrad() {
  for (BlockArgument arg : func_.getArguments())
    if (isParam(arg))
      needsGrad_.insert(arg);
  func_.walk([&](Operation *op) {
    if (llvm::any_of(op->getOperands(), [&](Value v) { return needsGrad(v); }))
      for (Value r : op->getResults())
        needsGrad_.insert(r);
  });
}

LogicalResult Differentiator::backward(Operation *op) {
  Location loc = op->getLoc();
  auto type = [](Value v) { return v.getType(); };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](CrossEntropyOp ce) {
        // The loss is the root: its incoming gradient is 1.
        Value dl = CrossEntropyGradInputOp::create(
            b_, loc, type(ce.getLogits()), ce.getLogits(), ce.getLabels(),
            ce.getLse(), b_.getF32FloatAttr(1.0f));
        addGrad(ce.getLogits(), dl);
        return success();
      })
      .Case([&](LinearOp lin) {
        Value dy = grad(lin.getResult());
        if (needsGrad(lin.getInput()))
          addGrad(lin.getInput(),
                  LinearGradInputOp::create(b_, loc, type(lin.getInput()), dy,
                                            lin.getWeight()));
        if (needsGrad(lin.getWeight()) ||
            (lin.getBias() && needsGrad(lin.getBias()))) {
          Value weight = gradTarget(lin.getWeight());
          Value bias = lin.getBias() ? gradTarget(lin.getBias()) : Value();
          auto w = LinearGradWeightOp::create(b_, loc, type(weight),
                                              bias ? type(bias) : Type(), dy,
                                              lin.getInput());
          addGrad(weight, w.getWeightGrad());
          if (bias)
            addGrad(bias, w.getBiasGrad());
        }
        return success();
      })
      .Case([&](EmbeddingOp emb) {
        Value table = gradTarget(emb.getTable());
        addGrad(table, EmbeddingGradWeightOp::create(b_, loc, type(table),
                                                     grad(emb.getResult()),
                                                     emb.getIds()));
        return success();
      })
      .Case([&](LayerNormOp ln) {
        Value dy = grad(ln.getResult());
        addGrad(ln.getInput(), LayerNormGradInputOp::create(
                                   b_, loc, type(ln.getInput()), dy,
                                   ln.getInput(), ln.getWeight(), ln.getMean(),
                                   ln.getRstd()));
        Value weight = gradTarget(ln.getWeight());
        Value bias = gradTarget(ln.getBias());
        auto w = LayerNormGradWeightOp::create(b_, loc, type(weight),
                                               type(bias), dy, ln.getInput(),
                                               ln.getMean(), ln.getRstd());
        addGrad(weight, w.getWeightGrad());
        addGrad(bias, w.getBiasGrad());
        return success();
      })
      .Case([&](RMSNormOp rms) {
        Value dy = grad(rms.getResult());
        addGrad(rms.getInput(),
                RMSNormGradInputOp::create(b_, loc, type(rms.getInput()), dy,
                                           rms.getInput(), rms.getWeight(),
                                           rms.getRstd()));
        Value weight = gradTarget(rms.getWeight());
        addGrad(weight, RMSNormGradWeightOp::create(b_, loc, type(weight), dy,
                                                    rms.getInput(),
                                                    rms.getRstd()));
        return success();
      })
      .Case([&](AttentionOp at) {
        auto g = AttentionGradInputOp::create(
            b_, loc, type(at.getQuery()), type(at.getKey()),
            type(at.getValue()), grad(at.getResult()), at.getQuery(),
            at.getKey(), at.getValue(), at.getProbs(), at.getSegmentIds(),
            at.getNumHeadsAttr(), at.getNumKvHeadsAttr(), at.getCausalAttr(),
            at.getScaleAttr(), at.getDropoutAttr(), at.getRngOffsetAttr(),
            at.getPrefixAttr());
        addGrad(at.getQuery(), g.getQueryGrad());
        addGrad(at.getKey(), g.getKeyGrad());
        addGrad(at.getValue(), g.getValueGrad());
        return success();
      })
      .Case([&](RepeatKVOp rep) {
        addGrad(rep.getInput(), RepeatKVGradInputOp::create(
                                    b_, loc, type(rep.getInput()),
                                    grad(rep.getResult()),
                                    rep.getNumHeadsAttr(),
                                    rep.getNumKvHeadsAttr()));
        return success();
      })
      .Case([&](RoPEOp rope) {
        addGrad(rope.getInput(),
                RoPEGradInputOp::create(b_, loc, type(rope.getInput()),
                                        grad(rope.getResult()),
                                        rope.getNumHeadsAttr(),
                                        rope.getThetaAttr()));
        return success();
      })
      .Case([&](GeLUOp gelu) {
        addGrad(gelu.getInput(),
                GeLUGradInputOp::create(b_, loc, type(gelu.getInput()),
                                        grad(gelu.getResult()),
                                        gelu.getInput()));
        return success();
      })
      .Case([&](SwiGLUOp sw) {
        auto g = SwiGLUGradInputOp::create(b_, loc, type(sw.getGate()),
                                           type(sw.getUp()),
                                           grad(sw.getResult()), sw.getGate(),
                                           sw.getUp());
        addGrad(sw.getGate(), g.getGateGrad());
        addGrad(sw.getUp(), g.getUpGrad());
        return success();
      })
      .Case([&](AddOp add) {
        Value dy = grad(add.getResult());
        addGrad(add.getLhs(), dy);
        addGrad(add.getRhs(), dy);
        return success();
      })
      .Case([&](DropoutOp drop) {
        addGrad(drop.getInput(),
                DropoutGradInputOp::create(b_, loc, type(drop.getInput()),
                                           grad(drop.getResult()),
                                           drop.getPAttr(),
                                           drop.getRngOffsetAttr()));
        return success();
      })
      .Case([&](CastOp c) {
        addGrad(c.getInput(), CastOp::create(b_, loc, type(c.getInput()),
                                             grad(c.getResult())));
        return success();
      })
      .Case([&](SplitOp split) -> LogicalResult {
        SmallVector<Value> partGrads;
        for (Value part : split.getParts()) {
          Value g = grad(part);
          if (!g)
            return split.emitOpError(
                "autodiff needs a gradient for every part of a split");
          partGrads.push_back(g);
        }
        addGrad(split.getInput(),
                SplitGradInputOp::create(b_, loc, type(split.getInput()),
                                         partGrads));
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("autodiff has no gradient rule for this op");
      });
}

LogicalResult Differentiator::run() {
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);
  auto ce = loss.getDefiningOp<CrossEntropyOp>();
  if (!ce || ce.getLoss() != loss)
    return func_.emitOpError(
        "braid-autodiff expects the loss to be produced by braid.cross_entropy");

  markNeedsGrad();
  b_.setInsertionPoint(ret);
  // Walk the forward ops in reverse; only ops whose results received a
  // gradient (or the loss itself) contribute.
  SmallVector<Operation *> forward;
  for (Operation &op : func_.getBody().front().without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    bool isRoot = op == ce.getOperation();
    bool hasGrad = llvm::any_of(op->getResults(),
                                [&](Value r) { return grads_.count(r); });
    if (!isRoot && !hasGrad)
      continue;
    if (failed(backward(op)))
      return failure();
  }

  // Return the loss and one gradient per parameter, in argument order.
  SmallVector<Value> results = {loss};
  SmallVector<Attribute> resultAttrs = {func_.getResultAttrDict(0)};
  for (BlockArgument arg : func_.getArguments()) {
    if (!isParam(arg))
      continue;
    Value g = grad(arg);
    auto name = cast<DictionaryAttr>(
                    func_.getArgAttr(arg.getArgNumber(), "braid.param"))
                    .getAs<StringAttr>("name");
    if (!g)
      return func_.emitOpError() << "parameter '" << name.getValue()
                                 << "' does not affect the loss";
    results.push_back(g);
    resultAttrs.push_back(
        b_.getDictionaryAttr(b_.getNamedAttr("braid.grad_of", name)));
  }
  func::ReturnOp::create(b_, ret.getLoc(), results);
  ret.erase();
  func_.setFunctionType(b_.getFunctionType(
      func_.getArgumentTypes(), ValueRange(results).getTypes()));
  func_.setAllResultAttrs(resultAttrs);
  return success();
}

struct AutodiffPass : impl::AutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!func) {
      getOperation().emitError("braid-autodiff needs a func.func @train_step");
      return signalPassFailure();
    }
    if (func.getNumResults() == 0) {
      func.emitOpError("braid-autodiff expects a single loss result");
      return signalPassFailure();
    }
    if (func.getNumResults() > 1) {
      func.emitOpError("is already differentiated (it has more than one result)");
      return signalPassFailure();
    }
    if (failed(Differentiator(func).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace braid
