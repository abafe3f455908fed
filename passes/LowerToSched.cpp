//===- LowerToSched.cpp - braid training step to sched programs -----------===//
//
// One rank, one compute stream (0), ops in their order, in one @step
// program: zeroed gradients, a sched.repeat over the micro-batches, the
// optimizer. See Passes.td for the design; the parts worth knowing when
// reading the code:
//  * a returned gradient is a tree of braid.add over its contributions; the
//    adds are absorbed and each leaf writes into the gradient global, with
//    accumulate = 1 when its producer is a weight-gradient op whose
//    weight-gradient results are all such leaves, or through an explicit
//    `accumulate` launch;
//  * the loss is written to the `@loss` scalar global, read back into the
//    micro-batch's slot, and added to `@loss_sum` at the end of the
//    micro-batch;
//  * the optimizer decides on the device whether the step is applied:
//    `step_guard` sets `@step_skipped` when `@loss_sum` or the gradient norm
//    is not finite, and AdamW then changes nothing; the next step zeroes
//    the gradients and the loss sum either way;
//  * a braid.cast of an f32 parameter (BF16 precision) is not a launch of
//    the micro-batch: it becomes the persistent weight copy `@NAME.bf16`,
//    written by a `cast` launch in `@init` and again at the end of
//    `@step`, after AdamW has changed the master. The micro-batch reads
//    the copy, so each weight is rounded once per step, not once per use;
//  * the fused LM head and cross-entropy (braid-fuse-linear-cross-entropy)
//    lowers like the ops it replaces: its dW result accumulates as
//    linear_grad_weight's does (its loss and dx are ordinary results), and
//    it gets the 1/num_micro_batches scale of cross_entropy_grad_input;
//  * data parallel (braid.mesh with dp > 1): the loss gradient's scale is
//    1/(num_micro_batches * dp), and between the last micro-batch and the
//    optimizer every gradient and `@loss_sum` are summed over the DP group
//    by a sched.collective on the communication stream, ordered by events,
//    so every rank applies the same update and makes the same skip
//    decision;
//  * ZeRO (braid.zero_stage, docs/parallel.md): each rank keeps one DP
//    shard (rows along dimension 0) of every master and moment, and of the
//    gradient AdamW reads. Compute reads a whole weight copy that the
//    optimizer gathers after AdamW (bf16 in BF16 plans, f32 otherwise).
//    Stage 1 accumulates whole gradients in `NAME.grad.full` and
//    reduce-scatters them after the last micro-batch; stage 2 writes each
//    micro-batch's whole gradients into transient buffers, unrolls the
//    micro-batches and reduce-scatters after each, so no whole gradient
//    outlives its micro-batch. Stage 3 keeps no whole weights: each
//    micro-batch gathers a layer's parameters into transient buffers just
//    before the layer, once for forward and again for backward, while the
//    layer before it runs (insertGathers). The gradient norm is the norm
//    of every rank's shard norm, gathered.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include <algorithm>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"

#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"
#include "dialects/braid/StageFunctions.h"
#include "dialects/sched/SchedOps.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/Unroll.h"

