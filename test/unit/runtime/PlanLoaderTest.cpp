// Every validation rule of the plan loader: a valid tiny plan broken in one
// place at a time, and the sentence that must come back.
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "runtime/plan/PlanLoader.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::testKernelRegistry;
using test::tinyModelPlan;
using test::TinyModelOptions;

absl::Status load(const plan::Plan &p) {
  return loadPlan(p.SerializeAsString(), testKernelRegistry(), Device::kCPU)
      .status();
}

plan::Tensor &named(plan::Plan &p, const std::string &name) {
  for (plan::Tensor &t : *p.mutable_tensors())
    if (t.name() == name)
      return t;
  ADD_FAILURE() << "no tensor " << name;
  return *p.mutable_tensors(0);
}

plan::Program &program(plan::Plan &p, const std::string &name) {
  for (plan::Program &prog : *p.mutable_programs())
    if (prog.name() == name)
      return prog;
  ADD_FAILURE() << "no program " << name;
  return *p.mutable_programs(0);
}

// Breaks the tiny plan with `mutate` and expects a refusal containing
// `fragment`.
void expectRefused(const std::function<void(plan::Plan &)> &mutate,
                   const std::string &fragment,
                   const TinyModelOptions &options = {}) {
  plan::Plan p = tinyModelPlan(options);
  mutate(p);
  absl::Status s = load(p);
  ASSERT_FALSE(s.ok()) << "expected a refusal containing: " << fragment;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find(fragment), std::string::npos)
      << "message: " << s.message() << "\nexpected to contain: " << fragment;
}

TEST(PlanLoader, AcceptsTheTinyPlanAndResolvesIt) {
  test::TinyModelOptions options;
  options.twoStreams = true;
  plan::Plan p = tinyModelPlan(options);
  absl::StatusOr<LoadedPlan> loaded =
      loadPlan(p.SerializeAsString(), testKernelRegistry(), Device::kCPU);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->descs.size(), static_cast<size_t>(p.tensors_size()));
  EXPECT_EQ(loaded->parameters.size(), 3u);
  EXPECT_EQ(loaded->tokens, named(p, "tokens").id());
  EXPECT_EQ(loaded->labels, named(p, "labels").id());
  EXPECT_FALSE(loaded->positions.has_value());
  ASSERT_NE(loaded->program(plan::STEP), nullptr);
  EXPECT_EQ(loaded->program(plan::INIT), nullptr);
  EXPECT_EQ(loaded->findTensor("lm_head.weight"),
            named(p, "lm_head.weight").id());
  EXPECT_FALSE(loaded->findTensor("nope").has_value());
  // Each wait names the value its event's latest record set: event 0
  // rises 1..4 (two hand-offs per micro-batch), event 1 to 2.
  int waits = 0;
  uint64_t latest[2] = {0, 0};
  for (const LoadedInstruction &inst :
       loaded->program(plan::STEP)->instructions) {
    if (inst.kind == LoadedInstruction::Kind::kRecord) {
      ASSERT_LT(inst.event, 2u);
      EXPECT_EQ(inst.value, latest[inst.event] + 1);
      latest[inst.event] = inst.value;
    }
    if (inst.kind == LoadedInstruction::Kind::kWait) {
      ASSERT_LT(inst.event, 2u);
      EXPECT_EQ(inst.value, latest[inst.event]);
      ++waits;
    }
    if (inst.kind == LoadedInstruction::Kind::kLaunch) {
      EXPECT_NE(inst.kernel, nullptr);
    }
  }
  EXPECT_EQ(waits, 6); // three per micro-batch
  EXPECT_EQ(latest[0], 4u);
  EXPECT_EQ(latest[1], 2u);
}

TEST(PlanLoader, AWaitMayNameAnEarlierValueOfItsTimeline) {
  plan::Plan p = tinyModelPlan();
  plan::Program &mb = program(p, "step");
  p.set_num_events(1);
  for (uint64_t v : {1, 3})
    mb.add_instructions()->mutable_record()->set_value(v);
  plan::Instruction *w = mb.add_instructions();
  w->mutable_wait()->set_value(1);
  absl::StatusOr<LoadedPlan> loaded =
      loadPlan(p.SerializeAsString(), testKernelRegistry(), Device::kCPU);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->program(plan::STEP)->instructions.back().value, 1u);
}

TEST(PlanLoader, RefusesBytesThatAreNotAPlan) {
  absl::Status s =
      loadPlan("\xff\xff\xff\xff", testKernelRegistry(), Device::kCPU).status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("does not parse as a braid.plan.Plan"),
            std::string::npos)
      << s;
}

TEST(PlanLoader, RefusesInvalidUtf8Quietly) {
  // A proto3 string must be UTF-8; protobuf refuses the parse and would log
  // its own complaint, which must not reach the user.
  plan::Plan p = tinyModelPlan();
  named(p, "x.0").set_name("bad\xff");
  std::string bytes;
  {
    google::protobuf::LogSilencer quiet; // serialising complains too
    bytes = p.SerializeAsString();
  }
  ::testing::internal::CaptureStderr();
  absl::Status s = loadPlan(bytes, testKernelRegistry(), Device::kCPU).status();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(std::string(s.message()).find("does not parse as a braid.plan.Plan"),
            std::string::npos)
      << s;
}

