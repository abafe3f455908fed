#include "compiler/spec/SpecSizes.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {
namespace {

// An int64 that becomes empty once a sum or product overflows.
class Checked {
public:
  Checked(int64_t value) : value_(value) {}

  friend Checked operator*(Checked a, Checked b) {
    int64_t out;
    if (!a.value_ || !b.value_ ||
        __builtin_mul_overflow(*a.value_, *b.value_, &out))
      return overflow();
    return out;
  }
  friend Checked operator+(Checked a, Checked b) {
    int64_t out;
    if (!a.value_ || !b.value_ ||
        __builtin_add_overflow(*a.value_, *b.value_, &out))
      return overflow();
    return out;
  }

  bool overflowed() const { return !value_; }
  int64_t value() const { return *value_; }

private:
  static Checked overflow() {
    Checked c(0);
    c.value_.reset();
    return c;
  }

  std::optional<int64_t> value_;
};

Checked countParameters(const spec::Architecture &m) {
  Checked d = m.hidden_size();
  Checked headDim = m.hidden_size() / m.num_heads();
  Checked q = headDim * m.num_heads();
  Checked kv = headDim * m.num_kv_heads();
  bool bias = m.linear_bias();
  // q, k, v and output projections.
  Checked attention = d * q + d * kv * 2 + q * d;
  if (bias)
    attention = attention + q + kv * 2 + d;
  Checked f = m.ffn_hidden_size();
  Checked mlp = m.activation() == spec::SWIGLU ? d * f * 3 : d * f * 2;
  if (bias)
    mlp = mlp + (m.activation() == spec::SWIGLU ? f * 2 : f) + d;
  // RMSNorm has a weight; LayerNorm a weight and a bias.
  Checked norm = m.norm() == spec::LAYER_NORM ? d * 2 : d;
  Checked layer = attention + mlp + norm * 2;
  Checked embeddings = d * m.vocab_size();
  if (m.position_embedding() == spec::LEARNED)
    embeddings = embeddings + d * m.max_position_embeddings();
  Checked head = m.tie_embeddings() ? Checked(0) : d * m.vocab_size();
  Checked layers = layer * m.num_layers();
  if (m.has_moe()) {
    // An MoE layer: the router [E, D], E SwiGLU experts and the shared
    // experts in place of the MLP (the expert bias is not trained).
    const spec::Moe &moe = m.moe();
    const int64_t moeLayers = m.num_layers() - moe.first_k_dense();
    Checked experts =
        Checked(moe.num_experts()) * d * moe.expert_ffn_hidden_size() * 3;
    Checked shared = Checked(moe.num_shared_experts()) * d *
                     moe.shared_ffn_hidden_size() * 3;
    Checked moeLayer =
        attention + norm * 2 + d * moe.num_experts() + experts + shared;
    layers = layer * moe.first_k_dense() + moeLayer * moeLayers;
  }
  return embeddings + layers + norm + head;
}

// fp32 weight, gradient and the two AdamW moments.
constexpr int64_t kTrainingBytesPerParameter = 16;
constexpr int64_t kActivationBytes = 4;

} // namespace

double moeTokensPerMicroBatch(const spec::ModelSpec &spec) {
  const int64_t cp = std::max<int64_t>(1, spec.parallel().context_parallel());
  return static_cast<double>(spec.train().micro_batch_size()) *
         static_cast<double>(spec.train().seq_len()) / static_cast<double>(cp);
}

int64_t moeSubUnits(const spec::ModelSpec &spec) {
  if (!spec.model().has_moe() || spec.parallel().expert_parallel() < 2)
    return 1;
  return std::max<int64_t>(1, spec.parallel().ep_sub_units());
}

double moeUnitTokens(const spec::ModelSpec &spec) {
  return moeTokensPerMicroBatch(spec) / static_cast<double>(moeSubUnits(spec));
}

int64_t moeCapacity(const spec::ModelSpec &spec) {
  const spec::Moe &moe = spec.model().moe();
  if (!spec.model().has_moe() || moe.capacity_factor() <= 0 ||
      moe.num_experts() < 1)
    return 0;
  return static_cast<int64_t>(
      std::floor(moe.capacity_factor() * moeTokensPerMicroBatch(spec) *
                 static_cast<double>(moe.top_k()) /
                 static_cast<double>(moe.num_experts())));
}