namespace braid {
#define GEN_PASS_DEF_LOWERTOSCHEDPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

MemRefType bufferType(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

// The results of a weight-gradient op that may be written in place into a
// gradient global; none for any other op.
SmallVector<Value> weightGradResults(Operation *op) {
  if (auto fused = dyn_cast<LinearCrossEntropyWithGradOp>(op))
    return {fused.getWeightGrad()};
  if (op->hasTrait<WeightGradient>())
    return SmallVector<Value>(op->getResults());
  return {};
}

// How @init fills a parameter's global.
sched::InitKind schedInitKind(InitKind init) {
  switch (init) {
  case InitKind::Normal:
    return sched::InitKind::Normal;
  case InitKind::Zeros:
    return sched::InitKind::Zeros;
  case InitKind::Ones:
    return sched::InitKind::Ones;
  }
  llvm_unreachable("every init kind has a sched init kind");
}

// The role of the input global that holds an input argument.
sched::Role schedRole(InputRole role) {
  switch (role) {
  case InputRole::Tokens:
    return sched::Role::Tokens;
  case InputRole::Labels:
    return sched::Role::Labels;
  case InputRole::Positions:
    return sched::Role::Positions;
  }
  llvm_unreachable("every input role has a sched role");
}

// Kernel parameters from an op's inherent attributes: integers and booleans
// become i64, floats f64.
DictionaryAttr kernelParams(Operation *op, OpBuilder &b,
                            ArrayRef<NamedAttribute> extra) {
  SmallVector<NamedAttribute> params;
  for (NamedAttribute a : op->getAttrDictionary()) {
    if (auto bAttr = dyn_cast<BoolAttr>(a.getValue()))
      params.push_back(
          b.getNamedAttr(a.getName(), b.getI64IntegerAttr(bAttr.getValue())));
    else if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
      params.push_back(
          b.getNamedAttr(a.getName(), b.getI64IntegerAttr(i.getInt())));
    else if (auto f = dyn_cast<FloatAttr>(a.getValue()))
      params.push_back(b.getNamedAttr(
          a.getName(), b.getF64FloatAttr(f.getValueAsDouble())));
  }
  for (NamedAttribute a : extra) {
    llvm::erase_if(params, [&](NamedAttribute p) {
      return p.getName() == a.getName();
    });
    params.push_back(a);
  }
  return b.getDictionaryAttr(params);
}

// The step program holds every micro-batch's launches, so their number is
// bounded: 2^16 keeps a plan of a few thousand launches per micro-batch
// well under protobuf's 2 GiB.
constexpr int64_t kMaxMicroBatches = 1 << 16;

class Lowering {
public:
  Lowering(ModuleOp module, func::FuncOp func, uint32_t optimizerStream)
      : module_(module), func_(func), b_(module.getContext()),
        optimizerStream_(optimizerStream) {}

  LogicalResult run();

private:
  LogicalResult checkSignature();
  void findWeightCopies();
  LogicalResult createGlobals();
  void planGradientSinks();
  void lowerInit();
  void resetAccumulators();
  LogicalResult lowerMicroBatch();
  void lowerGradientReduction();
  void unrollAndReduceMicroBatches(sched::RepeatOp repeat);
  void lowerOptimizer();
  Value lowerGradNorm(Location loc, ArrayRef<Value> grads);
  // The buffer a gradient contribution of the micro-batch being lowered is
  // written to (see gradSink_).
  Value gradSinkBuffer(Location loc, const std::string &sink);
  // Stage 3: the whole buffer parameter `i` is gathered into for `user`'s
  // phase (forward or backward) in this micro-batch.
  Value gatherBuffer(Location loc, size_t i, Operation *user);
  void insertGathers(ArrayRef<Operation *> microBatch, const IRMapping &map);
  sched::CollectiveOp collective(Location loc, sched::CollectiveKind kind,
                                 ValueRange ins, ValueRange outs) {
    MLIRContext *ctx = b_.getContext();
    return sched::CollectiveOp::create(
        b_, loc, sched::CollectiveKindAttr::get(ctx, kind),
        sched::MeshAxisAttr::get(ctx, sched::MeshAxis::Dp), ins, outs,
        b_.getI32IntegerAttr(stream_));
  }
  bool sharded() const { return zeroStage_ >= 1; }
  // The communication stream: the one after the compute and optimizer
  // streams.
  uint32_t commStream() const {
    return std::max<uint32_t>(1, optimizerStream_ + 1);
  }
  // Stream 0 hands what it has written over to the communication stream:
  // event 1 reaches `value`.
  void handOver(Location loc, int64_t value) {
    sched::EventRecordOp::create(b_, loc, b_.getI32IntegerAttr(1),
                                 b_.getI64IntegerAttr(value),
                                 b_.getI32IntegerAttr(0));
    sched::EventWaitOp::create(b_, loc, b_.getI32IntegerAttr(1),
                               b_.getI64IntegerAttr(value),
                               b_.getI32IntegerAttr(commStream()));
  }
  // And the sums come back once the communication stream has made them:
  // event 2 reaches 1.
  void handBack(Location loc) {
    sched::EventRecordOp::create(b_, loc, b_.getI32IntegerAttr(2),
                                 b_.getI64IntegerAttr(1),
                                 b_.getI32IntegerAttr(commStream()));
    sched::EventWaitOp::create(b_, loc, b_.getI32IntegerAttr(2),
                               b_.getI64IntegerAttr(1),
                               b_.getI32IntegerAttr(0));
  }
  // A parameter's DP shard: dimension 0 divided by the DP size.
  Type shardType(Type whole) const {
    auto t = cast<RankedTensorType>(whole);
    SmallVector<int64_t> shape(t.getShape());
    shape[0] /= dataParallel_;
    return RankedTensorType::get(shape, t.getElementType());
  }
  MemRefType shardBuffer(Type whole) const {
    return bufferType(shardType(whole));
  }
  void readback(StringRef scalar, int32_t slot) {
    sched::ReadbackOp::create(b_, module_.getLoc(), getGlobal(scalar),
                              b_.getI32IntegerAttr(slot),
                              b_.getI32IntegerAttr(stream_));
  }
  void refreshWeightCopies(Location loc);

  // A global; `shard` makes it this rank's DP shard of `tensorType`.
  sched::GlobalOp global(StringRef sym, sched::GlobalKind kind,
                         Type tensorType, StringRef of = {},
                         std::optional<sched::Role> role = std::nullopt,
                         sched::ParamInfoAttr info = {}, bool shard = false) {
    MLIRContext *ctx = b_.getContext();
    auto g = sched::GlobalOp::create(
        b_, module_.getLoc(), b_.getStringAttr(sym),
        sched::GlobalKindAttr::get(ctx, kind),
        of.empty() ? FlatSymbolRefAttr() : FlatSymbolRefAttr::get(ctx, of),
        role ? sched::RoleAttr::get(ctx, *role) : sched::RoleAttr(),
        TypeAttr::get(shard ? shardBuffer(tensorType) : bufferType(tensorType)),
        IntegerAttr(), info,
        shard ? sched::ShardAttr::get(ctx, sched::MeshAxis::Dp, 0)
              : sched::ShardAttr());
    globals_[sym] = g;
    return g;
  }
  Value getGlobal(StringRef sym) {
    sched::GlobalOp g = globals_.lookup(sym);
    return sched::GetGlobalOp::create(b_, module_.getLoc(), g.getType(),
                                      FlatSymbolRefAttr::get(g.getSymNameAttr()));
  }
  sched::LaunchOp launch(Location loc, StringRef kernel, ValueRange ins,
                         ValueRange outs, DictionaryAttr params) {
    return sched::LaunchOp::create(
        b_, loc, b_.getStringAttr(kernel), b_.getI32IntegerAttr(stream_),
        IntegerAttr(), ins, outs,
        params && !params.empty() ? params : DictionaryAttr());
  }
  // A launch of the optimizer (or of `init`, which sets up what it keeps).
  sched::LaunchOp optimizerLaunch(Location loc, StringRef kernel,
                                  ValueRange ins, ValueRange outs,
                                  DictionaryAttr params) {
    sched::LaunchOp l = launch(loc, kernel, ins, outs, params);
    setPhaseMark(l, Phase::Optimizer);
    return l;
  }

  struct Param {
    BlockArgument arg;
    std::string name;
    bool weightDecay;
    sched::InitKind init;
    double initStd;
    bool checkpointTransposed;
    // The weight copy compute reads (BF16): its symbol and tensor type;
    // empty when compute reads the parameter itself.
    std::string copy = {};
    Type copyType = {};
  };

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder b_;
  SmallVector<Param> params_;
  llvm::StringMap<sched::GlobalOp> globals_;
  DenseMap<Value, sched::Role> inputRole_;
  // Gradient leaves: value -> gradient global symbol.
  DenseMap<Value, std::string> gradSink_;
  DenseSet<Operation *> absorbed_, accumulating_;
  // Casts of parameters that read a weight copy: op -> index in params_.
  DenseMap<Operation *, size_t> copyCasts_;
  TrainAttr train_;
  int32_t numMicroBatches_ = 1;
  // braid.mesh's DP size; 1 when the module has no mesh (one rank).
  int64_t dataParallel_ = 1;
  // braid.zero_stage; 0 when the module has none.
  int64_t zeroStage_ = 0;
  // Stage 2: the transient whole gradients of the micro-batch being
  // lowered, by gradient symbol.
  llvm::StringMap<Value> microGrads_;
  // The whole (unsharded) buffer type of each gradient symbol.
  llvm::StringMap<MemRefType> wholeGrad_;
  // Stage 3: the buffers of the micro-batch being lowered into which a
  // parameter is gathered, by 2 x its index, + 1 for backward.
  DenseMap<size_t, Value> gathered_;
  // Stage 3: the last values of events 3 and 4 (see insertGathers).
  int64_t gatherTrigger_ = 0, gatherDone_ = 0;
  // braid.comm_chunks: the pieces each gather is cut into.
  int64_t commChunks_ = 1;
  const uint32_t optimizerStream_;
  // The stream of the launches being created.
  uint32_t stream_ = 0;
};

LogicalResult Lowering::checkSignature() {
  train_ = module_->getAttrOfType<TrainAttr>(BraidDialect::kTrainAttr);
  if (!train_)
    return module_.emitError(
        "braid-lower-to-sched needs the braid.train module attribute "
        "(run braid-import first)");
  int64_t numMicro = train_.getNumMicroBatches();
  if (numMicro < 1 || numMicro > kMaxMicroBatches)
    return module_.emitError()
           << "braid.train num_micro_batches is " << numMicro
           << "; a step has 1 to " << kMaxMicroBatches << " micro-batches";
  numMicroBatches_ = static_cast<int32_t>(numMicro);
  if (auto mesh = module_->getAttrOfType<MeshAttr>(BraidDialect::kMeshAttr)) {
    if (mesh.getTp() != 1 || mesh.getCp() != 1 || mesh.getPp() != 1)
      return module_.emitError()
             << "braid-lower-to-sched lowers data parallel meshes only, not "
             << mesh;
    dataParallel_ = mesh.getDp();
  }
  if (auto chunks =
          module_->getAttrOfType<IntegerAttr>(BraidDialect::kCommChunksAttr))
    commChunks_ = std::clamp<int64_t>(chunks.getInt(), 1, 1024);
  if (auto zero =
          module_->getAttrOfType<IntegerAttr>(BraidDialect::kZeroStageAttr)) {
    zeroStage_ = zero.getInt();
    if (zeroStage_ < 1 || zeroStage_ > 3)
      return module_.emitError()
             << "braid.zero_stage is " << zeroStage_
             << "; braid-lower-to-sched builds ZeRO stages 1, 2 and 3 (stage "
                "0 is the attribute's absence)";
  }
  for (BlockArgument arg : func_.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (auto p =
            func_.getArgAttrOfType<ParamAttr>(i, BraidDialect::kParamAttr)) {
      auto type = cast<RankedTensorType>(arg.getType());
      if (!type.getElementType().isF32())
        return func_.emitOpError()
               << "parameter '" << p.getName() << "' is "
               << type.getElementType()
               << ", but parameters are the f32 masters that AdamW updates; "
                  "make it f32 and cast it to bf16 with braid.cast";
      if (sharded() &&
          (type.getRank() == 0 || type.getDimSize(0) % dataParallel_ != 0))
        return func_.emitOpError()
               << "ZeRO stage " << zeroStage_
               << " shards every parameter along its first dimension over "
                  "the "
               << dataParallel_ << " data-parallel ranks, but '"
               << p.getName() << "' is " << type << ": choose a "
               << "data_parallel that divides " << type.getDimSize(0)
               << ", or zero_stage 0";
      params_.push_back({arg, p.getName().str(),
                         p.getWeightDecay() && type.getRank() == 2,
                         schedInitKind(p.getInit()), p.getInitStd(),
                         p.getCheckpointTransposed()});
    } else if (auto r = func_.getArgAttrOfType<InputRoleAttr>(
                   i, BraidDialect::kInputAttr)) {
      inputRole_[arg] = schedRole(r.getValue());
    } else {
      return func_.emitOpError() << "argument " << i
                                 << " is neither braid.param nor braid.input";
    }
  }
  if (func_.getNumResults() != params_.size() + 1)
    return func_.emitOpError(
        "must return the loss and one gradient per parameter (run "
        "braid-autodiff first)");
  return success();
}

// A parameter cast to bf16 reads a weight copy; several casts of one
// parameter share it.
void Lowering::findWeightCopies() {
  DenseMap<Value, size_t> index;
  for (auto [i, p] : llvm::enumerate(params_))
    index[p.arg] = i;
  func_.walk([&](CastOp c) {
    auto it = index.find(c.getInput());
    if (it == index.end())
      return;
    Param &p = params_[it->second];
    // Parameters are f32 (checkSignature) and a cast changes the type.
    p.copy = p.name + ".bf16";
    p.copyType = c.getResult().getType();
    copyCasts_[c] = it->second;
  });
  // Sharded masters are not whole: compute reads a whole copy, which for
  // an FP32 plan is an f32 one.
  if (!sharded())
    return;
  for (Param &p : params_) {
    const bool direct = llvm::any_of(p.arg.getUsers(), [&](Operation *u) {
      return !copyCasts_.count(u);
    });
    if (direct && !p.copy.empty()) {
      // Both an f32 and a bf16 copy would be needed; no model does this.
      p.copy = "";
      continue;
    }
    if (direct && zeroStage_ < 3) {
      p.copy = p.name + ".full";
      p.copyType = p.arg.getType();
    }
  }
}

LogicalResult Lowering::createGlobals() {
  b_.setInsertionPointToStart(module_.getBody());
  MLIRContext *ctx = b_.getContext();
  auto sym = [&](const std::string &name) {
    return FlatSymbolRefAttr::get(ctx, name);
  };
  for (auto &p : params_) {
    if (sharded() && p.copy.empty() && (zeroStage_ < 3 || !copyCasts_.empty()))
      return func_.emitOpError()
             << "ZeRO shards '" << p.name
             << "', which compute reads both as f32 and through braid.cast; "
                "a sharded parameter has one whole weight copy";
    // The effective decay flag: rank-2 parameters only (docs/numerics.md).
    auto emitError = [&] { return func_.emitOpError(); };
    auto info = sched::ParamInfoAttr::getChecked(
        function_ref<InFlightDiagnostic()>(emitError), ctx, StringRef(p.name),
        p.init, F64(p.initStd), p.weightDecay, p.checkpointTransposed,
        sym(p.name + ".grad"),
        sym(p.name + ".exp_avg"), sym(p.name + ".exp_avg_sq"),
        p.copy.empty() ? FlatSymbolRefAttr() : sym(p.copy));
    if (!info)
      return failure();
    global(p.name, sched::GlobalKind::Parameter, p.arg.getType(), {},
           std::nullopt, info, sharded());
  }
  for (auto &p : params_)
    global(p.name + ".grad", sched::GlobalKind::Gradient, p.arg.getType(),
           p.name, std::nullopt, {}, sharded());
  if (zeroStage_ == 1)
    for (auto &p : params_)
      global(p.name + ".grad.full", sched::GlobalKind::Gradient,
             p.arg.getType(), p.name);
  for (auto &p : params_) {
    global(p.name + ".exp_avg", sched::GlobalKind::OptimizerState,
           p.arg.getType(), p.name, std::nullopt, {}, sharded());
    global(p.name + ".exp_avg_sq", sched::GlobalKind::OptimizerState,
           p.arg.getType(), p.name, std::nullopt, {}, sharded());
  }
  // Stage 3 keeps its bf16 copies as shards too.
  for (auto &p : params_)
    if (!p.copy.empty())
      global(p.copy, sched::GlobalKind::WeightCopy, p.copyType, p.name,
             std::nullopt, {}, zeroStage_ == 3);
  for (BlockArgument arg : func_.getArguments())
    if (auto it = inputRole_.find(arg); it != inputRole_.end())
      global(sched::stringifyRole(it->second), sched::GlobalKind::Input,
             arg.getType(), {}, it->second);
  auto scalar = RankedTensorType::get({}, b_.getF32Type());
  for (sched::Role role : {sched::Role::Loss, sched::Role::LossSum,
                           sched::Role::GradNorm, sched::Role::StepSkipped})
    global(sched::stringifyRole(role), sched::GlobalKind::Scalar, scalar, {},
           role);
  return success();
}

// Decides where each gradient contribution is written (see file comment).
void Lowering::planGradientSinks() {
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  // Stage 1 accumulates into the whole gradient, which it reduce-scatters
  // into the shard; stage 2 into a transient per micro-batch.
  const char *suffix = zeroStage_ == 1 ? ".grad.full" : ".grad";
  for (auto [i, p] : llvm::enumerate(params_)) {
    std::string sink = p.name + suffix;
    wholeGrad_[sink] = bufferType(p.arg.getType());
    SmallVector<Value> worklist = {ret.getOperand(i + 1)};
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      auto add = v.getDefiningOp<AddOp>();
      if (add && v.hasOneUse()) {
        absorbed_.insert(add);
        worklist.push_back(add.getLhs());
        worklist.push_back(add.getRhs());
        continue;
      }
      gradSink_[v] = sink;
    }
  }
  // A weight-gradient op accumulates in place only when every one of its
  // weight-gradient results goes to a gradient global and nothing else
  // reads it.
  for (auto &[v, sink] : gradSink_) {
    Operation *def = v.getDefiningOp();
    if (!def)
      continue;
    SmallVector<Value> weightGrads = weightGradResults(def);
    if (!weightGrads.empty() && llvm::all_of(weightGrads, [&](Value r) {
          return gradSink_.count(r) && r.hasOneUse();
        }))
      accumulating_.insert(def);
  }
}

// Run once before the first micro-batch (after initialisation or restore):
// the weight copies start as the rounded masters.
void Lowering::lowerInit() {
  if (copyCasts_.empty() && (!sharded() || zeroStage_ == 3))
    return;
  b_.setInsertionPointToEnd(module_.getBody());
  auto program = sched::ProgramOp::create(b_, func_.getLoc(), "init",
                                          sched::ProgramKind::Init);
  b_.setInsertionPointToStart(&program.getBody().emplaceBlock());
  refreshWeightCopies(func_.getLoc());
}

void Lowering::refreshWeightCopies(Location loc) {
  // Unsharded, or stage 3's shards: each copy from its master.
  if (!sharded() || zeroStage_ == 3) {
    for (auto &p : params_)
      if (!p.copy.empty())
        optimizerLaunch(loc, "cast", {getGlobal(p.name)}, {getGlobal(p.copy)},
                        DictionaryAttr());
    return;
  }
  // Each rank rounds its own shard (BF16), then the group gathers the
  // whole copies.
  SmallVector<Value> shards, wholes;
  for (auto &p : params_) {
    Value master = getGlobal(p.name);
    if (cast<RankedTensorType>(p.copyType).getElementType().isF32()) {
      shards.push_back(master);
    } else {
      Value part = sched::AllocOp::create(b_, loc, shardBuffer(p.copyType),
                                          IntegerAttr());
      optimizerLaunch(loc, "cast", {master}, {part}, DictionaryAttr());
      shards.push_back(part);
    }
    wholes.push_back(getGlobal(p.copy));
  }
  collective(loc, sched::CollectiveKind::AllGather, shards, wholes);
}

Value Lowering::gradSinkBuffer(Location loc, const std::string &sink) {
  if (zeroStage_ < 2)
    return getGlobal(sink);
  Value &buf = microGrads_[sink];
  if (!buf) {
    // The whole gradient of this micro-batch, zero right before its first
    // contribution so that it is live only while backward writes it.
    buf = sched::AllocOp::create(b_, loc, wholeGrad_.lookup(sink),
                                 IntegerAttr());
    sched::LaunchOp fill = launch(
        loc, "fill", {}, {buf},
        b_.getDictionaryAttr(
            {b_.getNamedAttr("value", b_.getF64FloatAttr(0.0))}));
    setPhaseMark(fill, Phase::WeightGrad);
  }
  return buf;
}

// The step starts from zero gradients and a zero loss sum. Zeroing here
// rather than after the update leaves the last step's gradients in place
// for whoever reads them.
void Lowering::resetAccumulators() {
  Location loc = func_.getLoc();
  auto zero = b_.getDictionaryAttr(
      {b_.getNamedAttr("value", b_.getF64FloatAttr(0.0))});
  // Stage 1 zeroes the whole gradients it accumulates; the shards are
  // written whole by the reduce-scatter. Stage 2's whole gradients are
  // each micro-batch's own.
  if (zeroStage_ < 2)
    for (auto &p : params_)
      optimizerLaunch(loc, "fill", {},
                      {getGlobal(p.name +
                                 (zeroStage_ == 1 ? ".grad.full" : ".grad"))},
                      zero);
  optimizerLaunch(loc, "fill", {}, {getGlobal("loss_sum")}, zero);
}

// The body of the sched.repeat over the step's micro-batches, as
// micro-batch 0 (iteration i computes micro-batch i): its inputs staged,
// the function's ops as launches, its loss read back into slot 0 (i) and
// added to the sum.
LogicalResult Lowering::lowerMicroBatch() {
  for (BlockArgument arg : func_.getArguments())
    if (auto it = inputRole_.find(arg); it != inputRole_.end())
      sched::StageOp::create(b_, module_.getLoc(),
                             getGlobal(sched::stringifyRole(it->second)),
                             b_.getI32IntegerAttr(0), b_.getI32IntegerAttr(0));

  DenseMap<Value, Value> buffers;
  microGrads_.clear();
  gathered_.clear();
  // Stage 3: the values compute reads a parameter as (the argument, or its
  // cast), by parameter.
  DenseMap<Value, size_t> weightOf;
  // A master that compute reads only through its copy is not read here; a
  // sharded one only through its whole copy.
  for (auto [i, p] : llvm::enumerate(params_))
    if (llvm::any_of(p.arg.getUsers(),
                     [&](Operation *u) { return !copyCasts_.count(u); })) {
      if (zeroStage_ == 3)
        weightOf[p.arg] = i;
      else
        buffers[p.arg] = getGlobal(sharded() ? p.copy : p.name);
    }
  DenseMap<size_t, Value> copies;
  if (zeroStage_ < 3)
    for (auto [i, p] : llvm::enumerate(params_))
      if (!p.copy.empty())
        copies[i] = getGlobal(p.copy);
  for (BlockArgument arg : func_.getArguments())
    if (auto it = inputRole_.find(arg); it != inputRole_.end())
      buffers[arg] = getGlobal(sched::stringifyRole(it->second));

  // Every rank's micro-batches make the step's loss.
  double numMicro =
      static_cast<double>(train_.getNumMicroBatches() * dataParallel_);
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);