// Appends to the step program a mark of `part` of stage 1, micro-batch
// `mb`, on stream 0.
void addMark(plan::Plan &p, plan::SchedulePart part, bool end,
             uint32_t mb = 0, const std::string &name = "step") {
  plan::Instruction *inst = program(p, name).add_instructions();
  inst->mutable_mark()->set_part(part);
  inst->mutable_mark()->set_stage(1);
  inst->mutable_mark()->set_micro_batch(mb);
  inst->mutable_mark()->set_end(end);
}

TEST(PlanLoader, AcceptsPairedMarksAndResolvesThem) {
  plan::Plan p = tinyModelPlan();
  addMark(p, plan::PART_B, false, 1);
  addMark(p, plan::PART_B, true, 1);
  absl::StatusOr<LoadedPlan> loaded =
      loadPlan(p.SerializeAsString(), testKernelRegistry(), Device::kCPU);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  int steps = 0;
  for (const LoadedProgram &prog : loaded->programs) {
    if (prog.kind != plan::STEP)
      continue;
    ++steps;
    const LoadedInstruction &end = prog.instructions.back();
    const LoadedInstruction &begin =
        prog.instructions[prog.instructions.size() - 2];
    EXPECT_EQ(begin.kind, LoadedInstruction::Kind::kMark);
    EXPECT_FALSE(begin.end);
    EXPECT_TRUE(end.end);
    EXPECT_EQ(end.part, plan::PART_B);
    EXPECT_EQ(end.stage, 1u);
    EXPECT_EQ(end.microBatch, 1);
  }
  EXPECT_EQ(steps, 1);
}

TEST(PlanLoader, RefusesMarksThatDoNotPair) {
  expectRefused([](plan::Plan &p) { addMark(p, plan::PART_F, false); },
                "the mark of F of stage 1 micro-batch 0 on stream 0 has no "
                "end");
  expectRefused([](plan::Plan &p) { addMark(p, plan::PART_F, true); },
                "ends the mark of F of stage 1 micro-batch 0 on stream 0, "
                "where none was begun");
  expectRefused(
      [](plan::Plan &p) {
        addMark(p, plan::PART_F, false);
        addMark(p, plan::PART_W, true);
      },
      "ends the mark of W of stage 1 micro-batch 0 on stream 0, where F of "
      "stage 1 micro-batch 0 was begun");
  expectRefused(
      [](plan::Plan &p) {
        addMark(p, plan::PART_F, false);
        addMark(p, plan::PART_F, false, 1);
      },
      "begins the mark of F of stage 1 micro-batch 1 inside the mark of F "
      "of stage 1 micro-batch 0 on the same stream");
  expectRefused(
      [](plan::Plan &p) { addMark(p, plan::PART_UNSPECIFIED, false); },
      "the mark's part is PART_UNSPECIFIED; it must be PART_F, PART_B or "
      "PART_W");
  expectRefused([](plan::Plan &p) { addMark(p, plan::PART_F, false, 99); },
                "marks micro-batch 99 but a step has "
                "plan.train.num_micro_batches = ");
  test::TinyModelOptions bf16;
  bf16.weightCopies = true;
  expectRefused(
      [](plan::Plan &p) { addMark(p, plan::PART_F, false, 0, "init"); },
      "only the STEP program marks its schedule", bf16);
}

TEST(PlanLoader, RefusesOtherFormatVersions) {
  const uint32_t v = kPlanFormatVersion;
  auto refusal = [&](uint32_t given, const char *who) {
    return absl::StrCat("plan.format_version is ", given,
                        " but this runtime reads version ", v,
                        ": the plan was written by ", who, " braidc");
  };
  expectRefused([&](plan::Plan &p) { p.set_format_version(v + 1); },
                refusal(v + 1, "a newer"));
  // Version 6 had no schedule marks; version 5 no pipeline transfers.
  expectRefused([&](plan::Plan &p) { p.set_format_version(v - 1); },
                refusal(v - 1, "an older"));
  expectRefused([](plan::Plan &p) { p.set_format_version(5); },
                refusal(5, "an older"));
  expectRefused([](plan::Plan &p) { p.set_format_version(0); },
                refusal(0, "an older"));
  // An empty byte string parses as an all-default plan: version 0.
  absl::Status s = loadPlan("", testKernelRegistry(), Device::kCPU).status();
  EXPECT_NE(std::string(s.message()).find("format_version is 0"),
            std::string::npos);
}

TEST(PlanLoader, RefusesBadStreamAndEventCounts) {
  expectRefused([](plan::Plan &p) { p.set_num_streams(0); },
                "plan.num_streams is 0");
  expectRefused([](plan::Plan &p) { p.set_num_streams(65); },
                "plan.num_streams is 65, more than the 64 streams");
  expectRefused([](plan::Plan &p) { p.set_num_events(1u << 20); },
                "plan.num_events is 1048576, more than the 65536 events");
}

