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
//  * a braid.buffer argument (an MoE expert bias) is a `buffer` global
//    with a `buffer` accumulator NAME.load of it: braid.moe_bias_update
//    accumulates each micro-batch's expert counts into the load, and a
//    moe_bias_update launch after AdamW moves the bias (one rank only);
//  * ZeRO (braid.zero_stage, docs/parallel.md): each rank keeps one DP
//    shard (rows along dimension 0) of every master and moment, and of the
//    gradient AdamW reads; of an expert-parallel share of an MoE layer's
//    experts, one shard over the ranks that hold the same experts (edp).
//    Compute reads a whole weight copy that the optimizer gathers after AdamW
//    (bf16 in BF16 plans, f32 otherwise). Stage 1 accumulates whole gradients
//    in `NAME.grad.full` and reduce-scatters them after the last micro-batch;
//    stage 2 writes each micro-batch's whole gradients into transient buffers,
//    unrolls the micro-batches and reduce-scatters after each, so no whole
//    gradient outlives its micro-batch. Stage 3 keeps no whole weights: each
//    micro-batch gathers a layer's parameters into transient buffers just
//    before the layer, once for forward and again for backward, while the
//    layer before it runs (insertGathers). The gradient norm is the norm
//    of every rank's shard norm, gathered.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/LowerToSched.h"

#include <algorithm>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
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

namespace braid::lower_to_sched {

MemRefType bufferType(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

namespace {

// The results of a weight-gradient op that may be written in place into a
// gradient global; none for any other op.
SmallVector<Value> weightGradResults(Operation *op) {
  if (auto fused = dyn_cast<LinearCrossEntropyWithGradOp>(op))
    return {fused.getWeightGrad()};
  if (auto fused = dyn_cast<LinearCrossEntropyGradOp>(op))
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

} // namespace

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
    dataParallel_ = mesh.getDp();
    tensorParallel_ = mesh.getTp();
    contextParallel_ = mesh.getCp();
    expertParallel_ = mesh.getEp();
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
      params_.push_back({arg, p.getName().str(),
                         p.getWeightDecay() && type.getRank() >= 2,
                         schedInitKind(p.getInit()), p.getInitStd(),
                         p.getCheckpointTransposed()});
      auto tp = func_.getArgAttrOfType<TpLayoutAttr>(i, BraidDialect::kTpAttr);
      if (tp && tp.isSplit()) {
        params_.back().part = sched::ShardAttr::get(
            b_.getContext(), sched::MeshAxis::Tp,
            static_cast<unsigned>(tp.getDim()),
            static_cast<unsigned>(tp.getBlocks()));
      }
      if (func_.getArgAttr(i, BraidDialect::kExpertShardAttr)) {
        if (expertParallel_ < 2 || params_.back().part)
          return func_.emitOpError()
                 << "parameter '" << p.getName()
                 << "' is an expert-parallel share of its experts (braid.ep), "
                    "which needs a mesh of ep above 1 and no tensor-parallel "
                    "split of the share";
        params_.back().part = sched::ShardAttr::get(
            b_.getContext(), sched::MeshAxis::Ep, 0);
      }
      const sched::MeshAxis zero = zeroAxis(params_.back().part);
      const int64_t ranks = groupSize(zero);
      if (sharded() && (type.getRank() == 0 || type.getDimSize(0) % ranks != 0))
        return func_.emitOpError()
               << "ZeRO stage " << zeroStage_
               << " shards every parameter along its first dimension over "
                  "the "
               << ranks
               << (zero == sched::MeshAxis::Edp
                       ? " data-parallel ranks that hold the same experts"
                       : " data-parallel ranks")
               << ", but '" << p.getName() << "' is " << type
               << ": choose a data_parallel"
               << (zero == sched::MeshAxis::Edp ? " / expert_parallel" : "")
               << " that divides "
               << (type.getRank() == 0 ? int64_t{1} : type.getDimSize(0))
               << ", or zero_stage 0";
    } else if (auto r = func_.getArgAttrOfType<InputRoleAttr>(
                   i, BraidDialect::kInputAttr)) {
      inputRole_[arg] = schedRole(r.getValue());
    } else if (auto buffer = func_.getArgAttrOfType<ParamAttr>(
                   i, BraidDialect::kBufferAttr)) {
      buffers_.push_back({arg, buffer.getName().str()});
    } else {
      return func_.emitOpError() << "argument " << i
                                 << " is neither braid.param, braid.input nor "
                                    "braid.buffer";
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
           std::nullopt, info, sharded(), p.part);
  }
  for (auto &p : params_)
    global(p.name + ".grad", sched::GlobalKind::Gradient, p.arg.getType(),
           p.name, std::nullopt, {}, sharded(), p.part);
  if (zeroStage_ == 1)
    for (auto &p : params_)
      global(p.name + ".grad.full", sched::GlobalKind::Gradient,
             p.arg.getType(), p.name, std::nullopt, {}, false, p.part);
  for (auto &p : params_) {
    global(p.name + ".exp_avg", sched::GlobalKind::OptimizerState,
           p.arg.getType(), p.name, std::nullopt, {}, sharded(), p.part);
    global(p.name + ".exp_avg_sq", sched::GlobalKind::OptimizerState,
           p.arg.getType(), p.name, std::nullopt, {}, sharded(), p.part);
  }
  // Stage 3 keeps its bf16 copies as shards too.
  for (auto &p : params_)
    if (!p.copy.empty())
      global(p.copy, sched::GlobalKind::WeightCopy, p.copyType, p.name,
             std::nullopt, {}, zeroStage_ == 3, p.part);
  for (BlockArgument arg : func_.getArguments())
    if (auto it = inputRole_.find(arg); it != inputRole_.end())
      global(sched::stringifyRole(it->second), sched::GlobalKind::Input,
             arg.getType(), {}, it->second);
  for (const Buffer &buffer : buffers_) {
    global(buffer.name, sched::GlobalKind::Buffer, buffer.arg.getType());
    global(buffer.name + ".load", sched::GlobalKind::Buffer,
           buffer.arg.getType(), buffer.name);
  }
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
  for (const Buffer &buffer : buffers_)
    optimizerLaunch(loc, "fill", {}, {getGlobal(buffer.name + ".load")}, zero);
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
  for (const Buffer &buffer : buffers_)
    buffers[buffer.arg] = getGlobal(buffer.name);
  biasUpdates_.clear();

