// The rules of model.moe and parallel.expert_parallel (docs/moe.md): the
// router's counts, the experts' widths, the balancing settings, the
// capacity, and how the experts split over expert-parallel ranks.
#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/spec/SpecSizes.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {
namespace {

constexpr int64_t kMaxExperts = 65536;
constexpr int64_t kMaxSharedExperts = 64;
constexpr int64_t kMaxWidth = int64_t{1} << 24;

class MoeRules {
public:
  MoeRules(const spec::ModelSpec &spec, RuleSink &sink)
      : spec_(spec), m_(spec.model().moe()), sink_(sink) {}

  void run() {
    const bool experts = checkExperts();
    if (experts)
      checkTopK();
    checkWidth(m_.expert_ffn_hidden_size(), "expert_ffn_hidden_size",
               "ffn_hidden_size");
    checkWidth(m_.shared_ffn_hidden_size(), "shared_ffn_hidden_size",
               "expert_ffn_hidden_size");
    checkEnumSet(m_.score(), spec::RouterScore_descriptor(), path("score"),
                 sink_);
    checkFloat(m_.routed_scaling_factor(), FloatRange::kNonNegative,
               path("routed_scaling_factor"),
               "set the factor the chosen experts' weights are multiplied "
               "by, e.g. 2.5, or 0 for 1",
               sink_);
    checkBalancing();
    if (m_.num_shared_experts() < 0 ||
        m_.num_shared_experts() > kMaxSharedExperts)
      sink_.report(path("num_shared_experts"),
                   absl::StrCat(m_.num_shared_experts(),
                                " is not a number of shared experts; set 0 "
                                "to ",
                                kMaxSharedExperts));
    checkFirstDense();
    if (spec_.model().activation() != spec::SWIGLU &&
        spec_.model().activation() != spec::ACTIVATION_UNSPECIFIED)
      sink_.report("model.activation",
                   "experts are SwiGLU FFNs: a model with moe { ... } needs "
                   "activation: SWIGLU");
    if (experts && m_.top_k() >= 1 && m_.top_k() <= m_.num_experts())
      checkCapacity();
    if (experts)
      checkExpertParallel();
    checkNaming();
  }

  // The MoE layers' tensors exist under the Mixtral and DeepSeek-V3
  // namings only; Mixtral's model class has no shared experts, no expert
  // bias and no dense layers.
  void checkNaming() {
    const spec::CheckpointNaming naming = spec_.model().naming();
    if (naming == spec::HF_LLAMA || naming == spec::HF_GPT2) {
      sink_.report("model.naming",
                   absl::StrCat(spec::CheckpointNaming_Name(naming),
                                " checkpoints hold no experts; a model with "
                                "moe { ... } needs naming: HF_MIXTRAL or "
                                "HF_DEEPSEEK_V3"));
      return;
    }
    if (naming != spec::HF_MIXTRAL)
      return;
    const char *why =
        "Mixtral checkpoints hold a router and routed experts only; set "
        "naming: HF_DEEPSEEK_V3, or remove the line";
    if (m_.num_shared_experts() > 0)
      sink_.report(path("num_shared_experts"),
                   absl::StrCat("needs naming HF_DEEPSEEK_V3: ", why));
    if (m_.expert_bias())
      sink_.report(path("expert_bias"),
                   absl::StrCat("needs naming HF_DEEPSEEK_V3: ", why));
    if (m_.first_k_dense() > 0)
      sink_.report(path("first_k_dense"),
                   absl::StrCat("needs naming HF_DEEPSEEK_V3: ", why));
  }

private:
  static std::string path(const char *field) {
    return absl::StrCat("model.moe.", field);
  }

  bool checkExperts() {
    if (!sink_.written(path("num_experts"))) {
      sink_.report(path("num_experts"),
                   "missing; set the number of routed experts, e.g. "
                   "num_experts: 8");
      return false;
    }
    if (m_.num_experts() < 2 || m_.num_experts() > kMaxExperts) {
      sink_.report(path("num_experts"),
                   absl::StrCat(m_.num_experts(),
                                " is not a number of routed experts; a "
                                "mixture has 2 to ",
                                kMaxExperts));
      return false;
    }
    return true;
  }