TEST(PlanLoader, RefusesBadModelInfo) {
  expectRefused([](plan::Plan &p) { p.mutable_model()->set_vocab_size(0); },
                "plan.model.vocab_size is 0");
  expectRefused(
      [](plan::Plan &p) { p.mutable_model()->set_flops_per_token(NAN); },
      "plan.model.flops_per_token is nan");
  auto model = [](std::function<void(plan::ModelInfo &)> f) {
    return [f](plan::Plan &p) { f(*p.mutable_model()); };
  };
  expectRefused(model([](auto &m) { m.set_family("bert"); }),
                "plan.model.family is \"bert\": it must be llama or gpt2");
  expectRefused(model([](auto &m) { m.set_num_kv_heads(-2); }),
                "plan.model.num_kv_heads is -2: it must be non-negative");
  expectRefused(model([](auto &m) { m.set_head_dim(-1); }),
                "plan.model.head_dim is -1");
  expectRefused(model([](auto &m) { m.set_max_position_embeddings(0); }),
                "plan.model.max_position_embeddings is 0: it must be "
                "positive");
  expectRefused(
      model([](auto &m) { m.set_activation(plan::ModelInfo::GELU_TANH); }),
      "plan.model.activation is GELU_TANH: a llama model computes SWIGLU");
  expectRefused(model([](auto &m) {
                  m.set_activation(plan::ModelInfo::ACTIVATION_UNSPECIFIED);
                }),
                "plan.model.activation is ACTIVATION_UNSPECIFIED");
  expectRefused(model([](auto &m) { m.set_family("gpt2"); }),
                "plan.model.activation is SWIGLU: a gpt2 model computes "
                "GELU_TANH");
  expectRefused(model([](auto &m) { m.set_norm_eps(0); }),
                "plan.model.norm_eps is 0: it must be finite and positive");
  expectRefused(model([](auto &m) { m.set_norm_eps(INFINITY); }),
                "plan.model.norm_eps is inf");
  expectRefused(model([](auto &m) { m.set_rope_theta(NAN); }),
                "plan.model.rope_theta is nan: a llama model needs a finite "
                "positive RoPE base");
  expectRefused(model([](auto &m) {
                  m.set_family("gpt2");
                  m.set_activation(plan::ModelInfo::GELU_TANH);
                }),
                "plan.model.rope_theta is 10000: a gpt2 model has no RoPE, "
                "so it must be 0");
  expectRefused(model([](auto &m) { m.set_hidden_dropout(1); }),
                "plan.model.hidden_dropout is 1: a dropout probability is in "
                "[0, 1)");
  expectRefused(model([](auto &m) { m.set_attention_dropout(NAN); }),
                "plan.model.attention_dropout is nan");
  // The MoE layers that config.json states.
  auto moe = [](std::function<void(plan::MoeInfo &)> f) {
    return [f](plan::Plan &p) {
      p.mutable_model()->set_num_layers(2);
      plan::MoeInfo &m = *p.mutable_model()->mutable_moe();
      m.set_naming("mixtral");
      m.set_num_experts(4);
      m.set_top_k(2);
      m.set_expert_ffn_hidden_size(8);
      f(m);
    };
  };
  expectRefused(moe([](auto &m) { m.set_naming("qwen"); }),
                "plan.model.moe.naming is \"qwen\" in a llama model");
  expectRefused(moe([](auto &m) { m.set_top_k(5); }),
                "plan.model.moe has 4 experts and top_k 5");
  expectRefused(moe([](auto &m) { m.set_first_k_dense(7); }),
                "dense layers of");
  expectRefused(moe([](auto &m) { m.set_aux_loss_coeff(-1); }),
                "plan.model.moe: the scaling factor and loss coefficients");
}

TEST(PlanLoader, RefusesBadTrainConfig) {
  auto train = [](std::function<void(plan::TrainConfig &)> f) {
    return [f](plan::Plan &p) { f(*p.mutable_train()); };
  };
  expectRefused(train([](auto &t) { t.set_micro_batch_size(0); }),
                "plan.train.micro_batch_size is 0: it must be positive");
  expectRefused(train([](auto &t) { t.set_num_micro_batches(-1); }),
                "plan.train.num_micro_batches is -1");
  expectRefused(train([](auto &t) { t.set_seq_len(0); }),
                "plan.train.seq_len is 0");
  expectRefused(train([](auto &t) { t.set_steps(0); }),
                "plan.train.steps is 0");
  expectRefused(train([](auto &t) {
                  t.set_steps(std::numeric_limits<int64_t>::max() / 2);
                }),
                "does not fit in 64 bits");
  expectRefused(train([](auto &t) { t.set_lr(0); }),
                "plan.train.lr is 0: it must be finite and positive");
  expectRefused(train([](auto &t) { t.set_lr(NAN); }), "plan.train.lr is nan");
  expectRefused(train([](auto &t) { t.set_min_lr(1.0); }),
                "plan.train.min_lr is 1: it must be in [0, lr = 0.01]");
  expectRefused(train([](auto &t) { t.set_beta1(1.0); }),
                "plan.train.beta1 is 1: it must be in [0, 1)");
  expectRefused(train([](auto &t) { t.set_beta2(-0.5); }),
                "plan.train.beta2 is -0.5");
  expectRefused(train([](auto &t) { t.set_eps(0); }), "plan.train.eps is 0");
  expectRefused(train([](auto &t) { t.set_weight_decay(-1); }),
                "plan.train.weight_decay is -1");
  expectRefused(train([](auto &t) { t.set_grad_clip(INFINITY); }),
                "plan.train.grad_clip is inf");
  expectRefused(train([](auto &t) { t.set_warmup_steps(-2); }),
                "plan.train.warmup_steps is -2");
  expectRefused(train([](auto &t) { t.clear_decay(); }),
                "plan.train.decay is LR_DECAY_UNSPECIFIED: it must be COSINE "
                "or CONSTANT");
  expectRefused(train([](auto &t) {
                  t.set_decay(static_cast<plan::TrainConfig::LrDecay>(3));
                }),
                "plan.train.decay is 3: it must be COSINE or CONSTANT");
}

