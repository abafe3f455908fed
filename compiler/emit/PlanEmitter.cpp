//===- PlanEmitter.cpp - planned sched module to plan protobuf ------------===//
#include "compiler/emit/PlanEmitter.h"

#include <algorithm>
#include <optional>
#include <string>

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/sched/SchedOps.h"
#include "google/protobuf/text_format.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/ShardLayout.h"

using namespace mlir;

namespace braid {
namespace {

class Emitter {
public:
  explicit Emitter(ModuleOp module) : module_(module) {}
  FailureOr<plan::Plan> run();

private:
  LogicalResult addGlobal(sched::GlobalOp global);
  LogicalResult linkParameters();
  LogicalResult addProgram(sched::ProgramOp program);
  LogicalResult copySettings();
  // Records which slot holds which scalar (the plan's *_readback fields).
  // In a sched.repeat body the readback fills one slot per iteration.
  LogicalResult noteReadback(sched::ReadbackOp op, uint32_t tensor) {
    uint32_t iterations = 1;
    if (auto repeat = op->getParentOfType<sched::RepeatOp>())
      iterations = repeat.getCount();
    plan_.set_num_readbacks(
        std::max(plan_.num_readbacks(), op.getSlot() + iterations));
    if (iterations > 1 && tensor != plan_.loss_tensor())
      return op.emitOpError("reads back a scalar other than @loss once per "
                            "iteration");
    if (tensor == plan_.loss_tensor())
      for (uint32_t i = 0; i < iterations; ++i)
        plan_.add_loss_readbacks(op.getSlot() + i);
    else if (tensor == plan_.grad_norm_tensor())
      plan_.set_grad_norm_readback(op.getSlot());
    else if (tensor == plan_.step_skipped_tensor())
      plan_.set_step_skipped_readback(op.getSlot());
    else
      return op.emitOpError("reads back a scalar that is neither @loss, "
                            "@grad_norm nor @step_skipped");
    return success();
  }

  plan::Tensor *newTensor(StringRef name, MemRefType type,
                          std::optional<int64_t> offset,
                          plan::TensorKind kind) {
    plan::Tensor *t = plan_.add_tensors();
    t->set_id(plan_.tensors_size() - 1);
    t->set_name(name.str());
    for (int64_t d : type.getShape())
      t->add_shape(d);
    Type e = type.getElementType();
    t->set_dtype(e.isF32() ? plan::F32 : e.isBF16() ? plan::BF16 : plan::I32);
    t->set_kind(kind);
    t->set_offset(static_cast<uint64_t>(offset.value_or(0)));
    int64_t bytes =
        type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
    t->set_size_bytes(static_cast<uint64_t>(bytes));
    return t;
  }

