// Pipeline plans in the loader: the tiny two-rank pipeline is accepted and
// resolved stage by stage, and each rule of a pipeline (its shape, the send
// and receive instructions, what the stages must agree on) refuses it,
// broken in one place at a time, with a sentence naming the stage.
#include <functional>
#include <string>

#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/StagePlan.h"
#include "test/unit/runtime/PlanBuilder.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyPipelinePlan.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::testKernelRegistry;
using test::TinyPipelineOptions;
using test::tinyPipelinePlan;

absl::StatusOr<LoadedPlan> load(const plan::Plan &p) {
  return loadPlan(p.SerializeAsString(), testKernelRegistry(), Device::kCPU);
}

// The index of the `n`th instruction of stage `k`'s step program that
// `is` accepts.
int nth(const plan::Plan &p, int k,
        const std::function<bool(const plan::Instruction &)> &is, int n = 0) {
  const plan::Program &step = p.stage_plans(k).programs(0);
  for (int i = 0; i < step.instructions_size(); ++i)
    if (is(step.instructions(i)) && n-- == 0)
      return i;
  ADD_FAILURE() << "no such instruction in stage " << k;
  return 0;
}

bool isSend(const plan::Instruction &i) { return i.has_send(); }
bool isRecv(const plan::Instruction &i) { return i.has_recv(); }

plan::Instruction &instruction(plan::Plan &p, int k, int i) {
  return *p.mutable_stage_plans(k)->mutable_programs(0)->mutable_instructions(
      i);
}

uint32_t tensorNamed(const plan::Plan &stage, const std::string &name) {
  for (const plan::Tensor &t : stage.tensors())
    if (t.name() == name)
      return t.id();
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

void expectRefused(const std::function<void(plan::Plan &)> &mutate,
                   const std::string &fragment,
                   const TinyPipelineOptions &options = {}) {
  plan::Plan p = tinyPipelinePlan(options);
  mutate(p);
  absl::Status s = load(p).status();
  ASSERT_FALSE(s.ok()) << "expected a refusal containing: " << fragment;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find(fragment), std::string::npos)
      << "message: " << s.message() << "\nexpected to contain: " << fragment;
}

TEST(PipelineLoader, AcceptsTheTinyPipelineAndLoadsEachStage) {
  for (bool oneStream : {false, true})
    for (int64_t dp : {1, 2}) {
      TinyPipelineOptions o;
      o.oneStream = oneStream;
      o.dataParallel = dp;
      const plan::Plan p = tinyPipelinePlan(o);
      absl::StatusOr<LoadedPlan> loaded = load(p);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      ASSERT_TRUE(loaded->pipeline());
      ASSERT_EQ(loaded->stages.size(), 2u);
      EXPECT_EQ(loaded->lossStage, 1);
      // The outer plan keeps the header only; each stage has it too.
      EXPECT_EQ(loaded->proto.stage_plans_size(), 0);
      EXPECT_EQ(loaded->proto.tensors_size(), 0);
      for (const LoadedPlan &stage : loaded->stages) {
        EXPECT_EQ(stage.proto.name(), p.name());
        EXPECT_EQ(stage.proto.mesh().pp(), 2);
        EXPECT_EQ(stage.proto.mesh().dp(), dp);
        EXPECT_EQ(stage.proto.train().num_micro_batches(),
                  p.train().num_micro_batches());
        EXPECT_FALSE(stage.pipeline());
      }
      const LoadedPlan &first = loaded->stages[0], &last = loaded->stages[1];
      EXPECT_TRUE(first.tokens.has_value());
      EXPECT_FALSE(first.labels.has_value());
      EXPECT_FALSE(last.tokens.has_value());
      EXPECT_TRUE(last.labels.has_value());
      EXPECT_EQ(first.parameters.size(), 1u);
      EXPECT_EQ(last.parameters.size(), 2u);
      EXPECT_EQ(first.proto.loss_readbacks_size(), 0);
      EXPECT_EQ(last.proto.loss_readbacks_size(),
                p.train().num_micro_batches());
      // Rank 0 sends to the next rank on channel 0, receives on 1.
      int sends = 0, recvs = 0;
      for (const LoadedInstruction &inst : first.programs[0].instructions) {
        if (inst.kind == LoadedInstruction::Kind::kSend) {
          ++sends;
          EXPECT_EQ(inst.peerOffset, 1);
          EXPECT_EQ(inst.channel, 0u);
          ASSERT_EQ(inst.inputs.size(), 1u);
          EXPECT_EQ(inst.inputs[0], inst.tensor);
          EXPECT_TRUE(inst.outputs.empty());
        }
        if (inst.kind == LoadedInstruction::Kind::kRecv) {
          ++recvs;
          EXPECT_EQ(inst.channel, 1u);
          ASSERT_EQ(inst.outputs.size(), 1u);
          EXPECT_EQ(inst.outputs[0], inst.tensor);
        }
      }
      EXPECT_EQ(sends, p.train().num_micro_batches());
      EXPECT_EQ(recvs, p.train().num_micro_batches());
    }
}

