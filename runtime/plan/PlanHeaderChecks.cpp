// Plan-level settings: format version, stream and event counts, the model
// summary and the training configuration.
#include <cmath>
#include <limits>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanChecks.h"

namespace braid::plan_checks {
namespace {

// Streams become threads and events become counters, so both are bounded to
// keep a hostile plan from exhausting the machine before it is refused.
constexpr uint32_t kMaxStreams = 64;
constexpr uint32_t kMaxEvents = 1u << 16;

bool positiveFinite(double v) { return std::isfinite(v) && v > 0; }
bool nonNegativeFinite(double v) { return std::isfinite(v) && v >= 0; }

// A mesh of at most 2^24 ranks, every axis at least 1.
absl::Status checkMesh(const plan::Mesh &mesh) {
  constexpr int64_t kMaxRanks = int64_t{1} << 24;
  struct Axis {
    const char *name;
    int64_t size;
  };
  const Axis axes[] = {{"tp", mesh.tp()},
                       {"cp", mesh.cp()},
                       {"pp", mesh.pp()},
                       {"dp", mesh.dp()}};
  int64_t world = 1;
  for (const Axis &a : axes) {
    if (a.size < 1 || a.size > kMaxRanks)
      return refuse(absl::StrCat("plan.mesh.", a.name, " is ", a.size,
                                 ": a mesh axis has 1 to 2^24 ranks"));
    world *= a.size;
    if (world > kMaxRanks)
      return refuse("plan.mesh has more than 2^24 ranks");
  }
  if (mesh.ep() < 0 || (mesh.ep() > 1 && mesh.dp() % mesh.ep() != 0))
    return refuse(absl::StrCat(
        "plan.mesh.ep is ", mesh.ep(), ": expert parallel groups divide the ",
        mesh.dp(), " data-parallel ranks (0 or 1: none)"));
  return absl::OkStatus();
}

// An enum field's value for a message: its name, or its number when it has
// none (a value this runtime does not know).
std::string enumValue(const std::string &name, int value) {
  return name.empty() ? absl::StrCat(value) : name;
}

// The model summary: what the runtime sizes data by, and everything a
// checkpoint's config.json states (runtime/ckpt/HfConfig.h), so that the
// file always describes a model transformers can build.
// The MoE layers a checkpoint's config.json states.
absl::Status checkMoeInfo(const plan::ModelInfo &model) {
  const plan::MoeInfo &moe = model.moe();
  if (model.family() != "llama" ||
      (moe.naming() != "mixtral" && moe.naming() != "deepseek_v3"))
    return refuse(absl::StrCat(
        "plan.model.moe.naming is \"", absl::CEscape(moe.naming()), "\" in a ",
        model.family(),
        " model: experts are named mixtral or deepseek_v3, in llama models"));
  if (moe.num_experts() < 2 || moe.top_k() < 1 ||
      moe.top_k() > moe.num_experts())
    return refuse(absl::StrCat("plan.model.moe has ", moe.num_experts(),
                               " experts and top_k ", moe.top_k(),
                               ": at least 2 experts, top_k 1 to that"));
  if (moe.expert_ffn_hidden_size() < 1 || moe.num_shared_experts() < 0 ||
      (moe.num_shared_experts() > 0 && moe.shared_ffn_hidden_size() < 1) ||
      moe.first_k_dense() < 0 || moe.first_k_dense() >= model.num_layers())
    return refuse(absl::StrCat(
        "plan.model.moe: expert width ", moe.expert_ffn_hidden_size(), ", ",
        moe.num_shared_experts(), " shared experts of width ",
        moe.shared_ffn_hidden_size(), ", ", moe.first_k_dense(),
        " dense layers of ", model.num_layers(),
        ": widths are positive and at least one layer has experts"));
  if (!nonNegativeFinite(moe.routed_scaling_factor()) ||
      !nonNegativeFinite(moe.aux_loss_coeff()) ||
      !nonNegativeFinite(moe.z_loss_coeff()))
    return refuse("plan.model.moe: the scaling factor and loss coefficients "
                  "must be finite and non-negative");
  if (moe.hot_experts() < 0 || moe.hot_experts() > moe.num_experts() ||
      moe.adaptive_recompute_rows() < 0)
    return refuse(absl::StrCat(
        "plan.model.moe: ", moe.hot_experts(), " hot experts of ",
        moe.num_experts(), " and ", moe.adaptive_recompute_rows(),
        " rows kept by adaptive recompute: 0 (off) or positive, at most "
        "num_experts hot experts"));
  return absl::OkStatus();
}

absl::Status checkModel(const plan::ModelInfo &model) {
  if (model.vocab_size() <= 0 || model.vocab_size() > (int64_t{1} << 31))
    return refuse(absl::StrCat("plan.model.vocab_size is ", model.vocab_size(),
                               ": it must be in [1, 2^31]"));
  if (!nonNegativeFinite(model.flops_per_token()))
    return refuse(absl::StrCat("plan.model.flops_per_token is ",
                               model.flops_per_token(),
                               ": it must be finite and non-negative"));
  const bool llama = model.family() == "llama";
  if (!llama && model.family() != "gpt2")
    return refuse(absl::StrCat("plan.model.family is \"",
                               absl::CEscape(model.family()),
                               "\": it must be llama or gpt2"));
  const struct {
    const char *name;
    int64_t value;
  } sizes[] = {{"hidden_size", model.hidden_size()},
               {"num_layers", model.num_layers()},
               {"num_heads", model.num_heads()},
               {"num_kv_heads", model.num_kv_heads()},
               {"ffn_hidden_size", model.ffn_hidden_size()},
               {"num_parameters", model.num_parameters()},
               {"head_dim", model.head_dim()}};
  for (const auto &size : sizes)
    if (size.value < 0)
      return refuse(absl::StrCat("plan.model.", size.name, " is ", size.value,
                                 ": it must be non-negative"));
  if (model.max_position_embeddings() <= 0)
    return refuse(absl::StrCat("plan.model.max_position_embeddings is ",
                               model.max_position_embeddings(),
                               ": it must be positive"));
  const plan::ModelInfo::Activation activation =
      llama ? plan::ModelInfo::SWIGLU : plan::ModelInfo::GELU_TANH;
  if (model.activation() != activation)
    return refuse(absl::StrCat(
        "plan.model.activation is ",
        enumValue(plan::ModelInfo::Activation_Name(model.activation()),
                  model.activation()),
        ": a ", model.family(), " model computes ",
        plan::ModelInfo::Activation_Name(activation)));
  if (!positiveFinite(model.norm_eps()))
    return refuse(absl::StrCat("plan.model.norm_eps is ", model.norm_eps(),
                               ": it must be finite and positive"));
  if (llama ? !positiveFinite(model.rope_theta()) : model.rope_theta() != 0)
    return refuse(
        absl::StrCat("plan.model.rope_theta is ", model.rope_theta(), ": ",
                     llama ? "a llama model needs a finite positive RoPE base"
                           : "a gpt2 model has no RoPE, so it must be 0"));
  for (const auto &[name, p] :
       {std::pair<const char *, double>{"hidden_dropout",
                                        model.hidden_dropout()},
        {"attention_dropout", model.attention_dropout()}})
    if (!(p >= 0 && p < 1))
      return refuse(absl::StrCat("plan.model.", name, " is ", p,
                                 ": a dropout probability is in [0, 1)"));
  if (model.has_moe())
    return checkMoeInfo(model);
  return absl::OkStatus();
}

} // namespace

absl::Status checkHeader(const plan::Plan &plan, bool streams) {
  if (plan.format_version() != kPlanFormatVersion) {
    if (plan.format_version() > kPlanFormatVersion)
      return refuse(absl::StrCat(
          "plan.format_version is ", plan.format_version(),
          " but this runtime reads version ", kPlanFormatVersion,
          ": the plan was written by a newer braidc; use the braid-run of "
          "the same release"));
    return refuse(absl::StrCat(
        "plan.format_version is ", plan.format_version(),
        " but this runtime reads version ", kPlanFormatVersion,
        ": the plan was written by an older braidc (or is not a plan); "
        "recompile the spec"));
  }
  if (!streams) {
    if (absl::Status s = checkMesh(plan.mesh()); !s.ok())
      return s;
    return checkModel(plan.model());
  }
  if (plan.num_streams() == 0)
    return refuse("plan.num_streams is 0: a plan needs at least one stream");
  if (plan.num_streams() > kMaxStreams)
    return refuse(absl::StrCat("plan.num_streams is ", plan.num_streams(),
                               ", more than the ", kMaxStreams,
                               " streams this runtime supports"));
  if (plan.num_events() > kMaxEvents)
    return refuse(absl::StrCat("plan.num_events is ", plan.num_events(),
                               ", more than the ", kMaxEvents,
                               " events this runtime supports"));
  // Host streams (plan.proto Plan.host_streams): launches there run on
  // the host CPU; stream 0 is the compute stream, never one of them.
  for (int k = 0; k < plan.host_streams_size(); ++k) {
    const uint32_t s = plan.host_streams(k);
    if (s == 0)
      return refuse(absl::StrCat(
          "plan.host_streams[", k,
          "] is stream 0, the compute stream: a host stream is another "
          "stream, whose launches run on the host CPU"));
    if (s >= plan.num_streams())
      return refuse(absl::StrCat("plan.host_streams[", k, "] is stream ", s,
                                 ", which is not below plan.num_streams = ",
                                 plan.num_streams()));
    for (int j = 0; j < k; ++j)
      if (plan.host_streams(j) == s)
        return refuse(absl::StrCat("plan.host_streams[", k, "] is stream ", s,
                                   ", which is also plan.host_streams[", j,
                                   "]"));
  }
  if (absl::Status s = checkMesh(plan.mesh()); !s.ok())
    return s;
  return checkModel(plan.model());
}

absl::Status checkTrainConfig(const plan::Plan &plan) {
  const plan::TrainConfig &t = plan.train();
  if (t.micro_batch_size() <= 0)
    return refuse(absl::StrCat("plan.train.micro_batch_size is ",
                               t.micro_batch_size(), ": it must be positive"));
  if (t.num_micro_batches() <= 0)
    return refuse(absl::StrCat("plan.train.num_micro_batches is ",
                               t.num_micro_batches(), ": it must be positive"));
  if (t.seq_len() <= 0)
    return refuse(absl::StrCat("plan.train.seq_len is ", t.seq_len(),
                               ": it must be positive"));
  if (t.steps() <= 0)
    return refuse(absl::StrCat("plan.train.steps is ", t.steps(),
                               ": it must be positive"));
  // Sample indices are (step * M + m) * B + b; keep them in 64 bits.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (t.num_micro_batches() > kMax / t.micro_batch_size() ||
      t.steps() > kMax / (t.num_micro_batches() * t.micro_batch_size()))
    return refuse("plan.train.steps * num_micro_batches * micro_batch_size "
                  "does not fit in 64 bits: reduce the steps or the batch");
  if (!positiveFinite(t.lr()))
    return refuse(absl::StrCat("plan.train.lr is ", t.lr(),
                               ": it must be finite and positive"));
  if (!(t.min_lr() >= 0 && t.min_lr() <= t.lr()))
    return refuse(absl::StrCat("plan.train.min_lr is ", t.min_lr(),
                               ": it must be in [0, lr = ", t.lr(), "]"));
  if (!(t.beta1() >= 0 && t.beta1() < 1))
    return refuse(absl::StrCat("plan.train.beta1 is ", t.beta1(),
                               ": it must be in [0, 1)"));
  if (!(t.beta2() >= 0 && t.beta2() < 1))
    return refuse(absl::StrCat("plan.train.beta2 is ", t.beta2(),
                               ": it must be in [0, 1)"));
  if (!positiveFinite(t.eps()))
    return refuse(absl::StrCat("plan.train.eps is ", t.eps(),
                               ": it must be finite and positive"));
  if (!nonNegativeFinite(t.weight_decay()))
    return refuse(absl::StrCat("plan.train.weight_decay is ", t.weight_decay(),
                               ": it must be finite and non-negative"));
  if (!nonNegativeFinite(t.grad_clip()))
    return refuse(absl::StrCat("plan.train.grad_clip is ", t.grad_clip(),
                               ": it must be finite and non-negative "
                               "(0 disables clipping)"));
  if (t.warmup_steps() < 0)
    return refuse(absl::StrCat("plan.train.warmup_steps is ", t.warmup_steps(),
                               ": it must be non-negative"));
  if (t.decay() != plan::TrainConfig::COSINE &&
      t.decay() != plan::TrainConfig::CONSTANT)
    return refuse(absl::StrCat("plan.train.decay is ",
                               enumValue(plan::TrainConfig::LrDecay_Name(
                                             t.decay()),
                                         t.decay()),
                               ": it must be COSINE or CONSTANT"));
  if (t.precision() != plan::TrainConfig::FP32 &&
      t.precision() != plan::TrainConfig::BF16)
    return refuse(absl::StrCat("plan.train.precision is ",
                               enumValue(plan::TrainConfig::Precision_Name(
                                             t.precision()),
                                         t.precision()),
                               ": it must be FP32 or BF16"));
  return absl::OkStatus();
}

} // namespace braid::plan_checks