TEST(PlanLoader, RefusesBadTensorTable) {
  expectRefused(
      [](plan::Plan &p) { p.mutable_tensors(3)->set_id(7); },
      "plan.tensors[3] (model.embed_tokens.weight.exp_avg_sq) has id 7: a "
      "tensor's id must equal its index in plan.tensors");
  expectRefused([](plan::Plan &p) { named(p, "x.0").set_name(""); },
                "has no name");
  expectRefused([](plan::Plan &p) { named(p, "h.0").set_name("x.0"); },
                "has the same name as plan.tensors[");
  expectRefused(
      [](plan::Plan &p) { named(p, "x.0").set_dtype(plan::DTYPE_UNSPECIFIED); },
      "(x.0) has dtype 0: it must be F32, BF16 or I32");
  expectRefused([](plan::Plan &p) { named(p, "x.0").set_dtype(plan::DType(9)); },
                "(x.0) has dtype 9");
  expectRefused(
      [](plan::Plan &p) { named(p, "x.0").set_kind(plan::KIND_UNSPECIFIED); },
      "(x.0) has kind 0");
  expectRefused([](plan::Plan &p) { named(p, "x.0").set_shape(1, -16); },
                "(x.0) has shape [2, -16, 16]: dimension 1 is negative");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "x.0").set_shape(0, int64_t{1} << 40);
        named(p, "x.0").set_shape(1, int64_t{1} << 40);
      },
      "its byte size does not fit in 64 bits");
  expectRefused([](plan::Plan &p) { named(p, "x.0").set_size_bytes(4); },
                "(x.0) has size_bytes 4 but shape [2, 8, 16] of f32 needs 1024 "
                "bytes");
  expectRefused(
      [](plan::Plan &p) { named(p, "model.norm.weight").set_offset(100); },
      "plan.tensors[4] (model.norm.weight): offset 100 is not 64-byte "
      "aligned");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "dh.0").set_offset(p.memory().arena_bytes());
      },
      "does not fit in the arena of");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "dh.0").set_offset(std::numeric_limits<uint64_t>::max() / 64 *
                                  64);
      },
      "does not fit in the arena of");
}

TEST(PlanLoader, RefusesOverlappingPersistentTensors) {
  expectRefused(
      [](plan::Plan &p) {
        named(p, "lm_head.weight")
            .set_offset(named(p, "model.embed_tokens.weight").offset());
      },
      "share arena bytes [0, 16384), but plan.tensors[0] "
      "(model.embed_tokens.weight) is a PARAMETER tensor: only ACTIVATION "
      "tensors may reuse bytes");
  // An activation on top of a gradient is refused just the same.
  expectRefused(
      [](plan::Plan &p) {
        named(p, "lse.0").set_offset(named(p, "model.norm.weight.grad").offset());
      },
      "is a GRADIENT tensor: only ACTIVATION tensors may reuse bytes");
}

TEST(PlanLoader, RefusesActivationsSharingBytesWhileLive) {
  // x is live from instruction 6 to 14, dh from 12 to 14 (after the four
  // fills and the first micro-batch's two stages).
  expectRefused(
      [](plan::Plan &p) { named(p, "dh.0").set_offset(named(p, "x.0").offset()); },
      "plan.tensors[18] (x.0) and plan.tensors[24] (dh.0) share arena bytes "
      "[131712, 132736) while both are live in plan.programs[0] (step): "
      "instructions 6..14 and 12..14; activations may share bytes only when "
      "every use of one finishes before any use of the other starts (in "
      "order on one stream, or through events)");
}

// On two streams, program order proves nothing: stream 1 reads dlogits
// (instruction 7) and nothing makes stream 0 wait for it, so dx, written
// later in program order on stream 0, may not take dlogits' bytes, though a
// check by program position would allow it.
TEST(PlanLoader, RefusesSharingThatOnlyProgramOrderWouldAllow) {
  test::TinyModelOptions options;
  options.twoStreams = true;
  plan::Plan p = tinyModelPlan(options);
  named(p, "dx.0").set_offset(named(p, "dlogits.0").offset());
  absl::Status s = load(p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message())
                .find("(dlogits.0) and plan.tensors[" +
                      std::to_string(named(p, "dx.0").id()) +
                      "] (dx.0) share arena bytes"),
            std::string::npos)
      << s;
  EXPECT_NE(std::string(s.message()).find("instructions 10..14 and 18..21"),
            std::string::npos)
      << s;
  // The same bytes on one stream, where program order is the order, load.
  plan::Plan one = tinyModelPlan();
  named(one, "dx.0").set_offset(named(one, "dlogits.0").offset());
  EXPECT_TRUE(load(one).ok()) << load(one);
}

