// Validation rules of `train`: each rule's full message, line:column and
// field path.
#include "compiler/spec/RecomputePolicy.h"
#include "test/unit/spec/SpecTestSupport.h"

namespace braid::test {
namespace {

// kLlama with its `adamw { lr: 1e-3 }` line replaced.
std::string withAdamw(std::string_view adamw) {
  return edit(kLlama, "adamw { lr: 1e-3 }", adamw);
}

// kLlama with `extra` written after `steps: 10` (line 17, column 13).
std::string withTrain(std::string_view extra) {
  return edit(kLlama, "steps: 10", "steps: 10 " + std::string(extra));
}

TEST(TrainRules, MissingCounts) {
  EXPECT_EQ(errorOf(edit(kLlama, "  micro_batch_size: 2\n", "")),
            "t.pbtxt:14:1: train.micro_batch_size: missing; set the sequences "
            "per micro-batch, e.g. micro_batch_size: 8");
  EXPECT_EQ(errorOf(edit(kLlama, "  seq_len: 16\n", "")),
            "t.pbtxt:14:1: train.seq_len: missing; set the tokens per "
            "sequence, e.g. seq_len: 2048");
  EXPECT_EQ(errorOf(edit(kLlama, "  steps: 10\n", "")),
            "t.pbtxt:14:1: train.steps: missing; set the optimizer steps of "
            "the run, e.g. steps: 1000");
}

TEST(TrainRules, NonPositiveCounts) {
  EXPECT_EQ(
      errorOf(edit(kLlama, "micro_batch_size: 2", "micro_batch_size: -2")),
      "t.pbtxt:15:3: train.micro_batch_size: -2 is not positive; set "
      "the sequences per micro-batch, e.g. micro_batch_size: 8");
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "steps: 0")),
            "t.pbtxt:17:3: train.steps: 0 is not positive; set the optimizer "
            "steps of the run, e.g. steps: 1000");
}

TEST(TrainRules, GlobalBatchNotPositive) {
  EXPECT_EQ(errorOf(withTrain("global_batch_size: -4")),
            "t.pbtxt:17:13: train.global_batch_size: -4 is not positive; set "
            "the sequences per optimizer step (a multiple of "
            "micro_batch_size), or remove the line to use micro_batch_size");
}

TEST(TrainRules, GlobalBatchMultipleOfMicroBatch) {
  EXPECT_EQ(errorOf(withTrain("global_batch_size: 5")),
            "t.pbtxt:17:13: train.global_batch_size: 5 is not a multiple of "
            "micro_batch_size 2; each step accumulates global_batch_size / "
            "micro_batch_size whole micro-batches, so use 4 or 6");
  EXPECT_EQ(errorOf(withTrain("global_batch_size: 1")),
            "t.pbtxt:17:13: train.global_batch_size: 1 is not a multiple of "
            "micro_batch_size 2; each step accumulates global_batch_size / "
            "micro_batch_size whole micro-batches, so use 2");
}

TEST(TrainRules, GlobalBatchMultipleOfEveryDataParallelRanksMicroBatch) {
  const std::string spec =
      withTrain("global_batch_size: 6") + "parallel { data_parallel: 2 }\n";
  EXPECT_EQ(errorOf(spec),
            "t.pbtxt:17:13: train.global_batch_size: 6 is not a multiple of "
            "micro_batch_size 2 x data_parallel 2; each data-parallel rank "
            "accumulates the same number of whole micro-batches, so use 4 or "
            "8");
}

TEST(TrainRules, MissingAdamw) {
  EXPECT_EQ(errorOf(edit(kLlama, "  adamw { lr: 1e-3 }\n", "")),
            "t.pbtxt:14:1: train.adamw: missing; set at least the peak "
            "learning rate, e.g. adamw { lr: 3e-4 }");
}

TEST(TrainRules, LearningRate) {
  EXPECT_EQ(errorOf(withAdamw("adamw { }")),
            "t.pbtxt:18:3: train.adamw.lr: missing; set the peak learning "
            "rate, e.g. lr: 3e-4");
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 0 }")),
            "t.pbtxt:18:11: train.adamw.lr: 0 is not positive; set the peak "
            "learning rate, e.g. lr: 3e-4");
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: -1e-3 }")),
            "t.pbtxt:18:11: train.adamw.lr: -0.001 is not positive; set the "
            "peak learning rate, e.g. lr: 3e-4");
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: inf }")),
            "t.pbtxt:18:11: train.adamw.lr: inf is not a finite number; set "
            "the peak learning rate, e.g. lr: 3e-4");
}

