// model.moe and parallel.expert_parallel (docs/moe.md): the defaults a
// loaded spec gets, and every rule's refusal with what to change.
#include <string>

#include <gmock/gmock.h>

#include "absl/strings/str_cat.h"

#include "compiler/spec/SpecSizes.h"
#include "test/unit/spec/SpecTestSupport.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

// kLlama with `moe { <fields> }` as the model's last line (line 13),
// `naming` for its naming, and `parallel { <parallel> }` when given.
std::string withMoe(std::string_view fields, std::string_view parallel = "",
                    std::string_view naming = "HF_DEEPSEEK_V3") {
  std::string text = edit(kLlama, "  naming: HF_LLAMA\n}",
                          "  naming: " + std::string(naming) + "\n  moe { " +
                              std::string(fields) + " }\n}");
  if (!parallel.empty())
    text += "parallel { " + std::string(parallel) + " }\n";
  return text;
}

spec::ModelSpec loaded(std::string_view text) {
  absl::StatusOr<spec::ModelSpec> spec = loadSpecText(text, "t.pbtxt");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : spec::ModelSpec();
}

TEST(MoeRules, AMixtralAndADeepSeekStyleBlockLoad) {
  EXPECT_EQ(errorOf(withMoe("num_experts: 8 top_k: 2 normalize_top_k: true")),
            "(loaded)");
  EXPECT_EQ(errorOf(withMoe(
                "num_experts: 16 top_k: 4 score: SIGMOID normalize_top_k: "
                "true routed_scaling_factor: 2.5 expert_bias: true "
                "expert_bias_update_rate: 0.001 num_shared_experts: 1 "
                "first_k_dense: 1 expert_ffn_hidden_size: 64 aux_loss_coeff: "
                "0.001",
                "data_parallel: 4 expert_parallel: 4")),
            "(loaded)");
  EXPECT_EQ(errorOf(withMoe("num_experts: 4 top_k: 1 capacity_factor: 1.25")),
            "(loaded)");
}

// The experts' tensors have names under HF_MIXTRAL and HF_DEEPSEEK_V3
// only, and Mixtral's have no shared experts, bias or dense layers.
TEST(MoeRules, NamingsMatchTheExperts) {
  EXPECT_EQ(errorOf(withMoe("num_experts: 8 top_k: 2", "", "HF_MIXTRAL")),
            "(loaded)");
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2", "", "HF_LLAMA")),
              HasSubstr("model.naming: HF_LLAMA checkpoints hold no experts; "
                        "a model with moe { ... } needs naming: HF_MIXTRAL "
                        "or HF_DEEPSEEK_V3"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 num_shared_experts: 1",
                              "", "HF_MIXTRAL")),
              HasSubstr("model.moe.num_shared_experts: needs naming "
                        "HF_DEEPSEEK_V3: Mixtral checkpoints hold a router "
                        "and routed experts only"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 first_k_dense: 1", "",
                              "HF_MIXTRAL")),
              HasSubstr("model.moe.first_k_dense: needs naming "
                        "HF_DEEPSEEK_V3"));
  EXPECT_THAT(
      errorOf(edit(kLlama, "naming: HF_LLAMA", "naming: HF_MIXTRAL")),
      HasSubstr("model.naming: HF_MIXTRAL names the tensors of "
                "mixture-of-experts layers, but the model has none; add "
                "model.moe { ... } or set naming: HF_LLAMA"));
}

TEST(MoeRules, Defaults) {
  spec::ModelSpec s = loaded(withMoe("num_experts: 8 top_k: 2"));
  const spec::Moe &m = s.model().moe();
  EXPECT_EQ(m.score(), spec::SOFTMAX);
  EXPECT_EQ(m.routed_scaling_factor(), 1.0);
  EXPECT_EQ(m.expert_ffn_hidden_size(), 172);
  EXPECT_EQ(m.shared_ffn_hidden_size(), 172);
  EXPECT_EQ(s.parallel().expert_parallel(), 1);
  spec::ModelSpec w =
      loaded(withMoe("num_experts: 8 top_k: 2 expert_ffn_hidden_size: 32"));
  EXPECT_EQ(w.model().moe().shared_ffn_hidden_size(), 32);
}