TEST(PipelineLoader, TheEffectivePlanIsTheStagePlanWithTheHeader) {
  const plan::Plan p = tinyPipelinePlan();
  EXPECT_TRUE(isPipelinePlan(p));
  for (int k = 0; k < 2; ++k) {
    plan::Plan effective = effectiveStagePlan(p, k);
    EXPECT_FALSE(isPipelinePlan(plan::Plan()));
    EXPECT_EQ(effective.format_version(), p.format_version());
    EXPECT_EQ(effective.name(), p.name());
    EXPECT_EQ(effective.model().SerializeAsString(),
              p.model().SerializeAsString());
    EXPECT_EQ(effective.train().SerializeAsString(),
              p.train().SerializeAsString());
    EXPECT_EQ(effective.mesh().pp(), 2);
    EXPECT_EQ(effective.stage_plans_size(), 0);
    // Less the header, it is the stage plan itself.
    effective.clear_format_version();
    effective.clear_name();
    effective.clear_model();
    effective.clear_train();
    effective.clear_mesh();
    EXPECT_EQ(effective.SerializeAsString(),
              p.stage_plans(k).SerializeAsString());
    plan::Plan copy = p;
    EXPECT_EQ(takeEffectiveStagePlan(copy, k).SerializeAsString(),
              effectiveStagePlan(p, k).SerializeAsString());
  }
}

TEST(PipelineLoader, StageMessagesNameTheStagesFields) {
  EXPECT_EQ(stageMessage("plan.programs[0] (step) instruction 3: stages "
                         "micro-batch 2 but a step has "
                         "plan.train.num_micro_batches = 2",
                         1),
            "plan.stage_plans[1].programs[0] (step) instruction 3: stages "
            "micro-batch 2 but a step has plan.train.num_micro_batches = 2");
  EXPECT_EQ(
      stageMessage("plan.tensors[4] (x) and plan.tensors[5] (y) share", 0),
      "plan.stage_plans[0].tensors[4] (x) and "
      "plan.stage_plans[0].tensors[5] (y) share");
  EXPECT_EQ(stageMessage("the plan has no STEP program: it is required", 3),
            "plan.stage_plans[3]: the plan has no STEP program: it is "
            "required");
  EXPECT_EQ(stageMessage("plan.mesh.tp is 2: no", 0),
            "plan.stage_plans[0]: plan.mesh.tp is 2: no");
}