TEST(PlanLoader, AcceptsActivationsSharingBytesWhenLiveRangesAreDisjoint) {
  // h is live from instruction 1 to 5, dh from 6 to 8.
  plan::Plan p = tinyModelPlan();
  named(p, "dh.0").set_offset(named(p, "h.0").offset());
  EXPECT_TRUE(load(p).ok()) << load(p);
}

TEST(PlanLoader, AcceptsActivationsSharingBytesAfterTheirLastUse) {
  plan::Plan p = tinyModelPlan();
  // An activation the end of the step writes may reuse the bytes of one
  // only the first micro-batch used.
  plan::Tensor *scratch = p.add_tensors();
  *scratch = named(p, "x.0");
  scratch->set_id(p.tensors_size() - 1);
  scratch->set_name("optimizer.scratch");
  plan::Launch *l =
      program(p, "step").add_instructions()->mutable_launch();
  l->set_kernel("test.touch");
  l->add_outputs(scratch->id());
  EXPECT_TRUE(load(p).ok()) << load(p);
}

TEST(PlanLoader, RefusesBadInputs) {
  expectRefused([](plan::Plan &p) { named(p, "x.0").set_role(plan::TOKENS); },
                "(x.0) has role TOKENS but kind ACTIVATION: only INPUT tensors "
                "carry a role");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "tokens").set_role(plan::ROLE_UNSPECIFIED);
      },
      "(tokens) is an INPUT without a role");
  expectRefused(
      [](plan::Plan &p) { named(p, "labels").set_role(plan::TOKENS); },
      "both have role TOKENS: each role belongs to exactly one INPUT");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "labels").set_kind(plan::ACTIVATION);
        named(p, "labels").set_role(plan::ROLE_UNSPECIFIED);
      },
      "the plan has no INPUT tensor with role LABELS: one is required");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "tokens").set_shape(1, 4);
        named(p, "tokens").set_size_bytes(2 * 4 * 4);
      },
      "(tokens) (role TOKENS) is i32 [2, 4]: it must be i32 [2, 8] "
      "(plan.train micro_batch_size, seq_len)");
  expectRefused([](plan::Plan &p) { named(p, "labels").set_dtype(plan::F32); },
                "(role LABELS) is f32 [2, 8]: it must be i32 [2, 8]");
}

TEST(PlanLoader, RefusesBadReadBackScalars) {
  expectRefused([](plan::Plan &p) { p.set_loss_tensor(10000); },
                "plan.loss_tensor is 10000 but the plan has");
  expectRefused([](plan::Plan &p) { p.set_loss_tensor(named(p, "lse.0").id()); },
                "plan.loss_tensor names plan.tensors[");
  expectRefused(
      [](plan::Plan &p) { named(p, "grad_norm").set_kind(plan::ACTIVATION); },
      "plan.grad_norm_tensor names plan.tensors[16] (grad_norm), which is "
      "ACTIVATION f32 []: it must be a SCALAR f32 of shape []");
}

TEST(PlanLoader, RefusesBadParameterInfos) {
  auto param = [](plan::Plan &p) -> plan::ParameterInfo & {
    return *named(p, "lm_head.weight").mutable_param();
  };
  expectRefused(
      [](plan::Plan &p) {
        named(p, "model.norm.weight").set_dtype(plan::BF16);
        named(p, "model.norm.weight").set_size_bytes(32);
      },
      "is a bf16 PARAMETER: parameters are f32 master weights");
  expectRefused(
      [&](plan::Plan &p) { param(p).set_init(plan::INIT_UNSPECIFIED); },
      "(lm_head.weight): param.init is 0; it must be NORMAL, ZEROS or ONES");
  expectRefused([&](plan::Plan &p) { param(p).set_init_std(0); },
                "param.init is NORMAL with init_std 0");
  expectRefused([&](plan::Plan &p) { param(p).set_grad(9999); },
                "(lm_head.weight): param.grad is 9999 but the plan has");
  expectRefused(
      [&](plan::Plan &p) { param(p).set_grad(param(p).exp_avg()); },
      "param.grad names plan.tensors[10] (lm_head.weight.exp_avg) of kind "
      "OPTIMIZER_STATE: it must be GRADIENT");
  expectRefused(
      [&](plan::Plan &p) {
        param(p).set_exp_avg(named(p, "model.norm.weight.exp_avg").id());
      },
      "param.exp_avg names plan.tensors[6] (model.norm.weight.exp_avg), f32 "
      "[16]: it must be f32 [256, 16] like the parameter");
  expectRefused(
      [&](plan::Plan &p) {
        param(p).set_grad(named(p, "model.embed_tokens.weight.grad").id());
      },
      "which already belongs to plan.tensors[0] (model.embed_tokens.weight)");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "model.norm.weight")
            .mutable_param()
            ->set_checkpoint_transposed(true);
      },
      "has param.checkpoint_transposed but 1 dimensions");
  expectRefused([&](plan::Plan &p) { param(p).set_tied_alias("x.0"); },
                "param.tied_alias \"x.0\" is already the name of a tensor");
  expectRefused(
      [&](plan::Plan &p) {
        param(p).set_tied_alias("alias");
        named(p, "model.embed_tokens.weight")
            .mutable_param()
            ->set_tied_alias("alias");
      },
      "is the alias of another parameter too");
  expectRefused(
      [](plan::Plan &p) {
        for (plan::Tensor &t : *p.mutable_tensors())
          if (t.kind() == plan::PARAMETER)
            t.set_kind(plan::ACTIVATION);
      },
      "the plan has no PARAMETER tensors");
}