TEST(TrainRules, Betas) {
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 1e-3 beta1: 1 }")),
            "t.pbtxt:18:20: train.adamw.beta1: 1 is outside [0, 1); beta1 is "
            "a decay rate, typically 0.9; remove the line for the default "
            "0.9");
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 1e-3 beta2: -0.5 }")),
            "t.pbtxt:18:20: train.adamw.beta2: -0.5 is outside [0, 1); beta2 "
            "is a decay rate, typically 0.95 or 0.999; remove the line for "
            "the default 0.95");
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 1e-3 beta1: nan }")),
            "t.pbtxt:18:20: train.adamw.beta1: nan is not a finite number; "
            "beta1 is a decay rate, typically 0.9; remove the line for the "
            "default 0.9");
}

TEST(TrainRules, AdamEpsilon) {
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 1e-3 eps: -1e-8 }")),
            "t.pbtxt:18:20: train.adamw.eps: -1e-08 is not positive; set a "
            "small epsilon such as 1e-8, or remove the line for the default "
            "1e-8");
  // Decimals are doubles, but kernels compute in fp32.
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 1e-3 eps: 1e-60 }")),
            "t.pbtxt:18:20: train.adamw.eps: 1e-60 is too small for fp32 (it "
            "rounds to 0); set a small epsilon such as 1e-8, or remove the "
            "line for the default 1e-8");
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 1e-3 eps: 1e39 }")),
            "t.pbtxt:18:20: train.adamw.eps: 1e+39 is beyond the range of "
            "fp32 (about 3.4e+38); set a small epsilon such as 1e-8, or "
            "remove the line for the default 1e-8");
}

TEST(TrainRules, WeightDecay) {
  EXPECT_EQ(errorOf(withAdamw("adamw { lr: 1e-3 weight_decay: -0.1 }")),
            "t.pbtxt:18:20: train.adamw.weight_decay: -0.1 is negative; set "
            "0 for no decay or a positive value such as 0.1");
}

TEST(TrainRules, GradClip) {
  EXPECT_EQ(errorOf(withTrain("grad_clip: -1")),
            "t.pbtxt:17:13: train.grad_clip: -1 is negative; set 0 for no "
            "clipping or a maximum gradient norm such as 1.0");
  EXPECT_EQ(errorOf(withTrain("grad_clip: nan")),
            "t.pbtxt:17:13: train.grad_clip: nan is not a finite number; set "
            "0 for no clipping or a maximum gradient norm such as 1.0");
}

TEST(TrainRules, WarmupSteps) {
  EXPECT_EQ(errorOf(withTrain("lr_schedule { warmup_steps: -1 }")),
            "t.pbtxt:17:27: train.lr_schedule.warmup_steps: -1 is negative; "
            "set 0 for no warm-up or the number of warm-up steps");
  EXPECT_EQ(errorOf(withTrain("lr_schedule { warmup_steps: 11 }")),
            "t.pbtxt:17:27: train.lr_schedule.warmup_steps: 11 exceeds steps "
            "10; warm-up must end by the last step, so use at most 10");
}

TEST(TrainRules, WarmupMayFillTheRun) {
  EXPECT_EQ(errorOf(withTrain("lr_schedule { warmup_steps: 10 }")), "(loaded)");
}

TEST(TrainRules, UnknownDecayNumber) {
  EXPECT_EQ(errorOf(withTrain("lr_schedule { decay: 5 }")),
            "t.pbtxt:17:27: train.lr_schedule.decay: 5 is not a valid "
            "LRDecay; write COSINE or CONSTANT");
}

TEST(TrainRules, UnknownPrecisionNumber) {
  EXPECT_EQ(errorOf(withTrain("precision: 3")),
            "t.pbtxt:17:13: train.precision: 3 is not a valid Precision; "
            "write FP32 or BF16");
}

TEST(TrainRules, MinLr) {
  EXPECT_EQ(errorOf(withTrain("lr_schedule { min_lr: -1e-4 }")),
            "t.pbtxt:17:27: train.lr_schedule.min_lr: -0.0001 is negative; "
            "set the final learning rate of the cosine decay, 0 or a "
            "positive value below adamw.lr");
  EXPECT_EQ(errorOf(withTrain("lr_schedule { min_lr: 1e-2 }")),
            "t.pbtxt:17:27: train.lr_schedule.min_lr: 0.01 exceeds adamw.lr "
            "0.001; cosine decay goes down from lr to min_lr, so use at most "
            "0.001");
}