TEST(PipelineLoader, RefusesAPipelineOfTheWrongShape) {
  expectRefused([](plan::Plan &p) { p.mutable_mesh()->set_pp(3); },
                "plan.stage_plans has 2 plans but plan.mesh.pp is 3: a "
                "pipeline plan has one stage plan per pipeline rank");
  expectRefused([](plan::Plan &p) { p.mutable_mesh()->set_pp(1); },
                "plan.stage_plans has 2 plans but plan.mesh.pp is 1: only a "
                "pipeline plan (pp above 1) has stage plans");
  expectRefused([](plan::Plan &p) { p.clear_stage_plans(); },
                "plan.stage_plans has 0 plans but plan.mesh.pp is 2");
  expectRefused([](plan::Plan &p) { p.mutable_mesh()->set_cp(0); },
                "plan.mesh.cp is 0: a mesh axis has 1 to 2^24 ranks");
  expectRefused([](plan::Plan &p) { p.set_num_streams(2); },
                "plan.num_streams is set in a pipeline plan, whose outer plan "
                "carries only the header");
  expectRefused([](plan::Plan &p) { *p.add_tensors() = plan::Tensor(); },
                "plan.tensors is set in a pipeline plan");
  expectRefused([](plan::Plan &p) { p.mutable_stage_plans(1)->set_name("x"); },
                "plan.stage_plans[1].name is set: a stage plan carries no "
                "header of its own");
  expectRefused(
      [](plan::Plan &p) {
        p.mutable_stage_plans(0)->mutable_train()->set_lr(1);
      },
      "plan.stage_plans[0].train is set");
  expectRefused(
      [](plan::Plan &p) {
        *p.mutable_stage_plans(0)->add_stage_plans() = plan::Plan();
      },
      "plan.stage_plans[0].stage_plans is set");
  // The outer header is checked like any plan's.
  expectRefused([](plan::Plan &p) { p.mutable_train()->set_lr(-1); },
                "plan.train.lr is -1");
}

TEST(PipelineLoader, EachStageMeetsEveryRuleOfAPlan) {
  expectRefused(
      [](plan::Plan &p) { p.mutable_stage_plans(1)->set_num_streams(0); },
      "plan.stage_plans[1].num_streams is 0");
  expectRefused(
      [](plan::Plan &p) {
        p.mutable_stage_plans(0)->mutable_tensors(0)->set_offset(8);
      },
      "plan.stage_plans[0].tensors[0] (model.embed_tokens.weight): offset 8 "
      "is not 64-byte aligned");
  expectRefused(
      [](plan::Plan &p) { p.mutable_stage_plans(1)->clear_programs(); },
      "plan.stage_plans[1]: the plan has no STEP program");
  // One loss per micro-batch, or none on a rank that computes no loss.
  expectRefused(
      [](plan::Plan &p) {
        p.mutable_stage_plans(1)->mutable_loss_readbacks()->RemoveLast();
      },
      "plan.stage_plans[1].loss_readbacks has 1 slots but a step has "
      "plan.train.num_micro_batches = 2: one loss per micro-batch (or none, "
      "on a pipeline rank that computes no loss)");
}

TEST(PipelineLoader, AStageMayRestageIgnoreInputsAndLeaveSlots) {
  plan::Plan p = tinyPipelinePlan();
  // The loss stage stages micro-batch 0's labels again before its
  // backward; the embedding stage holds labels it never reads; and it
  // keeps a first slot for losses it never reads back.
  plan::Plan &loss = *p.mutable_stage_plans(1);
  plan::Program &step = *loss.mutable_programs(0);
  const int ce = [&] {
    for (int i = 0; i < step.instructions_size(); ++i)
      if (step.instructions(i).launch().kernel() == "cross_entropy_grad_input")
        return i;
    return 0;
  }();
  plan::Instruction again;
  again.mutable_stage()->set_tensor(tensorNamed(loss, "labels"));
  step.mutable_instructions()->Add(std::move(again));
  for (int i = step.instructions_size() - 1; i > ce; --i)
    step.mutable_instructions()->SwapElements(i, i - 1);
  plan::Plan &embed = *p.mutable_stage_plans(0);
  plan::Tensor &labels = *embed.add_tensors();
  labels = loss.tensors(tensorNamed(loss, "labels"));
  labels.set_id(static_cast<uint32_t>(embed.tensors_size() - 1));
  labels.set_offset(embed.memory().arena_bytes());
  embed.mutable_memory()->set_arena_bytes(embed.memory().arena_bytes() + 64);
  for (plan::Instruction &inst :
       *embed.mutable_programs(0)->mutable_instructions())
    if (inst.has_readback())
      inst.mutable_readback()->set_slot(inst.readback().slot() + 1);
  embed.set_grad_norm_readback(embed.grad_norm_readback() + 1);
  embed.set_step_skipped_readback(embed.step_skipped_readback() + 1);
  embed.set_num_readbacks(embed.num_readbacks() + 1);
  absl::StatusOr<LoadedPlan> loaded = load(p);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->stages[0].tokens.has_value());
  EXPECT_FALSE(loaded->stages[0].labels.has_value());
  // A slot a field names must be filled, though.
  p.mutable_stage_plans(0)->set_grad_norm_readback(0);
  absl::Status s = load(p).status();
  EXPECT_NE(std::string(s.message())
                .find("plan.stage_plans[0].grad_norm_readback is slot 0, "
                      "which the STEP program never fills"),
            std::string::npos)
      << s;
  // A whole plan stages each input once, and fills every slot.
  plan::Plan whole = test::tinyModelPlan();
  plan::Instruction *twice =
      whole.mutable_programs(0)->mutable_instructions()->Add();
  twice->mutable_stage()->set_tensor(tensorNamed(whole, "labels"));
  s = load(whole).status();
  EXPECT_NE(std::string(s.message()).find("for micro-batch 0 twice"),
            std::string::npos)
      << s;
}