TEST(PlanLoader, RefusesBadPrograms) {
  expectRefused([](plan::Plan &p) { p.clear_programs(); },
                "the plan has no STEP program: it is required");
  expectRefused([](plan::Plan &p) { program(p, "step").set_name(""); },
                "plan.programs[0] has no name");
  expectRefused(
      [](plan::Plan &p) {
        program(p, "step").set_kind(plan::PROGRAM_UNSPECIFIED);
      },
      "plan.programs[0] (step) has kind 0, neither STEP nor INIT");
  expectRefused(
      [](plan::Plan &p) {
        plan::Program *again = p.add_programs();
        *again = p.programs(0);
        again->set_name("step2");
      },
      "plan.programs[1] (step2) is a second STEP program; a plan has one");
  expectRefused(
      [](plan::Plan &p) {
        plan::Program *again = p.add_programs();
        *again = p.programs(0);
      },
      "plan.programs[1]: a second program named \"step\"");
}

// Every micro-batch stages each input once; the readback slots hold what
// the plan says they hold.
TEST(PlanLoader, RefusesBadStagingAndReadbacks) {
  auto find = [](plan::Plan &p, plan::Instruction::OpCase op,
                 int nth) -> plan::Instruction & {
    for (plan::Instruction &inst :
         *program(p, "step").mutable_instructions())
      if (inst.op_case() == op && nth-- == 0)
        return inst;
    ADD_FAILURE() << "no such instruction";
    return *program(p, "step").mutable_instructions(0);
  };
  const auto kStage = plan::Instruction::kStage;
  const auto kReadback = plan::Instruction::kReadback;
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kStage, 0).mutable_stage()->set_tensor(p.loss_tensor());
      },
      "stages tensor 14, which is not an INPUT tensor");
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kStage, 2).mutable_stage()->set_micro_batch(2);
      },
      "stages micro-batch 2 but a step has plan.train.num_micro_batches = 2");
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kStage, 2).mutable_stage()->set_micro_batch(0);
      },
      "the STEP program stages plan.tensors[12] (tokens) for micro-batch 0 "
      "twice");
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kStage, 3).mutable_stage()->set_tensor(
            named(p, "tokens").id());
      },
      "the STEP program stages plan.tensors[12] (tokens) for micro-batch 1 "
      "twice");
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kStage, 3).mutable_launch()->set_kernel("test.touch");
      },
      "the STEP program never stages plan.tensors[13] (labels) for "
      "micro-batch 1");
  expectRefused(
      [&](plan::Plan &p) {
        program(p, "step").mutable_instructions(6)->mutable_launch()->set_micro_batch(5);
      },
      "instruction 6 (kernel embedding): computes micro-batch 5 but a step "
      "has plan.train.num_micro_batches = 2");
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kReadback, 1).mutable_readback()->set_slot(0);
      },
      "the STEP program reads back into slot 0 twice");
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kReadback, 0).mutable_readback()->set_slot(9);
      },
      "reads back into slot 9, which is not below plan.num_readbacks = 4");
  expectRefused(
      [&](plan::Plan &p) {
        find(p, kReadback, 0).mutable_readback()->set_tensor(
            named(p, "x.0").id());
      },
      "reads back tensor 18, which is not an f32 SCALAR tensor");
  expectRefused(
      [&](plan::Plan &p) {
        p.set_grad_norm_readback(p.loss_readbacks(0));
      },
      "plan.grad_norm_readback is slot 0, which another readback field names "
      "too");
  expectRefused(
      [&](plan::Plan &p) {
        const uint32_t norm = p.grad_norm_readback();
        p.set_grad_norm_readback(p.step_skipped_readback());
        p.set_step_skipped_readback(norm);
      },
      "plan.grad_norm_readback is slot 3, but the STEP program reads "
      "plan.tensors[17] (step_skipped) into it, not plan.tensors[16] "
      "(grad_norm)");
  expectRefused([&](plan::Plan &p) { p.mutable_loss_readbacks()->RemoveLast(); },
                "plan.loss_readbacks has 1 slots but a step has "
                "plan.train.num_micro_batches = 2");
}