TEST(TrainRules, MinLrOnlyWithCosine) {
  EXPECT_EQ(errorOf(withTrain("lr_schedule { decay: CONSTANT min_lr: 1e-4 "
                              "}")),
            "t.pbtxt:17:43: train.lr_schedule.min_lr: applies to COSINE decay "
            "only, but decay is CONSTANT; remove the line or set decay: "
            "COSINE");
}

TEST(TrainRules, Dropouts) {
  EXPECT_EQ(errorOf(withTrain("hidden_dropout: 1")),
            "t.pbtxt:17:13: train.hidden_dropout: 1 is outside [0, 1); it is "
            "the probability of zeroing an activation; set 0 for no dropout "
            "or a value such as 0.1");
  EXPECT_EQ(errorOf(withTrain("attention_dropout: -0.1")),
            "t.pbtxt:17:13: train.attention_dropout: -0.1 is outside [0, 1); "
            "it is the probability of zeroing an attention weight; set 0 for "
            "no dropout or a value such as 0.1");
}

TEST(TrainRules, ActivationsOverflow) {
  std::string text = edit(kLlama, "seq_len: 16", "seq_len: 2147483648");
  EXPECT_EQ(errorOf(text),
            "t.pbtxt:16:3: train.seq_len: the activations of one micro-batch "
            "(micro_batch_size x seq_len rows of logits, MLP and attention "
            "scores, 4 bytes each) overflow a 64-bit byte count; reduce "
            "seq_len or micro_batch_size");
}

TEST(TrainRules, TokensOfRunOverflow) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "steps: 4611686018427387904")),
            "t.pbtxt:17:3: train.steps: the tokens of the run (steps x "
            "global_batch_size x seq_len) overflow a 64-bit integer; reduce "
            "steps");
}

// kLlama loads with each of `values` as compile.`field`.
void expectCompileLoads(const std::string &field,
                        std::initializer_list<const char *> values) {
  for (const char *ok : values)
    EXPECT_EQ(errorOf(std::string(kLlama) + "compile { " + field + ": \"" +
                      ok + "\" }\n"),
              "(loaded)")
        << field << ": " << ok;
}

// compile.fusion: "all", "none", empty or known names separated by commas;
// "all" may stand beside names, "none" may not.
TEST(CompileRules, FusionList) {
  const std::string spec(kLlama);
  expectCompileLoads("fusion", {"all", "none", "", "add-norm",
                                " add-norm , bias-gelu", "all,gqa",
                                "rope-qkv,add-norm,bias-gelu,bias-swiglu,"
                                "bias-dropout-add"});
  EXPECT_EQ(errorOf(spec + "compile { fusion: \"add-norm,bias-gleu\" }\n"),
            "t.pbtxt:20:11: compile.fusion: \"bias-gleu\" is not a fusion; "
            "write \"all\", \"none\" or names separated by commas from: gqa, "
            "flash-attention, rope-qkv, add-norm, bias-gelu, bias-swiglu, "
            "bias-dropout-add, linear-cross-entropy, moe, adamw");
  EXPECT_EQ(errorOf(spec + "compile {\n  fusion: \"add-norm,,bias-gelu\"\n}\n"),
            "t.pbtxt:21:3: compile.fusion: an empty name is not a fusion; "
            "write \"all\", \"none\" or names separated by commas from: gqa, "
            "flash-attention, rope-qkv, add-norm, bias-gelu, bias-swiglu, "
            "bias-dropout-add, linear-cross-entropy, moe, adamw");
  EXPECT_EQ(errorOf(spec + "compile { fusion: \"none,gqa\" }\n"),
            "t.pbtxt:20:11: compile.fusion: \"none\" cannot stand beside "
            "fusions; write \"none\" alone for no fusion");
}

// compile.recompute: a policy, or op kinds separated by commas.
TEST(CompileRules, RecomputePolicy) {
  const std::string spec(kLlama);
  expectCompileLoads("recompute",
                     {"", "none", "full", "selective", "uniform-2", "block-1",
                      "norm", " norm , activation ", "rope,add",
                      "full|selective|none"});
  EXPECT_EQ(errorOf(spec + "compile { recompute: \"uniform-0\" }\n"),
            "t.pbtxt:20:11: compile.recompute: 'uniform-0' needs a number of "
            "layers from 1 to 1048576 after the dash; use none, auto, full, "
            "selective, uniform-N, block-N (N a number of layers, 1 or more), "
            "or op kinds separated by commas: norm, activation, attention, "
            "moe-light, moe-medium, moe-full or forward op names such as "
            "rms_norm or rope");
  EXPECT_EQ(errorOf(spec + "compile { recompute: \"norm,,rope\" }\n"),
            "t.pbtxt:20:11: compile.recompute: 'norm,,rope' has an empty op "
            "kind; use none, auto, full, selective, uniform-N, block-N (N a number "
            "of layers, 1 or more), or op kinds separated by commas: norm, "
            "activation, attention, moe-light, moe-medium, moe-full or forward "
            "op names such as rms_norm or rope");
  const std::string unknown =
      errorOf(spec + "compile { recompute: \"full|norm,softmax\" }\n");
  EXPECT_EQ(unknown.rfind("t.pbtxt:20:11: compile.recompute: 'softmax' is not "
                          "a recompute policy or an op kind; use none, auto, "
                          "full,",
                          0),
            0u)
      << unknown;
  EXPECT_EQ(errorOf(spec + "compile { recompute: \"auto|full\" }\n"),
            "t.pbtxt:20:11: compile.recompute: 'auto|full': auto chooses the "
            "policy of every pipeline rank, so it stands alone; write 'auto', "
            "or a policy for each rank");
}