TEST(PipelineLoader, ChecksEachSendAndReceive) {
  const int send = nth(tinyPipelinePlan(), 0, isSend);
  const std::string at = "plan.stage_plans[0].programs[0] (step) instruction " +
                         std::to_string(send) + " (send): ";
  expectRefused(
      [&](plan::Plan &p) {
        instruction(p, 0, send).mutable_send()->set_tensor(999);
      },
      at + "sends tensor 999 but the plan has");
  for (int offset : {0, 2, -2, 7})
    expectRefused(
        [&](plan::Plan &p) {
          instruction(p, 0, send).mutable_send()->set_peer_offset(offset);
        },
        at + "peer_offset is " + std::to_string(offset) +
            "; it must name another pipeline rank: nonzero and less than "
            "plan.mesh.pp = 2 in magnitude");
  expectRefused(
      [&](plan::Plan &p) {
        instruction(p, 0, send).mutable_send()->set_channel(2);
      },
      at + "channel is 2; a send goes on channel 0 (activations) or 1 "
           "(gradients)");
  expectRefused(
      [&](plan::Plan &p) { instruction(p, 0, send).set_stream(9); },
      "plan.stage_plans[0].programs[0] (step) instruction " +
          std::to_string(send) +
          ": stream 9 is not below plan.stage_plans[0].num_streams = 3");
  // A Repeat body holds no transfer.
  expectRefused(
      [&](plan::Plan &p) {
        plan::Program *step = p.mutable_stage_plans(0)->mutable_programs(0);
        plan::Instruction repeat;
        repeat.set_stream(instruction(p, 0, send).stream());
        repeat.mutable_repeat()->set_count(1);
        repeat.mutable_repeat()->set_length(1);
        step->mutable_instructions()->Add(std::move(repeat));
        for (int i = step->instructions_size() - 1; i > send; --i)
          step->mutable_instructions()->SwapElements(i, i - 1);
      },
      "a Repeat body holds launches, stages, readbacks and collectives along "
      "tp, cp and ep only");
}

TEST(PipelineLoader, RefusesTransfersOutsideAPipeline) {
  test::PlanBuilder b;
  b.standardInputsAndScalars();
  b.parameter("w", {4}, plan::ONES);
  b.minimalStep();
  b.send(0, b.id("w"), 1, 0);
  absl::Status s = load(b.build()).status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message())
                .find("a send exchanges with another pipeline rank, but "
                      "plan.mesh.pp is 1: only pipeline plans transfer"),
            std::string::npos)
      << s;
}

TEST(PipelineLoader, AReceivedActivationIsOrderedBeforeItsReaders) {
  // Without the loss stage's first wait, its compute may read the
  // embeddings while the receive still writes them.
  const plan::Plan good = tinyPipelinePlan();
  const int wait =
      nth(good, 1, [](const plan::Instruction &i) { return i.has_wait(); });
  expectRefused(
      [&](plan::Plan &p) {
        auto *insts = p.mutable_stage_plans(1)
                          ->mutable_programs(0)
                          ->mutable_instructions();
        insts->erase(insts->begin() + wait);
      },
      "(recv, stream 2) and ");
  expectRefused(
      [&](plan::Plan &p) {
        auto *insts = p.mutable_stage_plans(1)
                          ->mutable_programs(0)
                          ->mutable_instructions();
        insts->erase(insts->begin() + wait);
      },
      "both use plan.stage_plans[1].tensors[" +
          std::to_string(tensorNamed(good.stage_plans(1), "x.0")) +
          "] (x.0), and at least one writes it, but no event orders them");
}

