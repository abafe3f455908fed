//===- Autodiff.cpp - reverse-mode differentiation with a B/W split -------===//
//
// Walks the stage function backwards from the loss. Each forward op whose results
// carry a gradient emits its backward through its DifferentiableOp rule
// (dialects/braid/Gradients.cpp): the input-gradient op (B) for operands
// that need a gradient, and the weight-gradient op (W) when a parameter is
// among its operands. Contributions to a value with several uses are summed
// with braid.add in the order they are produced, which is deterministic.
//
// Marks: every op of the function as it comes in is `forward`; each op a
// rule creates takes the layer of the op it differentiates and the phase
// `weight_grad` when it has the WeightGradient trait (or sums such
// results), `input_grad` otherwise.
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
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"
#include "dialects/braid/StageFunctions.h"

namespace braid {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

// Stamps the marks on every op a gradient rule creates: the layer of the
// forward op being differentiated, and the phase W for weight-gradient ops
// (and for the sums of their results, and hot-expert replication's
// reduction of them into their owners), B for every other op.
class MarkStamper : public OpBuilder::Listener {
public:
  void setLayer(LayerAttr layer) { layer_ = layer; }

  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    if (layer_)
      setLayerMark(op, layer_);
    setPhaseMark(op, isWeightGradient(op) ? Phase::WeightGrad
                                          : Phase::InputGrad);
  }

private:
  static bool isWeightGradient(Operation *op) {
    if (op->hasTrait<WeightGradient>())
      return true;
    return isa<AddOp, CommReduceReplicasOp>(op) &&
           llvm::any_of(op->getOperands(), [](Value v) {
             Operation *def = v.getDefiningOp();
             return def && phaseMark(def) == Phase::WeightGrad;
           });
  }

  LayerAttr layer_;
};

class Differentiator final : public GradientBuilder {
public:
  Differentiator(func::FuncOp func) : func_(func), b_(func.getContext()) {
    b_.setListener(&stamper_);
  }

  LogicalResult run();

  OpBuilder &builder() override { return b_; }
  bool needsGrad(Value v) const override { return needsGrad_.contains(v); }
  void addGrad(Value v, Value g) override {
    if (!g || !needsGrad(v))
      return;
    auto [it, inserted] = grads_.try_emplace(v, g);
    if (!inserted)
      it->second = AddOp::create(b_, g.getLoc(), g.getType(), it->second, g);
  }
  Value grad(Value v) const override { return grads_.lookup(v); }
  Value gradTarget(Value w) override {
    // The replicas of hot experts (comm.replicate_experts of the f32
    // masters) take f32 gradients like the masters they copy.
    auto c = w.getDefiningOp<CastOp>();
    if (c &&
        (isParam(c.getInput()) ||
         c.getInput().getDefiningOp<CommReplicateExpertsOp>()) &&
        cast<RankedTensorType>(c.getInput().getType()).getElementType().isF32())
      return c.getInput();
    return w;
  }

private:
  // The braid.param of a parameter argument; null for any other value.
  ParamAttr paramAttr(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg)
      return {};
    return func_.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                             BraidDialect::kParamAttr);
  }
  bool isParam(Value v) { return static_cast<bool>(paramAttr(v)); }
  void markNeedsGrad();

  func::FuncOp func_;
  OpBuilder b_;
  MarkStamper stamper_;
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

LogicalResult Differentiator::run() {
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);
  auto ce = loss.getDefiningOp<CrossEntropyOp>();
  if (!ce || ce.getLoss() != loss)
    return func_.emitOpError(
        "braid-autodiff expects the loss to be produced by braid.cross_entropy");

  markNeedsGrad();
  // Everything the step computes so far is its forward pass.
  for (Operation &op : func_.getBody().front().without_terminator())
    setPhaseMark(&op, Phase::Forward);
  b_.setInsertionPoint(ret);
  // Walk the forward ops in reverse; only ops whose results received a
  // gradient (or the loss itself) contribute.
  SmallVector<Operation *> forward;
  for (Operation &op : func_.getBody().front().without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    // The cross-entropy and the side losses beside it start a gradient.
    bool isRoot = op == ce.getOperation() || op->hasTrait<SideLoss>();
    bool hasGrad = llvm::any_of(op->getResults(),
                                [&](Value r) { return grads_.count(r); });
    if (!isRoot && !hasGrad)
      continue;
    auto rule = dyn_cast<DifferentiableOp>(op);
    if (!rule)
      return op->emitOpError("autodiff has no gradient rule for this op");
    stamper_.setLayer(layerMark(op));
    if (failed(rule.buildGradient(*this)))
      return failure();
  }

  // Return the loss and one gradient per parameter, in argument order.
  SmallVector<Value> results = {loss};
  SmallVector<Attribute> resultAttrs = {func_.getResultAttrDict(0)};
  for (BlockArgument arg : func_.getArguments()) {
    if (!isParam(arg))
      continue;
    Value g = grad(arg);
    StringRef name = paramAttr(arg).getName();
    if (!g)
      return func_.emitOpError()
             << "parameter '" << name << "' does not affect the loss";
    results.push_back(g);
    resultAttrs.push_back(b_.getDictionaryAttr(
        b_.getNamedAttr(BraidDialect::kGradOfAttr, b_.getStringAttr(name))));
  }
  b_.setListener(nullptr);
  func::ReturnOp::create(b_, ret.getLoc(), results);
  ret.erase();
  func_.setFunctionType(b_.getFunctionType(
      func_.getArgumentTypes(), ValueRange(results).getTypes()));
  func_.setAllResultAttrs(resultAttrs);
  return success();
}

struct AutodiffPass : impl::AutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    FailureOr<func::FuncOp> stage =
        singleStageFunction(getOperation(), "braid-autodiff");
    if (failed(stage))
      return signalPassFailure();
    func::FuncOp func = *stage;
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