TEST(MoeRules, RefusesTopKAboveTheExperts) {
  EXPECT_EQ(errorOf(withMoe("num_experts: 8 top_k: 9")),
            "t.pbtxt:13:24: model.moe.top_k: 9 is above num_experts 8: a "
            "token goes to each expert at most once; set 1 to 8");
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 0")),
              HasSubstr("model.moe.top_k: 0 is not a number of experts per "
                        "token; set 1 to 8"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8")),
              HasSubstr("model.moe.top_k: missing; set how many experts each "
                        "token goes to, e.g. top_k: 2"));
}

TEST(MoeRules, RefusesTooFewOrTooManyExperts) {
  EXPECT_THAT(errorOf(withMoe("top_k: 1")),
              HasSubstr("model.moe.num_experts: missing; set the number of "
                        "routed experts, e.g. num_experts: 8"));
  for (const char *n : {"1", "-4", "65537"})
    EXPECT_THAT(errorOf(withMoe(absl::StrCat("num_experts: ", n, " top_k: 1"))),
                HasSubstr(absl::StrCat("model.moe.num_experts: ", n,
                                       " is not a number of routed experts; "
                                       "a mixture has 2 to 65536")))
        << n;
}

// Expert parallel splits the experts evenly, within data parallel.
TEST(MoeRules, RefusesExpertsNotDivisibleByExpertParallel) {
  EXPECT_THAT(errorOf(withMoe("num_experts: 6 top_k: 2",
                              "data_parallel: 4 expert_parallel: 4")),
              HasSubstr("parallel.expert_parallel: 4 ranks do not divide "
                        "num_experts 6: each expert-parallel rank holds an "
                        "equal share; set a divisor of 6"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2",
                              "data_parallel: 2 expert_parallel: 4")),
              HasSubstr("parallel.expert_parallel: 4 does not divide "
                        "data_parallel 2: expert-parallel groups are made of "
                        "data-parallel ranks; set a divisor of 2 that "
                        "divides num_experts 8"));
  EXPECT_THAT(errorOf(std::string(kLlama) +
                      "parallel { data_parallel: 2 expert_parallel: 2 }\n"),
              HasSubstr("parallel.expert_parallel: 2 expert-parallel ranks, "
                        "but the model has no experts; add model.moe { ... } "
                        "or set expert_parallel: 1"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2",
                              "expert_parallel: -1")),
              HasSubstr("parallel.expert_parallel: -1 is not a number of "
                        "ranks; set 1 to 65536 expert-parallel ranks"));
}

// Hiding the exchanges needs exchanges.
TEST(MoeRules, RefusesExchangeOverlapWithoutExpertParallel) {
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2",
                              "data_parallel: 2 ep_comm_overlap: true")),
              HasSubstr("parallel.ep_comm_overlap: applies to expert "
                        "parallel's exchanges; set expert_parallel above 1 "
                        "or remove it"));
  EXPECT_THAT(errorOf(std::string(kLlama) +
                      "parallel { data_parallel: 2 ep_comm_overlap: true }\n"),
              HasSubstr("parallel.ep_comm_overlap: applies to expert "
                        "parallel's exchanges, but the model has no experts; "
                        "remove it"));
  EXPECT_TRUE(loaded(withMoe("num_experts: 8 top_k: 2",
                             "data_parallel: 2 expert_parallel: 2 "
                             "ep_comm_overlap: true"))
                  .parallel()
                  .ep_comm_overlap());
}