TEST(PlanLoader, RefusesBadInstructions) {
  auto inst = [](plan::Plan &p, int i) -> plan::Instruction & {
    return *program(p, "step").mutable_instructions(i);
  };
  expectRefused([&](plan::Plan &p) { inst(p, 8).set_stream(1); },
                "plan.programs[0] (step) instruction 8: stream 1 is "
                "not below plan.num_streams = 1");
  expectRefused(
      [&](plan::Plan &p) { inst(p, 8).mutable_launch()->set_kernel("matmul"); },
      "plan.programs[0] (step) instruction 8 (kernel matmul): there "
      "is no kernel \"matmul\" for the CPU device");
  expectRefused(
      [&](plan::Plan &p) { inst(p, 8).mutable_launch()->set_inputs(1, 500); },
      "instruction 8 (kernel linear): inputs[1] is tensor 500 but the plan "
      "has");
  expectRefused(
      [&](plan::Plan &p) { inst(p, 8).mutable_launch()->add_outputs(501); },
      "instruction 8 (kernel linear): outputs[1] is tensor 501");
  expectRefused(
      [&](plan::Plan &p) {
        inst(p, 7).mutable_launch()->mutable_attrs(0)->set_name("");
      },
      "instruction 7 (kernel rms_norm): attrs[0] has no name");
  expectRefused(
      [&](plan::Plan &p) {
        plan::Launch *l = inst(p, 7).mutable_launch();
        *l->add_attrs() = l->attrs(0);
      },
      "instruction 7 (kernel rms_norm): parameter \"eps\" is given twice");
  expectRefused(
      [&](plan::Plan &p) {
        inst(p, 7).mutable_launch()->mutable_attrs(0)->clear_value();
      },
      "instruction 7 (kernel rms_norm): parameter \"eps\" has no value");
  expectRefused(
      [&](plan::Plan &p) { inst(p, 7).mutable_launch()->clear_attrs(); },
      "plan.programs[0] (step) instruction 7 (kernel rms_norm): "
      "rms_norm:");
  expectRefused(
      [&](plan::Plan &p) {
        // linear with the norm weight [16] as its weight matrix.
        inst(p, 8).mutable_launch()->set_inputs(
            1, named(p, "model.norm.weight").id());
      },
      "plan.programs[0] (step) instruction 8 (kernel linear): linear: "
      "input 1 (weight)");
  expectRefused(
      [&](plan::Plan &p) {
        // linear writing its own input x.
        plan::Launch *l = inst(p, 8).mutable_launch();
        l->set_outputs(0, l->inputs(0));
      },
      "instruction 8 (kernel linear): outputs[0] is plan.tensors[19] (h.0), "
      "which is also inputs[0]; a kernel never writes a tensor it reads");
  expectRefused(
      [&](plan::Plan &p) {
        plan::Launch *l = inst(p, 7).mutable_launch();
        l->set_outputs(1, l->outputs(0));
      },
      "instruction 7 (kernel rms_norm): outputs[1] is plan.tensors[19] (h.0), "
      "which is also outputs[0]");
  expectRefused([&](plan::Plan &p) { inst(p, 0).clear_op(); },
                "instruction 0: the instruction has no operation");
}

// Two streams using one persistent tensor, one of them writing it, must be
// ordered by events: without the last wait, stream 0's optimizer reads
// gradients that stream 1 may still be writing.
TEST(PlanLoader, RefusesPersistentTensorsTwoStreamsRaceOn) {
  TinyModelOptions two;
  two.twoStreams = true;
  ASSERT_TRUE(load(tinyModelPlan(two)).ok()) << load(tinyModelPlan(two));
  expectRefused(
      [](plan::Plan &p) {
        auto *insts = program(p, "step").mutable_instructions();
        for (int i = insts->size() - 1; i >= 0; --i)
          if (insts->Get(i).has_wait()) {
            insts->DeleteSubrange(i, 1);
            return;
          }
      },
      "and at least one writes it, but no event orders them: record an "
      "event after the first and wait for it before the second",
      two);
}

TEST(PlanLoader, RefusesBadEvents) {
  auto add = [](plan::Plan &p) -> plan::Program & {
    p.set_num_events(2);
    return program(p, "step");
  };
  expectRefused(
      [&](plan::Plan &p) {
        add(p).add_instructions()->mutable_record()->set_event(2);
      },
      "instruction 39: records event 2, which is not below plan.num_events "
      "= 2");
  expectRefused(
      [&](plan::Plan &p) {
        add(p).add_instructions()->mutable_wait()->set_event(5);
      },
      "instruction 39: waits for event 5, which is not below");
  // Every check below names the instruction and what to change.
  auto event = [](plan::Program &mb, bool record, uint32_t stream,
                  uint32_t e, uint64_t value) {
    plan::Instruction *inst = mb.add_instructions();
    inst->set_stream(stream);
    plan::EventRecord *r = record ? inst->mutable_record() : nullptr;
    plan::EventWait *w = record ? nullptr : inst->mutable_wait();
    if (r) {
      r->set_event(e);
      r->set_value(value);
    } else {
      w->set_event(e);
      w->set_value(value);
    }
  };
  expectRefused(
      [&](plan::Plan &p) { event(add(p), true, 0, 1, 0); },
      "plan.programs[0] (step) instruction 39: records event 1 with value "
      "0; event values start at 1");
  expectRefused(
      [&](plan::Plan &p) {
        plan::Program &mb = add(p);
        event(mb, false, 0, 1, 1);
        event(mb, true, 0, 1, 1);
      },
      "plan.programs[0] (step) instruction 39: waits for event 1 to reach "
      "1, but no instruction before it records that value, so stream 0 "
      "could wait forever; record it earlier in the program");
  expectRefused(
      [&](plan::Plan &p) {
        plan::Program &mb = add(p);
        event(mb, true, 0, 1, 2);
        event(mb, false, 0, 1, 1);
      },
      "instruction 40: waits for event 1 to reach 1, but no instruction "
      "before it records that value");
  expectRefused(
      [&](plan::Plan &p) {
        p.set_num_streams(2);
        plan::Program &mb = add(p);
        event(mb, true, 0, 1, 1);
        event(mb, true, 1, 1, 2);
      },
      "instruction 40: records event 1 on stream 1, but stream 0 records it "
      "too; one stream records an event");
  expectRefused(
      [&](plan::Plan &p) {
        plan::Program &mb = add(p);
        event(mb, true, 0, 0, 2);
        event(mb, true, 0, 0, 1);
      },
      "instruction 40: records event 0 with value 1 after value 2; an "
      "event's values rise in program order");
  // A record in another program does not count: every run starts at 0.
  expectRefused(
      [&](plan::Plan &p) {
        add(p);
        plan::Program *init = p.add_programs();
        init->set_name("init");
        init->set_kind(plan::INIT);
        event(*init, true, 0, 0, 1);
        event(program(p, "step"), false, 0, 0, 1);
      },
      "waits for event 0 to reach 1, but no instruction before it records "
      "that value");
}

