#include "compiler/spec/SpecDefaults.h"

namespace braid {
namespace {

using D = SpecDefaultValues;

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

void fillArchitecture(spec::Architecture &model) {
  // Only a usable head count is copied: a bad one is reported once, under
  // num_heads, and not again under num_kv_heads.
  if (model.num_kv_heads() == 0 && model.num_heads() > 0)
    model.set_num_kv_heads(model.num_heads());
  if (model.norm_eps() == 0)
    model.set_norm_eps(D::kNormEps);
  if (model.position_embedding() == spec::ROPE && model.rope_theta() == 0)
    model.set_rope_theta(D::kRopeTheta);
  if (model.attention_mask() == spec::MASK_UNSPECIFIED)
    model.set_attention_mask(spec::CAUSAL);
  if (model.mutable_init()->std() == 0)
    model.mutable_init()->set_std(D::kInitStd);
  if (model.has_moe()) {
    // Widths are copied only when usable, so a bad one is reported once.
    spec::Moe &moe = *model.mutable_moe();
    if (moe.score() == spec::SCORE_UNSPECIFIED)
      moe.set_score(spec::SOFTMAX);
    if (moe.routed_scaling_factor() == 0)
      moe.set_routed_scaling_factor(1);
    if (moe.expert_ffn_hidden_size() == 0 && model.ffn_hidden_size() > 0)
      moe.set_expert_ffn_hidden_size(model.ffn_hidden_size());
    if (moe.shared_ffn_hidden_size() == 0 && moe.expert_ffn_hidden_size() > 0)
      moe.set_shared_ffn_hidden_size(moe.expert_ffn_hidden_size());
  }
}

void fillParallel(spec::ParallelLayout &parallel) {
  if (parallel.tensor_parallel() == 0)
    parallel.set_tensor_parallel(1);
  if (parallel.pipeline_parallel() == 0)
    parallel.set_pipeline_parallel(1);
  if (parallel.data_parallel() == 0)
    parallel.set_data_parallel(1);
  if (parallel.context_parallel() == 0)
    parallel.set_context_parallel(1);
  if (parallel.expert_parallel() == 0)
    parallel.set_expert_parallel(1);
  if (parallel.cp_comm_type() == spec::CP_COMM_UNSPECIFIED)
    parallel.set_cp_comm_type(spec::P2P);
  if (parallel.comm_chunks() == 0)
    parallel.set_comm_chunks(1);
  if (parallel.virtual_stages() == 0)
    parallel.set_virtual_stages(1);
  if (parallel.pipeline_schedule() == spec::SCHEDULE_UNSPECIFIED)
    parallel.set_pipeline_schedule(parallel.virtual_stages() > 1
                                       ? spec::INTERLEAVED
                                       : spec::ONE_F_ONE_B);
}

void fillTraining(spec::Training &train, int64_t dataParallel) {
  // Megatron's default: one micro-batch per optimizer step on each
  // data-parallel rank.
  if (train.global_batch_size() == 0 && train.micro_batch_size() > 0 &&
      dataParallel > 0)
    train.set_global_batch_size(train.micro_batch_size() * dataParallel);
  if (train.has_adamw()) {
    spec::AdamW &adamw = *train.mutable_adamw();
    if (adamw.beta1() == 0)
      adamw.set_beta1(D::kAdamBeta1);
    if (adamw.beta2() == 0)
      adamw.set_beta2(D::kAdamBeta2);
    if (adamw.eps() == 0)
      adamw.set_eps(D::kAdamEps);
  }
  spec::LRSchedule &schedule = *train.mutable_lr_schedule();
  if (schedule.decay() == spec::DECAY_UNSPECIFIED)
    schedule.set_decay(spec::COSINE);
  if (train.precision() == spec::PRECISION_UNSPECIFIED)
    train.set_precision(spec::FP32);
}

} // namespace

std::string defaultSpecName(std::string_view displayName) {
  size_t slash = displayName.find_last_of("/\\");
  std::string_view base = slash == std::string_view::npos
                              ? displayName
                              : displayName.substr(slash + 1);
  size_t dot = base.rfind('.');
  if (dot != std::string_view::npos && dot > 0)
    base = base.substr(0, dot);
  std::string name;
  for (char c : base) {
    // A name starts with a letter or digit (see validateSpec).
    bool leading = name.empty() && (c == '.' || c == '_' || c == '-');
    if (isNameChar(c) && !leading && name.size() < 64)
      name += c;
  }
  return name.empty() ? D::kName : name;
}

void fillSpecDefaults(spec::ModelSpec &spec, std::string_view displayName) {
  if (spec.name().empty())
    spec.set_name(defaultSpecName(displayName));
  if (spec.has_model())
    fillArchitecture(*spec.mutable_model());
  fillParallel(*spec.mutable_parallel());
  if (spec.has_train())
    fillTraining(*spec.mutable_train(), spec.parallel().data_parallel());
}

} // namespace braid
