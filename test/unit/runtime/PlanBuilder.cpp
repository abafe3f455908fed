#include "test/unit/runtime/PlanBuilder.h"

#include "runtime/plan/PlanFormat.h"

#include <algorithm>
#include <stdexcept>

namespace braid::test {
namespace {

int64_t dtypeBytes(plan::DType d) { return d == plan::BF16 ? 2 : 4; }

} // namespace

plan::Attr intAttr(const std::string &name, int64_t value) {
  plan::Attr a;
  a.set_name(name);
  a.set_i(value);
  return a;
}

plan::Attr floatAttr(const std::string &name, double value) {
  plan::Attr a;
  a.set_name(name);
  a.set_f(value);
  return a;
}

PlanBuilder::PlanBuilder() {
  plan_.set_format_version(kPlanFormatVersion);
  plan_.mutable_mesh()->set_tp(1);
  plan_.mutable_mesh()->set_cp(1);
  plan_.mutable_mesh()->set_pp(1);
  plan_.mutable_mesh()->set_dp(1);
  plan_.set_name("test-plan");
  plan_.set_num_streams(1);
  plan::ModelInfo *m = plan_.mutable_model();
  m->set_family("llama");
  m->set_vocab_size(256);
  m->set_flops_per_token(1000);
  m->set_activation(plan::ModelInfo::SWIGLU);
  m->set_norm_eps(static_cast<float>(1e-5));
  m->set_rope_theta(10000);
  m->set_max_position_embeddings(4);
  plan::TrainConfig &t = train();
  t.set_seed(1234);
  t.set_micro_batch_size(2);
  t.set_num_micro_batches(1);
  t.set_seq_len(4);
  t.set_steps(3);
  t.set_lr(1e-2);
  t.set_beta1(0.9);
  t.set_beta2(0.95);
  t.set_eps(1e-8);
  t.set_weight_decay(0.1);
  t.set_grad_clip(1.0);
  t.set_warmup_steps(1);
  t.set_decay(plan::TrainConfig::COSINE);
  t.set_min_lr(1e-3);
  t.set_precision(plan::TrainConfig::FP32);
}

uint32_t PlanBuilder::tensor(const std::string &name,
                             std::vector<int64_t> shape, plan::DType dtype,
                             plan::TensorKind kind) {
  plan::Tensor *t = plan_.add_tensors();
  t->set_id(plan_.tensors_size() - 1);
  t->set_name(name);
  int64_t numel = 1;
  for (int64_t d : shape) {
    t->add_shape(d);
    numel *= d;
  }
  t->set_dtype(dtype);
  t->set_kind(kind);
  t->set_offset(next_);
  t->set_size_bytes(numel * dtypeBytes(dtype));
  next_ += (t->size_bytes() + 63) / 64 * 64;
  return t->id();
}

uint32_t PlanBuilder::activationAt(const std::string &name,
                                   std::vector<int64_t> shape,
                                   uint32_t sharesWith) {
  uint64_t saved = next_;
  next_ = plan_.tensors(sharesWith).offset();
  uint32_t id = tensor(name, std::move(shape), plan::F32, plan::ACTIVATION);
  next_ = std::max(saved, next_);
  return id;
}

uint32_t PlanBuilder::view(const std::string &name, std::vector<int64_t> shape,
                           uint32_t base, uint64_t byteOffset) {
  uint64_t saved = next_;
  next_ = plan_.tensors(base).offset() + byteOffset;
  uint32_t id = tensor(name, std::move(shape), plan_.tensors(base).dtype(),
                       plan::ACTIVATION);
  plan_.mutable_tensors(id)->set_view_of(base + 1);
  next_ = std::max(saved, next_);
  return id;
}

uint32_t PlanBuilder::hostTensor(const std::string &name,
                                 std::vector<int64_t> shape, int64_t offset) {
  const uint64_t saved = next_;
  next_ = offset < 0 ? nextHost_ : static_cast<uint64_t>(offset);
  uint32_t id = tensor(name, std::move(shape), plan::F32, plan::ACTIVATION);
  plan_.mutable_tensors(id)->set_host(true);
  nextHost_ = std::max(nextHost_, next_);
  next_ = saved;
  return id;
}

uint32_t PlanBuilder::parameter(const std::string &name,
                                std::vector<int64_t> shape, plan::InitKind init,
                                float std, bool host) {
  auto stored = [&](const std::string &n, plan::TensorKind kind) {
    if (!host)
      return tensor(n, shape, plan::F32, kind);
    const uint32_t id = hostTensor(n, shape);
    plan_.mutable_tensors(id)->set_kind(kind);
    return id;
  };
  uint32_t p = stored(name, plan::PARAMETER);
  uint32_t g = tensor(name + ".grad", shape, plan::F32, plan::GRADIENT);
  uint32_t m = stored(name + ".exp_avg", plan::OPTIMIZER_STATE);
  uint32_t v = stored(name + ".exp_avg_sq", plan::OPTIMIZER_STATE);
  plan::ParameterInfo *info = plan_.mutable_tensors(p)->mutable_param();
  info->set_init(init);
  if (init == plan::NORMAL)
    info->set_init_std(std);
  info->set_weight_decay(shape.size() == 2);
  info->set_grad(g);
  info->set_exp_avg(m);
  info->set_exp_avg_sq(v);
  return p;
}

void PlanBuilder::standardInputsAndScalars(bool positions) {
  const int64_t b = train().micro_batch_size(), s = train().seq_len();
  plan_.mutable_tensors(tensor("tokens", {b, s}, plan::I32, plan::INPUT))
      ->set_role(plan::TOKENS);
  plan_.mutable_tensors(tensor("labels", {b, s}, plan::I32, plan::INPUT))
      ->set_role(plan::LABELS);
  if (positions)
    plan_.mutable_tensors(tensor("positions", {b, s}, plan::I32, plan::INPUT))
        ->set_role(plan::POSITIONS);
  plan_.set_loss_tensor(tensor("loss", {}, plan::F32, plan::SCALAR));
  plan_.set_loss_sum_tensor(tensor("loss_sum", {}, plan::F32, plan::SCALAR));
  plan_.set_grad_norm_tensor(tensor("grad_norm", {}, plan::F32, plan::SCALAR));
  plan_.set_step_skipped_tensor(
      tensor("step_skipped", {}, plan::F32, plan::SCALAR));
}

uint32_t PlanBuilder::id(const std::string &name) const {
  for (const plan::Tensor &t : plan_.tensors())
    if (t.name() == name)
      return t.id();
  throw std::invalid_argument("no tensor named " + name);
}

uint32_t PlanBuilder::grad(uint32_t param) const {
  return plan_.tensors(param).param().grad();
}

plan::Program *PlanBuilder::program(const std::string &name) {
  for (plan::Program &p : *plan_.mutable_programs())
    if (p.name() == name)
      return &p;
  plan::Program *p = plan_.add_programs();
  p->set_name(name);
  p->set_kind(name == "step"   ? plan::STEP
              : name == "init" ? plan::INIT
                               : plan::PROGRAM_UNSPECIFIED);
  return p;
}

void PlanBuilder::stage(uint32_t stream, uint32_t tensor, uint32_t microBatch) {
  plan::Instruction *inst = program("step")->add_instructions();
  inst->set_stream(stream);
  inst->mutable_stage()->set_tensor(tensor);
  inst->mutable_stage()->set_micro_batch(microBatch);
}

void PlanBuilder::readback(uint32_t stream, uint32_t tensor, uint32_t slot) {
  plan::Instruction *inst = program("step")->add_instructions();
  inst->set_stream(stream);
  inst->mutable_readback()->set_tensor(tensor);
  inst->mutable_readback()->set_slot(slot);
  plan_.set_num_readbacks(std::max(plan_.num_readbacks(), slot + 1));
}

void PlanBuilder::beginRepeat(uint32_t count) {
  plan::Program *step = program("step");
  repeatAt_ = step->instructions_size();
  step->add_instructions()->mutable_repeat()->set_count(count);
}

void PlanBuilder::endRepeat() {
  plan::Program *step = program("step");
  plan::Repeat *r = step->mutable_instructions(repeatAt_)->mutable_repeat();
  r->set_length(step->instructions_size() - repeatAt_ - 1);
  for (uint32_t i = 1; i < r->count(); ++i)
    plan_.add_loss_readbacks(i);
  plan_.set_num_readbacks(std::max(plan_.num_readbacks(), r->count()));
  repeatAt_ = -1;
}

void PlanBuilder::beginMicroBatch(uint32_t m) {
  microBatch_ = m;
  for (const plan::Tensor &t : plan_.tensors())
    if (t.kind() == plan::INPUT)
      stage(0, t.id(), m);
}

void PlanBuilder::endMicroBatch() {
  readback(0, plan_.loss_tensor(), microBatch_);
  plan_.add_loss_readbacks(microBatch_);
  microBatch_ = 0;
}

void PlanBuilder::collective(uint32_t stream, plan::CollectiveKind kind,
                             plan::MeshAxis axis, std::vector<uint32_t> tensors,
                             std::vector<uint32_t> outputs,
                             int32_t shiftOffset) {
  plan::Instruction *inst = program("step")->add_instructions();
  inst->set_stream(stream);
  plan::Collective *c = inst->mutable_collective();
  c->set_kind(kind);
  c->set_axis(axis);
  c->set_shift_offset(shiftOffset);
  for (uint32_t id : tensors)
    c->add_tensors(id);
  for (uint32_t id : outputs)
    c->add_outputs(id);
}

void PlanBuilder::transfer(bool send, uint32_t stream, uint32_t tensor,
                           int32_t peerOffset, uint32_t channel) {
  plan::Instruction *inst = program("step")->add_instructions();
  inst->set_stream(stream);
  plan::PeerTransfer *t = send ? inst->mutable_send() : inst->mutable_recv();
  t->set_tensor(tensor);
  t->set_peer_offset(peerOffset);
  t->set_channel(channel);
}

void PlanBuilder::send(uint32_t stream, uint32_t tensor, int32_t peerOffset,
                       uint32_t channel) {
  transfer(true, stream, tensor, peerOffset, channel);
}

void PlanBuilder::recv(uint32_t stream, uint32_t tensor, int32_t peerOffset,
                       uint32_t channel) {
  transfer(false, stream, tensor, peerOffset, channel);
}

void PlanBuilder::finishStep(bool losses) {
  const uint32_t m =
      losses ? static_cast<uint32_t>(train().num_micro_batches()) : 0;
  readback(0, plan_.grad_norm_tensor(), m);
  plan_.set_grad_norm_readback(m);
  readback(0, plan_.step_skipped_tensor(), m + 1);
  plan_.set_step_skipped_readback(m + 1);
}

void PlanBuilder::minimalStep(const std::string &kernel) {
  for (uint32_t m = 0; m < train().num_micro_batches(); ++m) {
    beginMicroBatch(m);
    launch("step", 0, kernel, {}, {});
    endMicroBatch();
  }
  finishStep();
}

void PlanBuilder::adamw(uint32_t param, uint32_t gradNorm, uint32_t skipped) {
  const plan::TrainConfig &t = plan_.train();
  const plan::Tensor &pt = plan_.tensors(param);
  launch("step", 0, "adamw", {grad(param), gradNorm, skipped},
         {param, pt.param().exp_avg(), pt.param().exp_avg_sq()},
         {floatAttr("beta1", t.beta1()), floatAttr("beta2", t.beta2()),
          floatAttr("eps", t.eps()),
          floatAttr("weight_decay",
                    pt.shape_size() == 2 ? t.weight_decay() : 0.0),
          floatAttr("grad_clip", t.grad_clip())});
}

void PlanBuilder::launch(const std::string &programName, uint32_t stream,
                         const std::string &kernel, std::vector<uint32_t> ins,
                         std::vector<uint32_t> outs,
                         std::vector<plan::Attr> attrs) {
  plan::Instruction *inst = program(programName)->add_instructions();
  inst->set_stream(stream);
  plan::Launch *l = inst->mutable_launch();
  l->set_kernel(kernel);
  if (programName == "step")
    l->set_micro_batch(microBatch_);
  for (uint32_t id : ins)
    l->add_inputs(id);
  for (uint32_t id : outs)
    l->add_outputs(id);
  for (plan::Attr &a : attrs)
    *l->add_attrs() = std::move(a);
}

void PlanBuilder::record(const std::string &programName, uint32_t stream,
                         uint32_t event, uint64_t value) {
  plan::Instruction *inst = program(programName)->add_instructions();
  inst->set_stream(stream);
  inst->mutable_record()->set_event(event);
  inst->mutable_record()->set_value(value);
  plan_.set_num_events(std::max(plan_.num_events(), event + 1));
}

void PlanBuilder::wait(const std::string &programName, uint32_t stream,
                       uint32_t event, uint64_t value) {
  plan::Instruction *inst = program(programName)->add_instructions();
  inst->set_stream(stream);
  inst->mutable_wait()->set_event(event);
  inst->mutable_wait()->set_value(value);
  plan_.set_num_events(std::max(plan_.num_events(), event + 1));
}

plan::Plan PlanBuilder::build() {
  plan::MemoryReport *r = plan_.mutable_memory();
  r->Clear();
  uint32_t maxStream = 0;
  for (const plan::Program &p : plan_.programs())
    for (const plan::Instruction &i : p.instructions())
      maxStream = std::max(maxStream, i.stream());
  plan_.set_num_streams(std::max(plan_.num_streams(), maxStream + 1));
  uint64_t activationEnd = 0, activationBegin = UINT64_MAX;
  for (const plan::Tensor &t : plan_.tensors()) {
    switch (t.kind()) {
    case plan::PARAMETER:
      r->set_parameter_bytes(r->parameter_bytes() + t.size_bytes());
      break;
    case plan::GRADIENT:
      r->set_gradient_bytes(r->gradient_bytes() + t.size_bytes());
      break;
    case plan::OPTIMIZER_STATE:
      r->set_optimizer_bytes(r->optimizer_bytes() + t.size_bytes());
      break;
    case plan::INPUT:
      r->set_input_bytes(r->input_bytes() + t.size_bytes());
      break;
    case plan::WEIGHT_COPY:
      r->set_weight_copy_bytes(r->weight_copy_bytes() + t.size_bytes());
      break;
    case plan::ACTIVATION:
      if (t.host())
        break;
      activationBegin = std::min(activationBegin, t.offset());
      activationEnd = std::max(activationEnd, t.offset() + t.size_bytes());
      break;
    default:
      break;
    }
  }
  if (activationEnd > 0)
    r->set_activation_peak_bytes(activationEnd - activationBegin);
  r->set_arena_bytes(next_);
  r->set_host_bytes(nextHost_);
  return plan_;
}

std::string PlanBuilder::bytes() { return build().SerializeAsString(); }

plan::Plan pipelinePlan(std::vector<plan::Plan> stages) {
  plan::Plan outer;
  outer.set_format_version(stages[0].format_version());
  outer.set_name(stages[0].name());
  *outer.mutable_model() = stages[0].model();
  *outer.mutable_train() = stages[0].train();
  *outer.mutable_mesh() = stages[0].mesh();
  outer.mutable_mesh()->set_pp(static_cast<int64_t>(stages.size()));
  for (plan::Plan &stage : stages) {
    stage.clear_format_version();
    stage.clear_name();
    stage.clear_model();
    stage.clear_train();
    stage.clear_mesh();
    *outer.add_stage_plans() = std::move(stage);
  }
  return outer;
}

} // namespace braid::test