// Sub-units cut expert parallel's exchanges along the sequence (16 in
// kLlama); each sub-unit's dropless bound is over its own tokens.
TEST(MoeRules, SubUnitsNeedExpertParallelAndDivideTheSequence) {
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2",
                              "data_parallel: 2 ep_sub_units: 2")),
              HasSubstr("parallel.ep_sub_units: cuts expert parallel's "
                        "exchanges into parts; set expert_parallel above 1 "
                        "or remove it"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2",
                              "data_parallel: 2 expert_parallel: 2 "
                              "ep_sub_units: 3")),
              HasSubstr("parallel.ep_sub_units: 3 sub-units do not divide "
                        "train.seq_len 16: each takes an equal part of the "
                        "sequence; set a divisor of 16"));
  // Under context parallel a CP rank's 8 positions are cut.
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2",
                              "data_parallel: 2 expert_parallel: 2 "
                              "context_parallel: 2 ep_sub_units: 16")),
              HasSubstr("parallel.ep_sub_units: 16 sub-units do not divide "
                        "the 8 positions a context-parallel rank holds of "
                        "train.seq_len 16: each takes an equal part of them; "
                        "set a divisor of 8"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2",
                              "data_parallel: 2 expert_parallel: 2 "
                              "ep_sub_units: 128")),
              HasSubstr("parallel.ep_sub_units: 128 sub-units of an MoE "
                        "layer are too many; set 1 to 64"));
  EXPECT_THAT(errorOf(std::string(kLlama) +
                      "parallel { data_parallel: 2 ep_sub_units: 2 }\n"),
              HasSubstr("parallel.ep_sub_units: cuts expert parallel's "
                        "exchanges into parts, but the model has no experts; "
                        "remove it"));
  // kLlama's micro-batch is 32 tokens: EP 2, top_k 2 of 8 experts, the
  // worst case is 2 x 32 x 2 = 128 rows, 32 for each of four sub-units;
  // dropless_bound 1.5 asks 1.5 x 8 x 2 = 24 of each.
  const spec::ModelSpec four =
      loaded(withMoe("num_experts: 8 top_k: 2",
                     "data_parallel: 2 expert_parallel: 2 ep_sub_units: 4"));
  EXPECT_EQ(moeSubUnits(four), 4);
  EXPECT_EQ(moeDroplessBound(four), 32);
  EXPECT_EQ(moeDroplessBound(loaded(withMoe(
                "num_experts: 8 top_k: 2 dropless_bound: 1.5",
                "data_parallel: 2 expert_parallel: 2 ep_sub_units: 4"))),
            24);
  EXPECT_EQ(
      moeDroplessBound(loaded(withMoe("num_experts: 8 top_k: 2",
                                      "data_parallel: 2 expert_parallel: 2"))),
      128);
  // Adaptive recompute keeps a factor of a sub-unit's mean rows, 16 x 2.
  EXPECT_EQ(moeAdaptiveRows(loaded(withMoe(
                "num_experts: 8 top_k: 2 adaptive_recompute: 1.25",
                "data_parallel: 2 expert_parallel: 2 ep_sub_units: 2"))),
            40);
}

// kLlama's micro-batch is 32 tokens: under EP 2 with top_k 2 of 8 experts
// the mean is 64 rows and the worst case 128.
TEST(MoeRules, AdaptiveRecomputeNeedsDroplessExpertParallelBelowTheBound) {
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 adaptive_recompute: 1",
                              "data_parallel: 2")),
              HasSubstr("model.moe.adaptive_recompute: without expert "
                        "parallel a rank's experts take exactly its tokens x "
                        "top_k rows"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 adaptive_recompute: 1 "
                              "capacity_factor: 2",
                              "data_parallel: 2 expert_parallel: 2")),
              HasSubstr("model.moe.adaptive_recompute: applies to dropless "
                        "experts, but capacity_factor is set"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 adaptive_recompute: 2",
                              "data_parallel: 2 expert_parallel: 2")),
              HasSubstr("model.moe.adaptive_recompute: 2 keeps 128 rows, as "
                        "many as the plan holds for what a rank receives "
                        "(128, the dropless bound), so it never recomputes; "
                        "set a factor below 2 or remove it"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 dropless_bound: 1.5 "
                              "adaptive_recompute: 1.5",
                              "data_parallel: 2 expert_parallel: 2")),
              HasSubstr("set a factor below 1.5 or remove it"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 adaptive_recompute: -1",
                              "data_parallel: 2 expert_parallel: 2")),
              HasSubstr("model.moe.adaptive_recompute:"));
  EXPECT_EQ(errorOf(withMoe("num_experts: 8 top_k: 2 adaptive_recompute: 1.25",
                            "data_parallel: 2 expert_parallel: 2")),
            "(loaded)");
}