  for (Operation &op : func_.getBody().front().without_terminator()) {
    if (absorbed_.contains(&op))
      continue;
    if (auto it = copyCasts_.find(&op); it != copyCasts_.end()) {
      if (zeroStage_ == 3)
        weightOf[op.getResult(0)] = it->second;
      else
        buffers[op.getResult(0)] = copies[it->second];
      continue;
    }
    if (op.getName().getDialectNamespace() != "braid")
      return op.emitOpError("braid-lower-to-sched cannot lower this op");
    if (!layerMark(&op) || !phaseMark(&op))
      return op.emitOpError()
             << "has no " << (layerMark(&op) ? "braid.phase" : "braid.layer")
             << " mark (braid-import sets the layer of every op, "
                "braid-autodiff the phase)";
    SmallVector<Value> ins, outs;
    for (Value operand : op.getOperands()) {
      if (auto w = weightOf.find(operand); w != weightOf.end()) {
        ins.push_back(gatherBuffer(op.getLoc(), w->second, &op));
        continue;
      }
      Value buf = buffers.lookup(operand);
      if (!buf)
        return op.emitOpError("operand has no buffer (absorbed gradient sum "
                              "used elsewhere?)");
      ins.push_back(buf);
    }
    const bool accumulate = accumulating_.contains(&op);
    SmallVector<Value> inPlace;
    if (accumulate)
      inPlace = weightGradResults(&op);
    for (Value r : op.getResults()) {
      Value buf;
      if (r == loss)
        buf = getGlobal("loss");
      else if (llvm::is_contained(inPlace, r))
        buf = gradSinkBuffer(op.getLoc(), gradSink_.lookup(r));
      else
        buf = sched::AllocOp::create(b_, op.getLoc(), bufferType(r.getType()),
                                     IntegerAttr());
      buffers[r] = buf;
      outs.push_back(buf);
    }
    SmallVector<NamedAttribute> extra;
    if (accumulate)
      extra.push_back(b_.getNamedAttr("accumulate", b_.getI64IntegerAttr(1)));
    if (isa<CrossEntropyGradInputOp, LinearCrossEntropyWithGradOp>(op))
      extra.push_back(
          b_.getNamedAttr("scale", b_.getF64FloatAttr(1.0 / numMicro)));
    StringRef kernel = op.getName().stripDialect();
    copyMarks(&op,
              launch(op.getLoc(), kernel, ins, outs,
                     kernelParams(&op, b_, extra)));

    // Contributions that could not be written in place are added to their
    // gradient global right after they are produced.
    for (Value r : op.getResults())
      if (gradSink_.count(r) && !llvm::is_contained(inPlace, r))
        copyMarks(&op, launch(op.getLoc(), "accumulate", {buffers[r]},
                              {gradSinkBuffer(op.getLoc(),
                                              gradSink_.lookup(r))},
                              DictionaryAttr()));
  }
  // A parameter no op of the micro-batch differentiates still reduces a
  // (zero) gradient.
  if (zeroStage_ >= 2)
    for (auto &p : params_)
      gradSinkBuffer(func_.getLoc(), p.name + ".grad");
  readback("loss", 0);
  Value lossBuf = getGlobal("loss");
  Value lossSum = getGlobal("loss_sum");
  sched::LaunchOp sum = launch(func_.getLoc(), "accumulate", {lossBuf},
                               {lossSum}, DictionaryAttr());
  setLayerMark(sum, LayerAttr::loss(b_.getContext()));
  setPhaseMark(sum, Phase::Forward);
  return success();
}