  ModuleOp module_;
  plan::Plan plan_;
  llvm::StringMap<uint32_t> globalIds_;
  // The tensors of the scalars of each role, kNone until seen.
  static constexpr uint32_t kNone = ~0u;
  uint32_t loss_ = kNone, lossSum_ = kNone, gradNorm_ = kNone,
           stepSkipped_ = kNone;
  // The program of each kind, once seen.
  sched::ProgramOp stepProgram_, initProgram_;
  uint32_t maxStream_ = 0;
  int64_t maxEvent_ = -1;
};

// A buffer's accumulator (`of` its buffer) is a SCALAR without a role:
// small persistent values, not checkpointed.
plan::TensorKind tensorKind(sched::GlobalKind kind, bool belongs) {
  switch (kind) {
  case sched::GlobalKind::Buffer:
    return belongs ? plan::SCALAR : plan::BUFFER;
  case sched::GlobalKind::Parameter:
    return plan::PARAMETER;
  case sched::GlobalKind::Gradient:
    return plan::GRADIENT;
  case sched::GlobalKind::OptimizerState:
    return plan::OPTIMIZER_STATE;
  case sched::GlobalKind::WeightCopy:
    return plan::WEIGHT_COPY;
  case sched::GlobalKind::Input:
    return plan::INPUT;
  case sched::GlobalKind::Scalar:
    return plan::SCALAR;
  }
  llvm_unreachable("every global kind has a tensor kind");
}

plan::InitKind initKind(sched::InitKind init) {
  switch (init) {
  case sched::InitKind::Normal:
    return plan::NORMAL;
  case sched::InitKind::Zeros:
    return plan::ZEROS;
  case sched::InitKind::Ones:
    return plan::ONES;
  }
  llvm_unreachable("every init kind has a plan init kind");
}

LogicalResult Emitter::addGlobal(sched::GlobalOp global) {
  if (!global.getOffset())
    return global.emitOpError("has no offset: run braid-plan-memory first");
  plan::Tensor *t =
      newTensor(global.getSymName(), global.getType(), global.getOffset(),
                tensorKind(global.getKind(), !!global.getOf()));
  globalIds_[global.getSymName()] = t->id();
  t->set_host(global.getHost());
  if (sched::ShardAttr shard = global.getShardAttr()) {
    if (shard.getDim() >= static_cast<unsigned>(t->shape_size()))
      return global.emitOpError()
             << "is sharded along dimension " << shard.getDim() << " but has "
             << t->shape_size() << " dimensions";
    plan::Shard *s = t->mutable_shard();
    // Both enums list the axes in the same order, after UNSPECIFIED.
    s->set_axis(
        static_cast<plan::MeshAxis>(static_cast<int>(shard.getAxis()) + 1));
    s->set_dim(shard.getDim());
    if (shard.getBlocks() > 1)
      s->set_blocks(shard.getBlocks());
    if (shard.getDpRows())
      s->set_dp_rows(true);
    const plan::Mesh &mesh = plan_.mesh();
    const int64_t ep = std::max<int64_t>(1, mesh.ep());
    const int64_t sizes[] = {mesh.tp(), mesh.cp(), mesh.pp(), mesh.dp(),
                             mesh.dp() * mesh.cp(), ep, mesh.dp() / ep};
    // dp_rows: dimension 0 further cut over the part's ZeRO group.
    const int64_t rows = shard.getDpRows() ? dpRowsGroupSize(mesh, *s) : 1;
    for (int d = 0; d < t->shape_size(); ++d)
      s->add_global_shape(t->shape(d) *
                          (d == static_cast<int>(shard.getDim())
                               ? sizes[static_cast<int>(shard.getAxis())]
                               : 1) *
                          (d == 0 ? rows : 1));
  }
  // The verifier gives inputs and scalars a role of their kind, and
  // parameters their info.
  if (std::optional<sched::Role> role = global.getRole()) {
    uint32_t *scalar = nullptr;
    switch (*role) {
    case sched::Role::Tokens:
      t->set_role(plan::TOKENS);
      break;
    case sched::Role::Labels:
      t->set_role(plan::LABELS);
      break;
    case sched::Role::Positions:
      t->set_role(plan::POSITIONS);
      break;
    case sched::Role::Loss:
      scalar = &loss_;
      break;
    case sched::Role::LossSum:
      scalar = &lossSum_;
      break;
    case sched::Role::GradNorm:
      scalar = &gradNorm_;
      break;
    case sched::Role::StepSkipped:
      scalar = &stepSkipped_;
      break;
    }
    if (scalar) {
      if (*scalar != kNone)
        return global.emitOpError()
               << "is the " << sched::stringifyRole(*role) << " scalar, as @"
               << plan_.tensors(*scalar).name()
               << " is; a plan has one scalar of each role";
      *scalar = t->id();
    }
  }
  if (sched::ParamInfoAttr info = global.getInfoAttr()) {
    plan::ParameterInfo *p = t->mutable_param();
    p->set_init(initKind(info.getInit()));
    p->set_init_std(info.getInitStd());
    p->set_weight_decay(info.getWeightDecay());
    p->set_checkpoint_transposed(info.getCheckpointTransposed());
  }
  return success();
}

// Parameter infos name their gradient and moments by symbol; resolve them
// to tensor ids once every global has one.
LogicalResult Emitter::linkParameters() {
  for (auto global : module_.getOps<sched::GlobalOp>()) {
    sched::ParamInfoAttr info = global.getInfoAttr();
    if (!info)
      continue;
    plan::Tensor *t = plan_.mutable_tensors(globalIds_[global.getSymName()]);
    auto lookup = [&](StringRef key,
                      FlatSymbolRefAttr sym) -> FailureOr<uint32_t> {
      if (!globalIds_.count(sym.getValue()))
        return global.emitOpError() << "info." << key << " " << sym
                                    << " does not name a sched.global";
      return globalIds_[sym.getValue()];
    };
    FailureOr<uint32_t> g = lookup("grad", info.getGrad()),
                        m = lookup("exp_avg", info.getExpAvg()),
                        v = lookup("exp_avg_sq", info.getExpAvgSq());
    if (failed(g) || failed(m) || failed(v))
      return failure();
    t->mutable_param()->set_grad(*g);
    t->mutable_param()->set_exp_avg(*m);
    t->mutable_param()->set_exp_avg_sq(*v);
    if (FlatSymbolRefAttr copySym = info.getComputeCopy()) {
      FailureOr<uint32_t> copy = lookup("compute_copy", copySym);
      if (failed(copy))
        return failure();
      const plan::Tensor &c = plan_.tensors(*copy);
      // A sharded parameter's copy is whole, or sharded as it is (ZeRO 3);
      // ZeRO over a tensor-parallel part or an expert-parallel share
      // (dp_rows) copies that part.
      std::vector<int64_t> shape(t->shape().begin(), t->shape().end());
      if (t->has_shard() && !c.has_shard())
        shape.assign(t->shard().global_shape().begin(),
                     t->shard().global_shape().end());
      else if (t->has_shard() && t->shard().dp_rows() &&
               !c.shard().dp_rows() && !shape.empty())
        shape[0] *= dpRowsGroupSize(plan_.mesh(), t->shard());
      if (c.kind() != plan::WEIGHT_COPY ||
          !std::equal(c.shape().begin(), c.shape().end(), shape.begin(),
                      shape.end()))
        return global.emitOpError()
               << "info.compute_copy names '" << c.name()
               << "', which is not a weight_copy global of the parameter's "
                  "(whole) shape";
      t->mutable_param()->set_compute_copy(*copy);
    }
  }
  return success();
}

LogicalResult Emitter::addProgram(sched::ProgramOp program) {
  const bool step = program.getKind() == sched::ProgramKind::Step;
  sched::ProgramOp &first = step ? stepProgram_ : initProgram_;
  if (first)
    return program.emitOpError()
           << "is a " << sched::stringifyProgramKind(program.getKind())
           << " program, as @" << first.getSymName()
           << " is; a plan has one of each kind";
  first = program;
  plan::Program *out = plan_.add_programs();
  out->set_name(program.getSymName().str());
  out->set_kind(step ? plan::STEP : plan::INIT);
  llvm::DenseMap<Value, uint32_t> ids;
  int64_t launchIndex = 0, collectiveIndex = 0, transferIndex = 0;

  auto allocId = [&](Value v, StringRef kernel, int64_t index,
                     size_t resultIndex) -> FailureOr<uint32_t> {
    auto alloc = v.getDefiningOp<sched::AllocOp>();
    if (!alloc)
      return program.emitOpError("uses a buffer that is neither a global, "
                                 "an alloc nor a view of an alloc");
    auto it = ids.find(v);
    if (it != ids.end())
      return it->second;
    if (!alloc.getOffset())
      return alloc.emitOpError("has no offset: run braid-plan-memory first");
    std::string name =
        (program.getSymName() + "/" + kernel + "#" + std::to_string(index) +
         ".out" + std::to_string(resultIndex))
            .str();
    plan::Tensor *t =
        newTensor(name, alloc.getType(), alloc.getOffset(), plan::ACTIVATION);
    t->set_host(alloc.getHost());
    ids[v] = t->id();
    return t->id();
  };
  // A view is a tensor inside its base's bytes (plan.proto view_of).
  auto idOf = [&](Value v, StringRef kernel, int64_t index,
                  size_t resultIndex) -> FailureOr<uint32_t> {
    if (auto get = v.getDefiningOp<sched::GetGlobalOp>())
      return globalIds_.lookup(get.getGlobal());
    auto view = v.getDefiningOp<sched::ViewOp>();
    if (!view)
      return allocId(v, kernel, index, resultIndex);
    if (auto it = ids.find(v); it != ids.end())
      return it->second;
    FailureOr<uint32_t> base =
        allocId(view.getSource(), kernel, index, resultIndex);
    if (failed(base))
      return failure();
    const plan::Tensor &whole = plan_.tensors(*base);
    auto type = cast<MemRefType>(view.getType());
    int64_t inner = 1;
    for (int64_t d = view.getDim() + 1; d < type.getRank(); ++d)
      inner *= type.getDimSize(d);
    const uint64_t bytes = type.getElementTypeBitWidth() / 8;
    const uint64_t offset =
        whole.offset() + static_cast<uint64_t>(view.getFirst() * inner) * bytes;
    const std::string name =
        whole.name() + "@" + std::to_string(view.getFirst());
    plan::Tensor *t = newTensor(name, type, static_cast<int64_t>(offset),
                                plan::ACTIVATION);
    t->set_view_of(*base + 1);
    ids[v] = t->id();
    return t->id();
  };

  // The ops in program order, a sched.repeat followed by its body; the
  // Repeat instruction's length is set when the body ends.
  SmallVector<Operation *> ops;
  program.getBody().walk<WalkOrder::PreOrder>(
      [&](Operation *op) { ops.push_back(op); });
  std::optional<std::pair<int, sched::RepeatOp>> open;
  auto close = [&]() -> LogicalResult {
    const int length = out->instructions_size() - open->first - 1;
    if (length == 0)
      return open->second.emitOpError("repeats nothing the runtime runs");
    out->mutable_instructions(open->first)
        ->mutable_repeat()
        ->set_length(length);
    open.reset();
    return success();
  };
  for (Operation *opPtr : ops) {
    Operation &op = *opPtr;
    if (open && op.getParentOp() != open->second && failed(close()))
      return failure();
    if (auto repeat = dyn_cast<sched::RepeatOp>(op)) {
      open = {out->instructions_size(), repeat};
      out->add_instructions()->mutable_repeat()->set_count(repeat.getCount());
    } else if (auto launch = dyn_cast<sched::LaunchOp>(op)) {
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(launch.getStream());
      maxStream_ = std::max(maxStream_, launch.getStream());
      plan::Launch *l = inst->mutable_launch();
      l->set_kernel(launch.getKernel().str());
      l->set_micro_batch(launch.getMicroBatch().value_or(0));
      // Outputs first, so that a buffer is named after the launch that
      // writes it.
      for (auto [i, v] : llvm::enumerate(launch.getOuts())) {
        FailureOr<uint32_t> id = idOf(v, launch.getKernel(), launchIndex, i);
        if (failed(id))
          return failure();
        l->add_outputs(*id);
      }
      for (Value v : launch.getIns()) {
        FailureOr<uint32_t> id = idOf(v, launch.getKernel(), launchIndex, 0);
        if (failed(id))
          return failure();
        l->add_inputs(*id);
      }
      if (DictionaryAttr params = launch.getParamsAttr()) {
        for (NamedAttribute a : params) {
          plan::Attr *attr = l->add_attrs();
          attr->set_name(a.getName().str());
          if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
            attr->set_i(i.getInt());
          else if (auto f = dyn_cast<FloatAttr>(a.getValue()))
            attr->set_f(f.getValueAsDouble());
          else
            return launch.emitOpError()
                   << "parameter '" << a.getName().getValue()
                   << "' is neither an integer nor a float";
        }
      }
      ++launchIndex;
    } else if (auto stage = dyn_cast<sched::StageOp>(op)) {
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(stage.getStream());
      maxStream_ = std::max(maxStream_, stage.getStream());
      FailureOr<uint32_t> id = idOf(stage.getBuffer(), "stage", 0, 0);
      if (failed(id))
        return failure();
      inst->mutable_stage()->set_tensor(*id);
      inst->mutable_stage()->set_micro_batch(stage.getMicroBatch());
    } else if (auto rb = dyn_cast<sched::ReadbackOp>(op)) {
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(rb.getStream());
      maxStream_ = std::max(maxStream_, rb.getStream());
      FailureOr<uint32_t> id = idOf(rb.getBuffer(), "readback", 0, 0);
      if (failed(id))
        return failure();
      inst->mutable_readback()->set_tensor(*id);
      inst->mutable_readback()->set_slot(rb.getSlot());
      if (failed(noteReadback(rb, *id)))
        return failure();
    } else if (auto coll = dyn_cast<sched::CollectiveOp>(op)) {
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(coll.getStream());
      maxStream_ = std::max(maxStream_, coll.getStream());
      plan::Collective *c = inst->mutable_collective();
      // Both enums list their cases in the same order, after the plan's
      // UNSPECIFIED.
      c->set_kind(static_cast<plan::CollectiveKind>(
          static_cast<int>(coll.getKind()) + 1));
      c->set_axis(
          static_cast<plan::MeshAxis>(static_cast<int>(coll.getAxis()) + 1));
      // A buffer first used here is named after its place: inputs first,
      // then outputs.
      for (auto [i, v] : llvm::enumerate(coll.getBuffers())) {
        FailureOr<uint32_t> id = idOf(v, "collective", collectiveIndex, i);
        if (failed(id))
          return failure();
        c->add_tensors(*id);
      }
      for (auto [i, v] : llvm::enumerate(coll.getOutputs())) {
        FailureOr<uint32_t> id = idOf(v, "collective", collectiveIndex,
                                      coll.getBuffers().size() + i);
        if (failed(id))
          return failure();
        c->add_outputs(*id);
      }
      if (std::optional<int32_t> offset = coll.getOffset())
        c->set_shift_offset(*offset);
      ++collectiveIndex;
    } else if (isa<sched::SendOp, sched::RecvOp>(op)) {
      auto send = dyn_cast<sched::SendOp>(op);
      auto recv = dyn_cast<sched::RecvOp>(op);
      const uint32_t stream = send ? send.getStream() : recv.getStream();
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(stream);
      maxStream_ = std::max(maxStream_, stream);
      FailureOr<uint32_t> id = idOf(send ? send.getBuffer() : recv.getBuffer(),
                                    send ? "send" : "recv", transferIndex++, 0);
      if (failed(id))
        return failure();
      plan::PeerTransfer *t =
          send ? inst->mutable_send() : inst->mutable_recv();
      t->set_tensor(*id);
      t->set_peer_offset(send ? send.getPeerOffset() : recv.getPeerOffset());
      t->set_channel(send ? send.getChannel() : recv.getChannel());
    } else if (auto mark = dyn_cast<sched::MarkOp>(op)) {
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(mark.getStream());
      maxStream_ = std::max(maxStream_, mark.getStream());
      plan::Mark *m = inst->mutable_mark();
      m->set_part(mark.getPart() == "F"   ? plan::PART_F
                  : mark.getPart() == "B" ? plan::PART_B
                                          : plan::PART_W);
      m->set_stage(mark.getStage());
      m->set_micro_batch(mark.getMicroBatch());
      m->set_end(mark.getEnd());
    } else if (auto rec = dyn_cast<sched::EventRecordOp>(op)) {
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(rec.getStream());
      inst->mutable_record()->set_event(rec.getEvent());
      inst->mutable_record()->set_value(rec.getValue());
      maxStream_ = std::max(maxStream_, rec.getStream());
      maxEvent_ = std::max<int64_t>(maxEvent_, rec.getEvent());
    } else if (auto wait = dyn_cast<sched::EventWaitOp>(op)) {
      plan::Instruction *inst = out->add_instructions();
      inst->set_stream(wait.getStream());
      inst->mutable_wait()->set_event(wait.getEvent());
      inst->mutable_wait()->set_value(wait.getValue());
      maxStream_ = std::max(maxStream_, wait.getStream());
      maxEvent_ = std::max<int64_t>(maxEvent_, wait.getEvent());
    }
  }
  return open ? close() : success();
}

// braid.moe (BraidDialect::kMoeAttr) into the plan's MoeInfo.
static void copyMoe(DictionaryAttr moe, plan::MoeInfo &out) {
  auto i64 = [&](StringRef k) {
    auto a = moe.getAs<IntegerAttr>(k);
    return a ? a.getInt() : 0;
  };
  auto f64 = [&](StringRef k) {
    auto a = moe.getAs<FloatAttr>(k);
    return a ? a.getValueAsDouble() : 0.0;
  };
  auto flag = [&](StringRef k) {
    auto a = moe.getAs<BoolAttr>(k);
    return a && a.getValue();
  };
  if (auto naming = moe.getAs<StringAttr>("naming"))
    out.set_naming(naming.str());
  out.set_num_experts(i64("num_experts"));
  out.set_top_k(i64("top_k"));
  out.set_expert_ffn_hidden_size(i64("expert_ffn_hidden_size"));
  out.set_num_shared_experts(i64("num_shared_experts"));
  out.set_shared_ffn_hidden_size(i64("shared_ffn_hidden_size"));
  out.set_first_k_dense(i64("first_k_dense"));
  out.set_sigmoid(flag("sigmoid"));
  out.set_normalize_top_k(flag("normalize_top_k"));
  out.set_routed_scaling_factor(f64("routed_scaling_factor"));
  out.set_aux_loss_coeff(f64("aux_loss_coeff"));
  out.set_z_loss_coeff(f64("z_loss_coeff"));
}

LogicalResult Emitter::copySettings() {
  auto model = module_->getAttrOfType<ModelAttr>(BraidDialect::kModelAttr);
  auto train = module_->getAttrOfType<TrainAttr>(BraidDialect::kTrainAttr);
  auto memory = module_->getAttrOfType<DictionaryAttr>("sched.memory");
  if (!model || !train)
    return module_.emitError("needs braid.model and braid.train (run "
                             "braid-import first)");
  if (!memory)
    return module_.emitError("needs sched.memory (run braid-plan-memory "
                             "first)");
  if (auto name = module_->getAttrOfType<StringAttr>("braid.name"))
    plan_.set_name(name.str());

  plan::ModelInfo *m = plan_.mutable_model();
  m->set_family(stringifyModelFamily(model.getFamily()).str());
  m->set_vocab_size(model.getVocabSize());
  m->set_hidden_size(model.getHiddenSize());
  m->set_num_layers(model.getNumLayers());
  m->set_num_heads(model.getNumHeads());
  m->set_num_kv_heads(model.getNumKvHeads());
  m->set_ffn_hidden_size(model.getFfnHiddenSize());
  m->set_num_parameters(model.getNumParameters());
  m->set_flops_per_token(model.getFlopsPerToken());
  m->set_activation(model.getActivation() == Activation::SwiGLU
                        ? plan::ModelInfo::SWIGLU
                        : plan::ModelInfo::GELU_TANH);
  m->set_norm_eps(model.getNormEps());
  m->set_rope_theta(model.getRopeTheta());
  m->set_max_position_embeddings(model.getMaxPositionEmbeddings());
  m->set_head_dim(model.getHeadDim());
  m->set_tie_embeddings(model.getTieEmbeddings());
  m->set_linear_bias(model.getLinearBias());
  m->set_hidden_dropout(model.getHiddenDropout());
  m->set_attention_dropout(model.getAttentionDropout());
  if (auto moe = module_->getAttrOfType<DictionaryAttr>(BraidDialect::kMoeAttr))
    copyMoe(moe, *m->mutable_moe());
  if (auto kept = module_->getAttrOfType<IntegerAttr>(
          BraidDialect::kMoeAdaptiveRowsAttr))
    m->mutable_moe()->set_adaptive_recompute_rows(kept.getInt());
  if (auto hot = module_->getAttrOfType<IntegerAttr>(
          BraidDialect::kMoeHotExpertsAttr))
    m->mutable_moe()->set_hot_experts(hot.getInt());

  plan::TrainConfig *t = plan_.mutable_train();
  t->set_seed(train.getSeed());
  t->set_micro_batch_size(train.getMicroBatchSize());
  t->set_num_micro_batches(train.getNumMicroBatches());
  t->set_seq_len(train.getSeqLen());
  t->set_steps(train.getSteps());
  t->set_lr(train.getLr());
  t->set_beta1(train.getBeta1());
  t->set_beta2(train.getBeta2());
  t->set_eps(train.getEps());
  t->set_weight_decay(train.getWeightDecay());
  t->set_grad_clip(train.getGradClip());
  t->set_warmup_steps(train.getWarmupSteps());
  t->set_decay(train.getDecay() == LrDecay::Constant
                   ? plan::TrainConfig::CONSTANT
                   : plan::TrainConfig::COSINE);
  t->set_min_lr(train.getMinLr());
  t->set_precision(train.getPrecision() == Precision::BF16
                       ? plan::TrainConfig::BF16
                       : plan::TrainConfig::FP32);

  // The memory figures are the planner's; weight_copy_bytes is absent in
  // FP32 plans, host_bytes in plans that offload nothing.
  auto bytes = [&](StringRef k) -> int64_t {
    auto a = memory.getAs<IntegerAttr>(k);
    return a ? a.getInt() : 0;
  };
  plan::MemoryReport *r = plan_.mutable_memory();
  r->set_parameter_bytes(bytes("parameter_bytes"));
  r->set_gradient_bytes(bytes("gradient_bytes"));
  r->set_optimizer_bytes(bytes("optimizer_bytes"));
  r->set_input_bytes(bytes("input_bytes"));
  r->set_activation_peak_bytes(bytes("activation_peak_bytes"));
  r->set_saved_activation_bytes(bytes("saved_activation_bytes"));
  r->set_arena_bytes(bytes("arena_bytes"));
  r->set_weight_copy_bytes(bytes("weight_copy_bytes"));
  r->set_host_bytes(bytes("host_bytes"));
  return success();
}

FailureOr<plan::Plan> Emitter::run() {
  plan_.set_format_version(kPlanFormatVersion);
  plan::Mesh *mesh = plan_.mutable_mesh();
  if (auto m = module_->getAttrOfType<MeshAttr>(BraidDialect::kMeshAttr)) {
    mesh->set_tp(m.getTp());
    mesh->set_cp(m.getCp());
    mesh->set_pp(m.getPp());
    mesh->set_dp(m.getDp());
    if (m.getEp() > 1)
      mesh->set_ep(m.getEp());
  } else {
    // A module without a mesh is compiled for one rank.
    mesh->set_tp(1);
    mesh->set_cp(1);
    mesh->set_pp(1);
    mesh->set_dp(1);
  }
  for (auto global : module_.getOps<sched::GlobalOp>())
    if (failed(addGlobal(global)))
      return failure();
  if (failed(linkParameters()))
    return failure();
  if (loss_ == kNone || lossSum_ == kNone || gradNorm_ == kNone ||
      stepSkipped_ == kNone)
    return module_.emitError("needs scalar globals of the roles loss, "
                             "loss_sum, grad_norm and step_skipped (run "
                             "braid-lower-to-sched first)");
  plan_.set_loss_tensor(loss_);
  plan_.set_loss_sum_tensor(lossSum_);
  plan_.set_grad_norm_tensor(gradNorm_);
  plan_.set_step_skipped_tensor(stepSkipped_);
  for (auto program : module_.getOps<sched::ProgramOp>())
    if (failed(addProgram(program)))
      return failure();
  if (failed(copySettings()))
    return failure();
  plan_.set_num_streams(maxStream_ + 1);
  plan_.set_num_events(static_cast<uint32_t>(maxEvent_ + 1));
  if (auto host = module_->getAttrOfType<DenseI32ArrayAttr>(
          sched::SchedDialect::kHostStreamsAttr))
    for (int32_t stream : host.asArrayRef())
      plan_.add_host_streams(static_cast<uint32_t>(stream));
  return plan_;
}

} // namespace

FailureOr<plan::Plan> emitPlan(ModuleOp module) {
  SmallVector<ModuleOp> stages(module.getOps<ModuleOp>());
  if (stages.empty())
    return Emitter(module).run();
  // A pipeline (braid-lower-pipeline): one nested module per pipeline
  // rank, in order, each emitted as a whole plan; the outer plan keeps
  // their common header and nothing else.
  plan::Plan outer;
  for (auto [k, stage] : llvm::enumerate(stages)) {
    auto rank =
        stage->getAttrOfType<IntegerAttr>(BraidDialect::kPipelineRankAttr);
    if (!rank || rank.getInt() != static_cast<int64_t>(k))
      return stage.emitOpError()
             << "is nested module " << k << " but is not marked "
             << BraidDialect::kPipelineRankAttr << " = " << k;
    FailureOr<plan::Plan> p = Emitter(stage).run();
    if (failed(p))
      return failure();
    if (k == 0) {
      outer.set_format_version(p->format_version());
      outer.set_name(p->name());
      *outer.mutable_model() = p->model();
      *outer.mutable_train() = p->train();
      *outer.mutable_mesh() = p->mesh();
    }
    p->clear_format_version();
    p->clear_name();
    p->clear_model();
    p->clear_train();
    p->clear_mesh();
    *outer.add_stage_plans() = std::move(*p);
  }
  if (outer.mesh().pp() != static_cast<int64_t>(stages.size()))
    return module.emitError()
           << "has " << stages.size() << " pipeline ranks' modules, its mesh "
           << outer.mesh().pp();
  return outer;
}

std::string planFileBytes(const plan::Plan &plan, bool text) {
  std::string bytes;
  if (text) {
    google::protobuf::TextFormat::PrintToString(plan, &bytes);
    return bytes;
  }
  plan.SerializeToString(&bytes);
  return sealPlan(bytes);
}

} // namespace braid