// compile.memory_budget_gb: GiB per rank, 0 for none; auto needs one.
TEST(CompileRules, MemoryBudget) {
  const std::string spec(kLlama);
  EXPECT_EQ(errorOf(spec + "compile { recompute: \"auto\" }\n"),
            "t.pbtxt:20:11: compile.recompute: auto chooses under a memory "
            "budget; set compile.memory_budget_gb (GiB per rank), e.g. "
            "memory_budget_gb: 80");
  EXPECT_EQ(errorOf(spec + "compile { memory_budget_gb: -1 }\n"),
            "t.pbtxt:20:11: compile.memory_budget_gb: -1 is negative; give "
            "the device memory of one rank in GiB, e.g. 80, or 0 for no "
            "budget");
  EXPECT_EQ(errorOf(spec + "compile { memory_budget_gb: 1e12 }\n"),
            "t.pbtxt:20:11: compile.memory_budget_gb: 1e+12 GiB is beyond the "
            "2^32 GiB an arena can address; give the device memory of one "
            "rank");
  for (const char *gib : {"0", "80", "0.5"})
    EXPECT_EQ(errorOf(spec + "compile { memory_budget_gb: " + gib + " }\n"),
              "(loaded)")
        << gib;
  EXPECT_EQ(
      errorOf(spec + "compile { recompute: \"auto\" memory_budget_gb: 40 }\n"),
      "(loaded)");
}

// The parsed policies: groups stand for their fused and unfused op kinds.
TEST(RecomputePolicy, ParsesEveryForm) {
  using Kind = RecomputePolicy::Kind;
  EXPECT_EQ(parseRecomputePolicy("")->kind, Kind::kNone);
  EXPECT_EQ(parseRecomputePolicy(" auto ")->kind, Kind::kAuto);
  EXPECT_EQ(parseRecomputePolicy("full")->kind, Kind::kFull);
  EXPECT_EQ(parseRecomputePolicy("full")->layers, 1);
  EXPECT_EQ(parseRecomputePolicy("uniform-3")->kind, Kind::kUniform);
  EXPECT_EQ(parseRecomputePolicy("uniform-3")->layers, 3);
  EXPECT_EQ(parseRecomputePolicy("block-2")->kind, Kind::kBlock);
  EXPECT_EQ(parseRecomputePolicy("block-2")->layers, 2);
  EXPECT_EQ(parseRecomputePolicy("selective")->ops,
            (std::vector<std::string>{"attention", "flash_attention"}));
  EXPECT_EQ(parseRecomputePolicy("activation, rope, swiglu")->ops,
            (std::vector<std::string>{"swiglu", "gelu", "fused_bias_swiglu",
                                      "fused_bias_gelu", "rope"}));
  // The MoE levels count inside MoE blocks only ("moe:" kinds).
  EXPECT_EQ(
      parseRecomputePolicy("moe-light")->ops,
      (std::vector<std::string>{
          "moe:moe_route", "moe:moe_scores", "moe:moe_topk", "moe:moe_permute",
          "moe:moe_sort", "moe:moe_gather", "moe:moe_gather_choices",
          "moe:moe_split_tokens", "moe:swiglu", "moe:fused_bias_swiglu"}));
  EXPECT_EQ(parseRecomputePolicy("moe-full")->ops,
            (std::vector<std::string>{"moe:*"}));
  EXPECT_EQ(parseRecomputePolicy("moe-medium")->ops.size(), 13u);
  EXPECT_FALSE(parseRecomputePolicy("block-x").ok());
  EXPECT_FALSE(parseRecomputePolicy("uniform-").ok());
  EXPECT_FALSE(parseRecomputePolicy("full,norm").ok());
}

} // namespace
} // namespace braid::test