TEST(PipelineLoader, TransfersOfAChannelAreOrdered) {
  // The second micro-batch's send on the receives' stream: nothing orders
  // it after the first, on the sends' stream.
  const int second = nth(tinyPipelinePlan(), 0, isSend, 1);
  const int first = nth(tinyPipelinePlan(), 0, isSend, 0);
  expectRefused(
      [&](plan::Plan &p) { instruction(p, 0, second).set_stream(2); },
      "plan.stage_plans[0].programs[0] (step) instructions " +
          std::to_string(first) + " (stream 1) and " + std::to_string(second) +
          " (stream 2) both send to the pipeline rank at offset 1 on channel "
          "0, but no stream or event orders them");
}

TEST(PipelineLoader, StagesAgreeOnParametersLossesAndTransfers) {
  expectRefused(
      [](plan::Plan &p) {
        plan::Plan &loss = *p.mutable_stage_plans(1);
        loss.mutable_tensors(tensorNamed(loss, "model.norm.weight"))
            ->set_name("model.embed_tokens.weight");
      },
      "plan.stage_plans[1].tensors[0] (model.embed_tokens.weight) is a "
      "parameter of plan.stage_plans[0] too: each parameter belongs to one "
      "pipeline rank");
  expectRefused(
      [](plan::Plan &p) {
        plan::Plan &loss = *p.mutable_stage_plans(1);
        loss.mutable_tensors(tensorNamed(loss, "model.norm.weight"))
            ->mutable_param()
            ->set_tied_alias("model.embed_tokens.weight");
      },
      ", under its tied alias \"model.embed_tokens.weight\", is a parameter "
      "of plan.stage_plans[0] too");
  // Both ranks the embedding stage: neither reads losses back.
  expectRefused(
      [](plan::Plan &p) {
        *p.mutable_stage_plans(1) = p.stage_plans(0);
        p.mutable_stage_plans(1)->mutable_tensors(0)->set_name("other.weight");
      },
      "no stage plan reads the losses back");
  // The received embeddings of micro-batch 0 have the wrong size: the
  // refusal names the send and the receive it meets.
  auto wrongSize = [](plan::Plan &p) {
    const int recv = nth(p, 1, isRecv);
    instruction(p, 1, recv)
        .mutable_recv()
        ->set_tensor(tensorNamed(p.stage_plans(1), "rstd.0"));
  };
  expectRefused(wrongSize, "sends 256 f32 (plan.stage_plans[0].tensors[");
  expectRefused(
      wrongSize,
      "), pipeline rank 0's 1st send to rank 1 on channel 0, but the receive "
      "it meets, plan.stage_plans[1].programs[0] (step) instruction");
  // Rank 1 sends one gradient fewer than rank 0 receives.
  expectRefused(
      [](plan::Plan &p) {
        const int last = nth(p, 1, isSend, 1);
        auto *insts = p.mutable_stage_plans(1)
                          ->mutable_programs(0)
                          ->mutable_instructions();
        insts->erase(insts->begin() + last);
      },
      "pipeline rank 1's STEP program sends 1 tensors to rank 0 on channel 1 "
      "but rank 0's receives 2 from rank 1 there: "
      "plan.stage_plans[0].programs[0] (step) instruction " +
          std::to_string(nth(tinyPipelinePlan(), 0, isRecv, 1)) +
          " meets no transfer of its peer");
}

TEST(PipelineLoader, BothLossesReadBackIsRefused) {
  // Two whole tiny plans as the stages, the second's parameters renamed.
  plan::Plan first = test::tinyModelPlan();
  plan::Plan second = first;
  for (plan::Tensor &t : *second.mutable_tensors())
    if (t.kind() == plan::PARAMETER)
      t.set_name("copy." + t.name());
  absl::Status s = load(test::pipelinePlan({first, second})).status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message())
                .find("plan.stage_plans[0] and plan.stage_plans[1] both read "
                      "losses back"),
            std::string::npos)
      << s;
}

} // namespace
} // namespace braid