// Data parallel: the gradients and the loss sum of this rank's micro-batches
// become those of every rank's, on the communication stream (the one after
// the compute and optimizer streams). Event 1 tells it that the last
// micro-batch is done; event 2 tells stream 0 that the sums are in place.
// ZeRO stage 1 reduce-scatters the whole gradients into the shards.
void Lowering::lowerGradientReduction() {
  Location loc = func_.getLoc();
  const uint32_t comm = commStream();
  handOver(loc, 1);
  stream_ = comm;
  SmallVector<Value> wholes, shards;
  for (auto &p : params_) {
    wholes.push_back(getGlobal(p.name + (sharded() ? ".grad.full" : ".grad")));
    if (sharded())
      shards.push_back(getGlobal(p.name + ".grad"));
  }
  Value lossSum = getGlobal("loss_sum");
  if (sharded()) {
    collective(loc, sched::CollectiveKind::ReduceScatterSum, wholes, shards);
    collective(loc, sched::CollectiveKind::AllReduceSum, {lossSum}, {});
  } else {
    wholes.push_back(lossSum);
    collective(loc, sched::CollectiveKind::AllReduceSum, wholes, {});
  }
  handBack(loc);
  stream_ = 0;
}

// ZeRO stage 2 reduces each micro-batch's gradients as soon as it ends,
// which a sched.repeat's body cannot hold: the micro-batches are stated one
// by one, each followed by its reduce-scatter into the shards (the first
// writes them, the rest add to them) and, after the last, the loss sum's.
void Lowering::unrollAndReduceMicroBatches(sched::RepeatOp repeat) {
  Location loc = func_.getLoc();
  b_.setInsertionPointAfter(repeat);
  for (int32_t m = 0; m < numMicroBatches_; ++m) {
    IRMapping map;
    SmallVector<Operation *> ops = cloneIteration(b_, repeat, m, map);
    OpBuilder::InsertPoint end = b_.saveInsertionPoint();
    if (zeroStage_ == 3)
      insertGathers(ops, map);
    b_.restoreInsertionPoint(end);
    handOver(loc, m + 1);
    stream_ = commStream();
    SmallVector<Value> wholes, parts;
    SmallVector<std::pair<Value, Value>> adds;
    for (auto &p : params_) {
      std::string sym = p.name + ".grad";
      wholes.push_back(map.lookup(microGrads_.lookup(sym)));
      Value shard = getGlobal(sym);
      if (m == 0) {
        parts.push_back(shard);
        continue;
      }
      Value part = sched::AllocOp::create(
          b_, loc, cast<MemRefType>(shard.getType()), IntegerAttr());
      parts.push_back(part);
      adds.push_back({part, shard});
    }
    collective(loc, sched::CollectiveKind::ReduceScatterSum, wholes, parts);
    for (auto [part, shard] : adds)
      optimizerLaunch(loc, "accumulate", {part}, {shard}, DictionaryAttr());
    if (m == numMicroBatches_ - 1)
      collective(loc, sched::CollectiveKind::AllReduceSum,
                 {getGlobal("loss_sum")}, {});
    stream_ = 0;
  }
  repeat->erase();
  handBack(loc);
}