  void checkTopK() {
    const int64_t k = m_.top_k(), e = m_.num_experts();
    if (!sink_.written(path("top_k")))
      sink_.report(path("top_k"), "missing; set how many experts each token "
                                  "goes to, e.g. top_k: 2");
    else if (k > e)
      sink_.report(path("top_k"),
                   absl::StrCat(k, " is above num_experts ", e,
                                ": a token goes to each expert at most "
                                "once; set 1 to ",
                                e));
    else if (k < 1)
      sink_.report(path("top_k"),
                   absl::StrCat(k, " is not a number of experts per token; "
                                   "set 1 to ",
                                e));
  }

  void checkWidth(int64_t width, const char *field, const char *fallback) {
    if (width < 0 || width > kMaxWidth)
      sink_.report(path(field),
                   absl::StrCat(width, " is not an inner width; set 1 to ",
                                kMaxWidth, ", or 0 for ", fallback));
  }

  void checkBalancing() {
    checkFloat(m_.aux_loss_coeff(), FloatRange::kNonNegative,
               path("aux_loss_coeff"),
               "set the load-balancing loss's coefficient, e.g. 0.01, or 0 "
               "for none",
               sink_);
    checkFloat(m_.z_loss_coeff(), FloatRange::kNonNegative,
               path("z_loss_coeff"),
               "set the router z-loss's coefficient, e.g. 0.001, or 0 for "
               "none",
               sink_);
    if (checkFloat(m_.expert_bias_update_rate(), FloatRange::kNonNegative,
                   path("expert_bias_update_rate"),
                   "set how far each step moves the expert bias, e.g. "
                   "0.001",
                   sink_) &&
        m_.expert_bias_update_rate() > 0 && !m_.expert_bias())
      sink_.report(path("expert_bias_update_rate"),
                   "moves the expert bias, which is off; set expert_bias: "
                   "true, or leave the rate out");
  }

  void checkFirstDense() {
    const int64_t first = m_.first_k_dense(),
                  layers = spec_.model().num_layers();
    if (first < 0)
      sink_.report(path("first_k_dense"),
                   absl::StrCat(first, " is not a number of layers; set 0 "
                                       "or more"));
    else if (layers >= 1 && first >= layers)
      sink_.report(path("first_k_dense"),
                   absl::StrCat(first, " dense layers of ", layers,
                                " leave no layer to the experts; set 0 to ",
                                layers - 1,
                                ", or remove moe { ... } for a dense model"));
  }

  // A capacity of floor(factor * tokens * k / E) tokens per expert holds
  // at least one.
  void checkCapacity() {
    const double factor = m_.capacity_factor();
    if (!checkFloat(factor, FloatRange::kNonNegative, path("capacity_factor"),
                    "set 0 (dropless) or a factor such as 1.25",
                    sink_))
      return;
    const double bound = m_.dropless_bound();
    if (checkFloat(bound, FloatRange::kNonNegative, path("dropless_bound"),
                   "set 0 (the worst case) or a factor of the mean such as "
                   "2",
                   sink_)) {
      if (bound > 0 && factor > 0)
        sink_.report(path("dropless_bound"),
                     "bounds the tokens of dropless experts, but "
                     "capacity_factor is set (capacity mode drops what "
                     "does not fit); leave one of the two out");
      else if (bound > 0 && bound < 1)
        sink_.report(path("dropless_bound"),
                     absl::StrCat(bound, " is below the mean load; set 1 "
                                         "or more, or 0 for the worst case"));
    }
    const spec::Training &t = spec_.train();
    if (factor == 0 || t.micro_batch_size() < 1 || t.seq_len() < 1)
      return;
    const double tokens = moeTokensPerMicroBatch(spec_);
    const double slots = factor * tokens * m_.top_k() / m_.num_experts();
    if (slots >= 1)
      return;
    const double least = m_.num_experts() / (tokens * m_.top_k());
    sink_.report(path("capacity_factor"),
                 absl::StrCat(formatFloat(factor),
                              " gives each expert no room for one token: ",
                              formatFloat(factor), " x ",
                              static_cast<int64_t>(tokens),
                              " tokens of a micro-batch x top_k ",
                              m_.top_k(), " / ", m_.num_experts(),
                              " experts = ", formatFloat(slots),
                              "; set capacity_factor to at least ",
                              formatFloat(least), ", or 0 for dropless"));
  }