// A Repeat's body runs on one stream, holds no events, and keeps its
// transients to itself.
TEST(PlanLoader, RefusesBadRepeats) {
  TinyModelOptions repeated;
  repeated.repeated = true;
  ASSERT_TRUE(load(tinyModelPlan(repeated)).ok())
      << load(tinyModelPlan(repeated));
  auto repeat = [](plan::Plan &p) -> plan::Repeat & {
    for (plan::Instruction &inst : *program(p, "step").mutable_instructions())
      if (inst.has_repeat())
        return *inst.mutable_repeat();
    ADD_FAILURE() << "no repeat";
    return *program(p, "step").mutable_instructions(0)->mutable_repeat();
  };
  expectRefused([&](plan::Plan &p) { repeat(p).set_count(0); },
                "instruction 4: repeats 0 times; a Repeat runs 1 to "
                "plan.train.num_micro_batches = 2 times",
                repeated);
  expectRefused([&](plan::Plan &p) { repeat(p).set_count(3); },
                "repeats 3 times", repeated);
  expectRefused([&](plan::Plan &p) { repeat(p).set_length(500); },
                "instruction 4: a body of 500 instructions, but", repeated);
  // One iteration too few: the second micro-batch is never staged.
  expectRefused(
      [&](plan::Plan &p) {
        repeat(p).set_count(1);
        p.mutable_loss_readbacks()->RemoveLast();
      },
      "never stages plan.tensors[12] (tokens) for micro-batch 1", repeated);
  expectRefused(
      [&](plan::Plan &p) {
        program(p, "step").mutable_instructions(6)->set_stream(1);
        p.set_num_streams(2);
      },
      "instruction 6: is on stream 1 inside a Repeat body on stream 0",
      repeated);
  expectRefused(
      [&](plan::Plan &p) {
        p.set_num_events(1);
        program(p, "step").mutable_instructions(6)->mutable_record()->set_value(
            1);
      },
      "instruction 6: a Repeat body holds launches, stages, readbacks and "
      "collectives along tp, cp and ep only",
      repeated);
  // The body's rms_norm reads dx.0 before the body writes it.
  expectRefused(
      [&](plan::Plan &p) {
        program(p, "step")
            .mutable_instructions(8)
            ->mutable_launch()
            ->set_inputs(0, named(p, "dx.0").id());
      },
      "(dx.0) before its Repeat body writes it, so a value would carry from "
      "one iteration into the next",
      repeated);
  // The optimizer after the body reads a body transient.
  expectRefused(
      [&](plan::Plan &p) {
        plan::Launch *l =
            program(p, "step").add_instructions()->mutable_launch();
        l->set_kernel("test.touch");
        l->add_outputs(named(p, "x.0").id());
      },
      "a transient of the Repeat body at instruction 4; a body's transients "
      "are used inside it only",
      repeated);
}

TEST(PlanLoader, RefusesKernelsOfAnotherDevice) {
  absl::Status s = loadPlan(tinyModelPlan().SerializeAsString(),
                            testKernelRegistry(), Device::kCUDA)
                       .status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("for the CUDA device"),
            std::string::npos)
      << s;
}

TEST(PlanLoader, LoadPlanFileNamesThePath) {
  absl::Status missing =
      loadPlanFile("/nonexistent/x.plan", testKernelRegistry(), Device::kCPU)
          .status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.message()).find("'/nonexistent/x.plan'"),
            std::string::npos)
      << missing;

  std::string path = test::scratchDir() + "/bad.plan";
  plan::Plan p = tinyModelPlan();
  p.set_format_version(kPlanFormatVersion + 1);
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::string bytes = sealPlan(p.SerializeAsString());
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  absl::Status s =
      loadPlanFile(path, testKernelRegistry(), Device::kCPU).status();
  EXPECT_NE(std::string(s.message())
                .find(absl::StrCat("the plan file '", path,
                                   "': plan.format_version is ",
                                   kPlanFormatVersion + 1)),
            std::string::npos)
      << s;
  absl::Status dir =
      loadPlanFile(test::scratchDir(), testKernelRegistry(), Device::kCPU)
          .status();
  EXPECT_NE(std::string(dir.message()).find("is not a regular file"),
            std::string::npos)
      << dir;
}

} // namespace
} // namespace braid