// Clipping, the guard, AdamW and the weight copies' refresh; the norm and
// the skipped flag are read back after the losses.
void Lowering::lowerOptimizer() {
  Location loc = func_.getLoc();
  if (optimizerStream_ != 0) {
    // The optimizer's stream starts once stream 0 has run every
    // micro-batch: event 0 reaches 1.
    sched::EventRecordOp::create(b_, loc, b_.getI32IntegerAttr(0),
                                 b_.getI64IntegerAttr(1),
                                 b_.getI32IntegerAttr(0));
    sched::EventWaitOp::create(b_, loc, b_.getI32IntegerAttr(0),
                               b_.getI64IntegerAttr(1),
                               b_.getI32IntegerAttr(optimizerStream_));
    stream_ = optimizerStream_;
  }

  SmallVector<Value> grads;
  for (auto &p : params_)
    grads.push_back(getGlobal(p.name + ".grad"));
  Value norm = lowerGradNorm(loc, grads);
  Value lossSum = getGlobal("loss_sum");
  Value skip = getGlobal("step_skipped");
  optimizerLaunch(loc, "step_guard", {lossSum, norm}, {skip}, DictionaryAttr());

  auto f64 = [&](double v) { return b_.getF64FloatAttr(v); };
  for (auto [p, grad] : llvm::zip(params_, grads)) {
    Value param = getGlobal(p.name);
    Value m = getGlobal(p.name + ".exp_avg");
    Value v = getGlobal(p.name + ".exp_avg_sq");
    auto params = b_.getDictionaryAttr(
        {b_.getNamedAttr("beta1", f64(train_.getBeta1())),
         b_.getNamedAttr("beta2", f64(train_.getBeta2())),
         b_.getNamedAttr("eps", f64(train_.getEps())),
         b_.getNamedAttr("weight_decay",
                         f64(p.weightDecay ? train_.getWeightDecay() : 0.0)),
         b_.getNamedAttr("grad_clip", f64(train_.getGradClip()))});
    optimizerLaunch(loc, "adamw", {grad, norm, skip}, {param, m, v}, params);
  }
  refreshWeightCopies(loc);
  readback("grad_norm", numMicroBatches_);
  readback("step_skipped", numMicroBatches_ + 1);
  stream_ = 0;
}