int64_t moeDroplessBound(const spec::ModelSpec &spec) {
  const spec::Moe &moe = spec.model().moe();
  const int64_t ep = spec.parallel().expert_parallel();
  if (!spec.model().has_moe() || ep < 2 || moe.capacity_factor() > 0 ||
      moe.num_experts() % ep != 0)
    return 0;
  // Each sub-unit's exchange has its own bound, over its part of the
  // tokens.
  const double tokens = moeUnitTokens(spec);
  const double worst =
      static_cast<double>(ep) * tokens *
      static_cast<double>(std::min(moe.top_k(), moe.num_experts() / ep));
  if (moe.dropless_bound() <= 0)
    return static_cast<int64_t>(worst);
  const double bound = std::ceil(moe.dropless_bound() * tokens *
                                 static_cast<double>(moe.top_k()));
  return static_cast<int64_t>(std::min(bound, worst));
}

int64_t moeAdaptiveRows(const spec::ModelSpec &spec) {
  const double factor = spec.model().moe().adaptive_recompute();
  if (moeDroplessBound(spec) == 0 || factor <= 0)
    return 0;
  return static_cast<int64_t>(
      std::ceil(factor * moeUnitTokens(spec) *
                static_cast<double>(spec.model().moe().top_k())));
}

int64_t moeHotSlots(const spec::ModelSpec &spec) {
  if (moeDroplessBound(spec) == 0)
    return 0;
  return std::max<int64_t>(0, spec.model().moe().hot_experts());
}

int64_t moeHotRows(const spec::ModelSpec &spec) {
  const int64_t slots = moeHotSlots(spec);
  if (slots == 0)
    return 0;
  return static_cast<int64_t>(moeTokensPerMicroBatch(spec)) *
         std::min(spec.model().moe().top_k(), slots);
}

double moeReplicationThreshold(const spec::ModelSpec &spec) {
  const double t = spec.model().moe().replication_threshold();
  return t > 0 ? t : 1.25;
}

absl::StatusOr<int64_t> parameterCount(const spec::Architecture &model) {
  if (model.vocab_size() <= 0 || model.hidden_size() <= 0 ||
      model.num_layers() <= 0 || model.num_heads() <= 0 ||
      model.num_kv_heads() <= 0 || model.ffn_hidden_size() <= 0 ||
      model.max_position_embeddings() < 0)
    return absl::InvalidArgumentError(
        "parameterCount needs a validated architecture: every size "
        "positive");
  Checked count = countParameters(model);
  if (count.overflowed())
    return absl::OutOfRangeError("the parameter count overflows int64");
  return count.value();
}

void validateSizes(const spec::ModelSpec &spec, RuleSink &sink) {
  const spec::Architecture &m = spec.model();
  const spec::Training &t = spec.train();
  Checked params = countParameters(m);
  if (params.overflowed()) {
    sink.report("model",
                "the parameter count overflows a 64-bit integer; "
                "vocab_size, hidden_size, ffn_hidden_size and num_layers "
                "describe no trainable model, so check them for typos");
  } else if ((params * kTrainingBytesPerParameter).overflowed()) {
    sink.report(
        "model",
        absl::StrCat("the training state of ", params.value(),
                     " parameters (16 bytes each: fp32 weight, gradient "
                     "and two AdamW moments) overflows a 64-bit byte "
                     "count; check the sizes for typos"));
  }
  // The widest activations of a layer: logits, the SwiGLU gate and up
  // projections, fused q/k/v, and attention scores.
  Checked rows = Checked(t.micro_batch_size()) * t.seq_len();
  Checked bytes = Checked(kActivationBytes) * rows;
  if ((bytes * m.vocab_size()).overflowed() ||
      (bytes * m.ffn_hidden_size() * 2).overflowed() ||
      (bytes * m.hidden_size() * 3).overflowed() ||
      (bytes * m.num_heads() * t.seq_len()).overflowed())
    sink.report(
        "train.seq_len",
        "the activations of one micro-batch (micro_batch_size x seq_len "
        "rows of logits, MLP and attention scores, 4 bytes each) "
        "overflow a 64-bit byte count; reduce seq_len or "
        "micro_batch_size");
  Checked tokens = Checked(t.steps()) * t.global_batch_size() * t.seq_len();
  if (tokens.overflowed())
    sink.report("train.steps",
                "the tokens of the run (steps x global_batch_size x seq_len) "
                "overflow a 64-bit integer; reduce steps");
}

} // namespace braid