  // Adaptive recompute keeps at most a number of rows below the dropless
  // bound, which only expert parallel's dropless experts have.
  void checkAdaptiveRecompute() {
    const double factor = m_.adaptive_recompute();
    if (!checkFloat(factor, FloatRange::kNonNegative,
                    path("adaptive_recompute"),
                    "set 0 (off) or a factor of the mean rows such as 1.25",
                    sink_) ||
        factor == 0)
      return;
    if (spec_.parallel().expert_parallel() <= 1) {
      sink_.report(path("adaptive_recompute"),
                   "without expert parallel a rank's experts take exactly "
                   "its tokens x top_k rows, so there is nothing to adapt "
                   "to; set parallel.expert_parallel above 1 or remove it");
      return;
    }
    if (m_.capacity_factor() > 0) {
      sink_.report(path("adaptive_recompute"),
                   "applies to dropless experts, but capacity_factor is set "
                   "(every rank's experts then take the same rows); leave "
                   "one of the two out");
      return;
    }
    const int64_t kept = moeAdaptiveRows(spec_);
    const int64_t bound = moeDroplessBound(spec_);
    if (bound == 0 || kept < bound)
      return;
    // The bound as a factor of the mean rows, as adaptive_recompute is.
    const double boundFactor =
        static_cast<double>(bound) /
        (moeUnitTokens(spec_) * static_cast<double>(m_.top_k()));
    sink_.report(path("adaptive_recompute"),
                 absl::StrCat(formatFloat(factor), " keeps ", kept,
                              " rows, as many as the plan holds for what a "
                              "rank receives (", bound,
                              ", the dropless bound), so it never "
                              "recomputes; set a factor below ",
                              formatFloat(boundFactor), " or remove it"));
  }

  // Hot-expert replication moves rows that expert parallel would send,
  // so it needs expert parallel's dropless experts.
  void checkReplication() {
    const int64_t slots = m_.hot_experts();
    const double threshold = m_.replication_threshold();
    if (threshold != 0 &&
        (!checkFloat(threshold, FloatRange::kNonNegative,
                     path("replication_threshold"),
                     "set the busiest rank's rows over the mean above which "
                     "hot experts are replicated, e.g. 1.25",
                     sink_) ||
         threshold < 1)) {
      if (threshold > 0 && threshold < 1)
        sink_.report(path("replication_threshold"),
                     absl::StrCat(formatFloat(threshold),
                                  " is below 1, but the busiest rank always "
                                  "receives at least the mean; set 1 or "
                                  "more, e.g. 1.25"));
      return;
    }
    if (slots == 0) {
      if (threshold != 0)
        sink_.report(path("replication_threshold"),
                     "applies to hot-expert replication; set hot_experts "
                     "or remove it");
      return;
    }
    if (slots < 0 || slots > m_.num_experts()) {
      sink_.report(path("hot_experts"),
                   absl::StrCat(slots, " is not a number of experts to "
                                       "replicate; set 1 to ",
                                m_.num_experts(), ", or 0 for off"));
      return;
    }
    if (spec_.parallel().expert_parallel() <= 1) {
      sink_.report(path("hot_experts"),
                   "replicates experts that expert parallel splits over "
                   "ranks; set parallel.expert_parallel above 1 or remove it");
      return;
    }
    if (m_.capacity_factor() > 0) {
      sink_.report(path("hot_experts"),
                   "applies to dropless experts, but capacity_factor is set "
                   "(every rank's experts then take the same rows); leave "
                   "one of the two out");
      return;
    }
  }