// The norm of the whole gradient. Sharded, each rank's shards give its part
// of the norm; gathered, the parts' norm is the whole one, and every rank
// computes the same value from the same parts.
Value Lowering::lowerGradNorm(Location loc, ArrayRef<Value> grads) {
  Value norm = getGlobal("grad_norm");
  if (!sharded()) {
    optimizerLaunch(loc, "grad_norm", grads, {norm}, DictionaryAttr());
    return norm;
  }
  Type f32 = b_.getF32Type();
  Value mine =
      sched::AllocOp::create(b_, loc, MemRefType::get({1}, f32), IntegerAttr());
  optimizerLaunch(loc, "grad_norm", grads, {mine}, DictionaryAttr());
  Value all = sched::AllocOp::create(
      b_, loc, MemRefType::get({dataParallel_}, f32), IntegerAttr());
  collective(loc, sched::CollectiveKind::AllGather, {mine}, {all});
  optimizerLaunch(loc, "grad_norm", {all}, {norm}, DictionaryAttr());
  return norm;
}

Value Lowering::gatherBuffer(Location loc, size_t i, Operation *user) {
  std::optional<Phase> phase = phaseMark(user);
  const bool backward = phase && *phase != Phase::Forward;
  Value &buf = gathered_[2 * i + (backward ? 1 : 0)];
  if (!buf) {
    const Param &p = params_[i];
    buf = sched::AllocOp::create(
        b_, loc, bufferType(p.copy.empty() ? p.arg.getType() : p.copyType),
        IntegerAttr());
  }
  return buf;
}