TEST(MoeRules, ReplicationNeedsDroplessExpertParallel) {
  const char *ep2 = "data_parallel: 2 expert_parallel: 2";
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 hot_experts: 1",
                              "data_parallel: 2")),
              HasSubstr("model.moe.hot_experts: replicates experts that "
                        "expert parallel splits over ranks"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 hot_experts: 1 "
                              "capacity_factor: 2",
                              ep2)),
              HasSubstr("model.moe.hot_experts: applies to dropless experts"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 hot_experts: 9", ep2)),
              HasSubstr("model.moe.hot_experts: 9 is not a number of experts "
                        "to replicate; set 1 to 8, or 0 for off"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 hot_experts: 1 "
                              "replication_threshold: 0.5",
                              ep2)),
              HasSubstr("model.moe.replication_threshold: 0.5 is below 1"));
  EXPECT_THAT(
      errorOf(withMoe("num_experts: 8 top_k: 2 replication_threshold: 2", ep2)),
      HasSubstr("model.moe.replication_threshold: applies to hot-expert "
                "replication; set hot_experts or remove it"));
  // With adaptive recompute: the replicas' GEMMs keep their rows.
  EXPECT_EQ(errorOf(withMoe("num_experts: 8 top_k: 2 hot_experts: 1 "
                            "adaptive_recompute: 1",
                            ep2)),
            "(loaded)");
  EXPECT_EQ(errorOf(withMoe("num_experts: 8 top_k: 2 hot_experts: 2 "
                            "replication_threshold: 1.5",
                            ep2)),
            "(loaded)");
}

// kLlama's micro-batch is 2 x 16 = 32 tokens: 64 experts, top_k 1 and a
// factor of 1 give each expert 0.5 slots.
TEST(MoeRules, RefusesACapacityBelowOneToken) {
  EXPECT_THAT(errorOf(withMoe("num_experts: 64 top_k: 1 capacity_factor: 1")),
              HasSubstr("model.moe.capacity_factor: 1 gives each expert no "
                        "room for one token: 1 x 32 tokens of a micro-batch "
                        "x top_k 1 / 64 experts = 0.5; set capacity_factor "
                        "to at least 2, or 0 for dropless"));
  EXPECT_EQ(errorOf(withMoe("num_experts: 64 top_k: 1 capacity_factor: 2")),
            "(loaded)");
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 capacity_factor: -1")),
              HasSubstr("model.moe.capacity_factor:"));
  EXPECT_THAT(errorOf(withMoe(
                  "num_experts: 8 top_k: 2 capacity_factor: 1 "
                  "dropless_bound: 2")),
              HasSubstr("model.moe.dropless_bound: bounds the tokens of "
                        "dropless experts, but capacity_factor is set"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 dropless_bound: 0.5")),
              HasSubstr("model.moe.dropless_bound: 0.5 is below the mean "
                        "load; set 1 or more, or 0 for the worst case"));
}

TEST(MoeRules, RefusesWhatTheLayersCannotBe) {
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 first_k_dense: 2")),
              HasSubstr("model.moe.first_k_dense: 2 dense layers of 2 leave "
                        "no layer to the experts; set 0 to 1, or remove moe "
                        "{ ... } for a dense model"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 first_k_dense: -1")),
              HasSubstr("model.moe.first_k_dense: -1 is not a number of "
                        "layers; set 0 or more"));
  EXPECT_THAT(
      errorOf(edit(withMoe("num_experts: 8 top_k: 2"), "activation: SWIGLU",
                   "activation: GELU")),
      HasSubstr("model.activation: experts are SwiGLU FFNs: a model with moe "
                "{ ... } needs activation: SWIGLU"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 num_shared_experts: 65")),
              HasSubstr("model.moe.num_shared_experts: 65 is not a number of "
                        "shared experts; set 0 to 64"));
  EXPECT_THAT(
      errorOf(withMoe("num_experts: 8 top_k: 2 expert_ffn_hidden_size: -3")),
      HasSubstr("model.moe.expert_ffn_hidden_size: -3 is not an inner width; "
                "set 1 to 16777216, or 0 for ffn_hidden_size"));
}

TEST(MoeRules, RefusesBadBalancingSettings) {
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 aux_loss_coeff: -0.1")),
              HasSubstr("model.moe.aux_loss_coeff:"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 z_loss_coeff: nan")),
              HasSubstr("model.moe.z_loss_coeff:"));
  EXPECT_THAT(errorOf(withMoe(
                  "num_experts: 8 top_k: 2 expert_bias_update_rate: 0.01")),
              HasSubstr("model.moe.expert_bias_update_rate: moves the expert "
                        "bias, which is off; set expert_bias: true, or leave "
                        "the rate out"));
  EXPECT_THAT(errorOf(withMoe("num_experts: 8 top_k: 2 score: 7")),
              HasSubstr("model.moe.score:"));
  EXPECT_THAT(
      errorOf(withMoe("num_experts: 8 top_k: 2 routed_scaling_factor: -1")),
      HasSubstr("model.moe.routed_scaling_factor:"));
}

} // namespace
} // namespace braid::test