  void checkSubUnits() {
    const spec::ParallelLayout &p = spec_.parallel();
    const int64_t units = p.ep_sub_units(), seq = spec_.train().seq_len();
    if (units <= 1)
      return;
    if (units > 64) {
      sink_.report("parallel.ep_sub_units",
                   absl::StrCat(units, " sub-units of an MoE layer are too "
                                       "many; set 1 to 64"));
      return;
    }
    if (p.expert_parallel() <= 1) {
      sink_.report("parallel.ep_sub_units",
                   "cuts expert parallel's exchanges into parts; set "
                   "expert_parallel above 1 or remove it");
      return;
    }
    // Under context parallel the parts are of a CP rank's positions.
    const int64_t cp = std::max<int64_t>(1, p.context_parallel());
    if (seq <= 0 || seq % cp != 0 || (seq / cp) % units == 0)
      return;
    const std::string held =
        cp == 1 ? absl::StrCat("train.seq_len ", seq)
                : absl::StrCat("the ", seq / cp,
                               " positions a context-parallel rank holds of "
                               "train.seq_len ",
                               seq);
    sink_.report("parallel.ep_sub_units",
                 absl::StrCat(units, " sub-units do not divide ", held,
                              ": each takes an equal part of ",
                              cp == 1 ? "the sequence" : "them",
                              "; set a divisor of ", seq / cp));
  }

  void checkExpertParallel() {
    const spec::ParallelLayout &p = spec_.parallel();
    const int64_t ep = p.expert_parallel();
    checkAdaptiveRecompute();
    checkReplication();
    checkSubUnits();
    if (ep <= 1) {
      if (p.ep_comm_overlap())
        sink_.report("parallel.ep_comm_overlap",
                     "applies to expert parallel's exchanges; set "
                     "expert_parallel above 1 or remove it");
      return;
    }
    const int64_t e = m_.num_experts(), dp = p.data_parallel();
    if (e % ep != 0)
      sink_.report("parallel.expert_parallel",
                   absl::StrCat(ep, " ranks do not divide num_experts ", e,
                                ": each expert-parallel rank holds an equal "
                                "share; set a divisor of ",
                                e));
    else if (dp >= 1 && dp % ep != 0)
      sink_.report("parallel.expert_parallel",
                   absl::StrCat(ep, " does not divide data_parallel ", dp,
                                ": expert-parallel groups are made of "
                                "data-parallel ranks; set a divisor of ",
                                dp, " that divides num_experts ", e));
  }

  const spec::ModelSpec &spec_;
  const spec::Moe &m_;
  RuleSink &sink_;
};

} // namespace

void validateMoe(const spec::ModelSpec &spec, RuleSink &sink) {
  const int64_t ep = spec.parallel().expert_parallel();
  if (ep < 0 || ep > 65536) {
    sink.report("parallel.expert_parallel",
                absl::StrCat(ep, " is not a number of ranks; set 1 to 65536 "
                                 "expert-parallel ranks"));
    return;
  }
  if (!spec.model().has_moe()) {
    const spec::CheckpointNaming naming = spec.model().naming();
    if (naming == spec::HF_MIXTRAL || naming == spec::HF_DEEPSEEK_V3)
      sink.report("model.naming",
                  absl::StrCat(spec::CheckpointNaming_Name(naming),
                               " names the tensors of mixture-of-experts "
                               "layers, but the model has none; add "
                               "model.moe { ... } or set naming: HF_LLAMA"));
    if (spec.parallel().ep_sub_units() > 1)
      sink.report("parallel.ep_sub_units",
                  "cuts expert parallel's exchanges into parts, but the "
                  "model has no experts; remove it");
    if (spec.parallel().ep_comm_overlap())
      sink.report("parallel.ep_comm_overlap",
                  "applies to expert parallel's exchanges, but the model "
                  "has no experts; remove it");
    if (ep > 1)
      sink.report("parallel.expert_parallel",
                  absl::StrCat(ep, " expert-parallel ranks, but the model "
                                   "has no experts; add model.moe { ... } "
                                   "or set expert_parallel: 1"));
    return;
  }
  MoeRules(spec, sink).run();
}

} // namespace braid