// Stage 3, in one stated-out micro-batch: the parameters are gathered, on
// the communication stream, into the buffers the micro-batch reads, group
// by group: a group is the parameters first read by one layer in one phase
// (forward or backward), in the order of those first reads. Group g's
// gather starts when stream 0 reaches group g - 1's first read (event 3),
// so it runs while the layer before it computes, and stream 0 waits for it
// (event 4) right before its own first read. The buffers live from their
// gather to their phase's last read, so each layer's whole weights are
// freed after forward and gathered again for backward.
void Lowering::insertGathers(ArrayRef<Operation *> microBatch,
                             const IRMapping &map) {
  DenseMap<Value, size_t> paramOf;
  for (auto &[key, buf] : gathered_)
    paramOf[map.lookup(buf)] = key / 2;
  struct Group {
    Operation *firstRead;
    SmallVector<Value> buffers;
    SmallVector<size_t> params;
    // Each buffer's first read.
    SmallVector<Operation *> reads;
  };
  SmallVector<Group> groups;
  DenseSet<Value> placed;
  std::pair<Attribute, bool> key;
  for (Operation *op : microBatch) {
    auto launch = dyn_cast<sched::LaunchOp>(op);
    if (!launch)
      continue;
    std::optional<Phase> phase = phaseMark(op);
    std::pair<Attribute, bool> here = {layerMark(op),
                                       phase && *phase != Phase::Forward};
    for (Value v : launch.getIns()) {
      auto it = paramOf.find(v);
      if (it == paramOf.end() || !placed.insert(v).second)
        continue;
      if (groups.empty() || here != key)
        groups.push_back({op, {}, {}});
      key = here;
      groups.back().buffers.push_back(v);
      groups.back().params.push_back(it->second);
      groups.back().reads.push_back(op);
    }
  }
  Location loc = func_.getLoc();
  auto i32 = [&](int64_t v) { return b_.getI32IntegerAttr(v); };
  auto i64 = [&](int64_t v) { return b_.getI64IntegerAttr(v); };
  const uint32_t comm = commStream();
  for (size_t g = 0; g < groups.size(); ++g) {
    Operation *trigger = g == 0 ? microBatch.front() : groups[g - 1].firstRead;
    b_.setInsertionPoint(trigger);
    sched::EventRecordOp::create(b_, loc, i32(3), i64(++gatherTrigger_),
                                 i32(0));
    sched::EventWaitOp::create(b_, loc, i32(3), i64(gatherTrigger_),
                               i32(comm));
    // The buffers are made where their gather is.
    const Group &group = groups[g];
    for (Value v : group.buffers)
      v.getDefiningOp()->moveBefore(b_.getInsertionBlock(),
                                    b_.getInsertionPoint());
    // In pieces (comm_chunks) of about equal bytes, in the order of their
    // first reads: stream 0 waits for each right before its first read, so
    // the layer starts on the first piece while the rest arrive.
    int64_t total = 0;
    for (Value v : group.buffers)
      total += bufferBytes(cast<MemRefType>(v.getType()));
    SmallVector<std::pair<size_t, size_t>> pieces;
    int64_t bytes = 0;
    size_t begin = 0;
    for (size_t k = 0; k < group.buffers.size(); ++k) {
      bytes += bufferBytes(cast<MemRefType>(group.buffers[k].getType()));
      const int64_t made = static_cast<int64_t>(pieces.size());
      if (k + 1 == group.buffers.size() ||
          (made + 1 < commChunks_ && bytes * commChunks_ >= total * (made + 1))) {
        pieces.push_back({begin, k + 1});
        begin = k + 1;
      }
    }
    SmallVector<int64_t> done;
    for (auto [first, last] : pieces) {
      SmallVector<Value> shards, wholes;
      for (size_t k = first; k < last; ++k) {
        const Param &p = params_[group.params[k]];
        shards.push_back(getGlobal(p.copy.empty() ? p.name : p.copy));
        wholes.push_back(group.buffers[k]);
      }
      stream_ = comm;
      collective(loc, sched::CollectiveKind::AllGather, shards, wholes);
      stream_ = 0;
      sched::EventRecordOp::create(b_, loc, i32(4), i64(++gatherDone_),
                                   i32(comm));
      done.push_back(gatherDone_);
    }
    for (auto [piece, range] : llvm::enumerate(pieces)) {
      b_.setInsertionPoint(group.reads[range.first]);
      sched::EventWaitOp::create(b_, loc, i32(4), i64(done[piece]), i32(0));
    }
  }
}