  // Every rank's micro-batches make the step's loss; with context parallel
  // each rank's loss is the mean over its part of the sequence, and the
  // CP group's parts are equal.
  double numMicro = static_cast<double>(train_.getNumMicroBatches() *
                                        dataParallel_ * contextParallel_);
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
    // The micro-batch's expert counts add to the bias's load; the update
    // itself follows the optimizer (lowerOptimizer).
    if (auto update = dyn_cast<MoeBiasUpdateOp>(op)) {
      auto it = llvm::find_if(
          buffers_, [&](const Buffer &b) { return b.arg == update.getBias(); });
      if (it == buffers_.end())
        return op.emitOpError("updates a bias that is no braid.buffer "
                              "argument");
      copyMarks(&op, launch(op.getLoc(), "accumulate",
                            {buffers.lookup(update.getCounts())},
                            {getGlobal(it->name + ".load")}, DictionaryAttr()));
      biasUpdates_.push_back({it->name, update.getRate().convertToDouble()});
      continue;
    }
    if (isa<CommAllReduceOp, CommAllGatherOp, CommReduceScatterOp,
            CommShiftOp, CommDispatchOp, CommCombineOp,
            CommReplicateExpertsOp, CommReduceReplicasOp>(op)) {
      // Stage 3: hot-expert replication reads the share of experts it
      // copies from where this phase gathers it.
      if (auto w = weightOf.find(op.getOperand(0)); w != weightOf.end())
        buffers[op.getOperand(0)] = gatherBuffer(op.getLoc(), w->second, &op);
      if (failed(lowerComm(op, buffers)))
        return failure();
      // A replicated parameter's gradient summed over the TP group
      // (sequence parallel's norm weights) is then added to its global.
      Value r = op.getResult(0);
      if (gradSink_.count(r))
        copyMarks(&op, launch(op.getLoc(), "accumulate", {buffers[r]},
                              {gradSinkBuffer(op.getLoc(),
                                              gradSink_.lookup(r))},
                              DictionaryAttr()));
      continue;
    }
    if (!layerMark(&op) || !phaseMark(&op))
      return op.emitOpError()
             << "has no " << (layerMark(&op) ? "braid.phase" : "braid.layer")
             << " mark (braid-import sets the layer of every op, "
                "braid-autodiff the phase)";
    // Adaptive recompute: the kept rows go into the buffer of the
    // recomputed ones, which the clone writes only when it computes.
    if (auto restore = dyn_cast<MoeRestoreRowsOp>(op)) {
      Value into = buffers.lookup(restore.getRecomputed());
      buffers[restore.getResult()] = into;
      copyMarks(&op, launch(op.getLoc(), "moe_restore_rows",
                            {buffers.lookup(restore.getKept()),
                             buffers.lookup(restore.getOffsets())},
                            {into}, DictionaryAttr()));
      continue;
    }
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
    if (isa<CrossEntropyGradInputOp, LinearCrossEntropyWithGradOp,
            LinearCrossEntropyGradOp, MoeAuxLossGradOp, MoeZLossGradOp>(op))
      extra.push_back(
          b_.getNamedAttr("scale", b_.getF64FloatAttr(1.0 / numMicro)));
    // A part of the sequence along cp is the rank's load-balanced one
    // (the kernel's axis numbers are the plan's: tp 1, cp 2).
    if (auto take = dyn_cast<TakePartOp>(op);
        take && take.getAxis() == CommAxis::Cp) {
      extra.push_back(b_.getNamedAttr("axis", b_.getI64IntegerAttr(2)));
      extra.push_back(b_.getNamedAttr("balanced", b_.getI64IntegerAttr(1)));
    }
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
  // Each expert bias moves by its step's load, unless the step is skipped.
  for (const BiasUpdate &update : biasUpdates_)
    optimizerLaunch(
        loc, "moe_bias_update", {getGlobal(update.buffer + ".load"), skip},
        {getGlobal(update.buffer)},
        b_.getDictionaryAttr({b_.getNamedAttr("rate", f64(update.rate))}));
  refreshWeightCopies(loc);
  readback("grad_norm", numMicroBatches_);
  readback("step_skipped", numMicroBatches_ + 1);
  stream_ = 0;
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
  else if (dataParallel_ > 1 || contextParallel_ > 1 || sharded())
    lowerGradientReduction();
  lowerOptimizer();
  func_.erase();
  return success();
}

} // namespace braid::lower_to_sched

namespace braid {
namespace {

struct LowerToSchedPass : impl::LowerToSchedPassBase<LowerToSchedPass> {
  using LowerToSchedPassBase::LowerToSchedPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> func =
        singleStageFunction(module, "braid-lower-to-sched");
    if (failed(func))
      return signalPassFailure();
    if (failed(lower_to_sched::Lowering(module, *func, optimizerStream).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace braid