LogicalResult Lowering::run() {
  if (failed(checkSignature()))
    return failure();
  findWeightCopies();
  if (failed(createGlobals()))
    return failure();
  planGradientSinks();
  lowerInit();
  b_.setInsertionPointToEnd(module_.getBody());
  auto step = sched::ProgramOp::create(b_, func_.getLoc(), "step",
                                       sched::ProgramKind::Step);
  b_.setInsertionPointToStart(&step.getBody().emplaceBlock());
  resetAccumulators();
  // The plain schedule: each micro-batch's forward, then its backward.
  auto repeat = sched::RepeatOp::create(b_, func_.getLoc(),
                                        b_.getI32IntegerAttr(numMicroBatches_));
  b_.setInsertionPointToStart(&repeat.getBody().emplaceBlock());
  if (failed(lowerMicroBatch()))
    return failure();
  b_.setInsertionPointAfter(repeat);
  if (zeroStage_ >= 2)
    unrollAndReduceMicroBatches(repeat);
  else if (dataParallel_ > 1 || sharded())
    lowerGradientReduction();
  lowerOptimizer();
  func_.erase();
  return success();
}

struct LowerToSchedPass : impl::LowerToSchedPassBase<LowerToSchedPass> {
  using LowerToSchedPassBase::LowerToSchedPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> func =
        singleStageFunction(module, "braid-lower-to-sched");
    if (failed(func))
      return signalPassFailure();
    if (failed(Lowering(module, *func, optimizerStream).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace braid
