// BF16 plans on the CPU: the loader's rules for WEIGHT_COPY tensors, the
// precision and the INIT program, and the Trainer's handling of weight
// copies (cast at start, after each step and after resume; never saved).
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/ckpt/Safetensors.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/MemoryReport.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::testKernelRegistry;
using test::TinyModelOptions;
using test::tinyModelPlan;
using test::tinyTrainer;

TinyModelOptions bf16Options() {
  TinyModelOptions o;
  o.weightCopies = true;
  return o;
}

plan::Tensor &named(plan::Plan &p, const std::string &name) {
  for (plan::Tensor &t : *p.mutable_tensors())
    if (t.name() == name)
      return t;
  ADD_FAILURE() << "no tensor " << name;
  return *p.mutable_tensors(0);
}

absl::StatusOr<LoadedPlan> load(const plan::Plan &p) {
  return loadPlan(p.SerializeAsString(), testKernelRegistry(), Device::kCPU);
}

void expectRefused(const std::function<void(plan::Plan &)> &mutate,
                   const std::string &fragment) {
  plan::Plan p = tinyModelPlan(bf16Options());
  mutate(p);
  absl::Status s = load(p).status();
  ASSERT_FALSE(s.ok()) << "expected a refusal containing: " << fragment;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find(fragment), std::string::npos)
      << "message: " << s.message() << "\nexpected to contain: " << fragment;
}

// The f32 -> bf16 rounding of docs/numerics.md: nearest, ties to even.
uint16_t roundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

TEST(Bf16Plan, LoadsAndListsTheWeightCopies) {
  plan::Plan p = tinyModelPlan(bf16Options());
  absl::StatusOr<LoadedPlan> loaded = load(p);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->bf16);
  ASSERT_EQ(loaded->weightCopies.size(), 2u);
  EXPECT_EQ(loaded->weightCopies[0],
            named(p, "model.embed_tokens.weight.bf16").id());
  EXPECT_EQ(loaded->weightCopies[1], named(p, "lm_head.weight.bf16").id());
  EXPECT_NE(loaded->program(plan::INIT), nullptr);

  absl::StatusOr<LoadedPlan> fp32 = load(tinyModelPlan());
  ASSERT_TRUE(fp32.ok());
  EXPECT_FALSE(fp32->bf16);
  EXPECT_TRUE(fp32->weightCopies.empty());
}

TEST(Bf16Plan, RefusesAPrecisionOtherThanFp32OrBf16) {
  plan::Plan p = tinyModelPlan();
  p.mutable_train()->set_precision(plan::TrainConfig::FP32);
  EXPECT_TRUE(load(p).ok());
  expectRefused(
      [](plan::Plan &p) { p.mutable_train()->clear_precision(); },
      "plan.train.precision is PRECISION_UNSPECIFIED: it must be FP32 or "
      "BF16");
  expectRefused(
      [](plan::Plan &p) {
        p.mutable_train()->set_precision(
            static_cast<plan::TrainConfig::Precision>(7));
      },
      "plan.train.precision is 7: it must be FP32 or BF16");
}

TEST(Bf16Plan, RefusesBadComputeCopies) {
  auto param = [](plan::Plan &p) -> plan::ParameterInfo & {
    return *named(p, "lm_head.weight").mutable_param();
  };
  expectRefused([&](plan::Plan &p) { param(p).set_compute_copy(9999); },
                "(lm_head.weight): param.compute_copy is 9999 but the plan "
                "has");
  expectRefused(
      [&](plan::Plan &p) {
        param(p).set_compute_copy(named(p, "lm_head.weight.grad").id());
      },
      "param.compute_copy names plan.tensors[9] (lm_head.weight.grad) of "
      "kind GRADIENT: it must be WEIGHT_COPY");
  expectRefused(
      [&](plan::Plan &p) {
        // Doubling the size stays within the arena: the head's copy follows.
        plan::Tensor &copy = named(p, "model.embed_tokens.weight.bf16");
        copy.set_dtype(plan::F32);
        copy.set_size_bytes(copy.size_bytes() * 2);
      },
      "(model.embed_tokens.weight.bf16), f32 [256, 16]: it must be bf16 "
      "[256, 16] like the parameter");
  expectRefused(
      [&](plan::Plan &p) {
        plan::Tensor &copy = named(p, "lm_head.weight.bf16");
        copy.clear_shape();
        copy.add_shape(16);
        copy.add_shape(256);
      },
      "bf16 [16, 256]: it must be bf16 [256, 16] like the parameter");
  expectRefused(
      [&](plan::Plan &p) {
        param(p).set_compute_copy(
            named(p, "model.embed_tokens.weight.bf16").id());
      },
      "which is already the copy of plan.tensors[0] "
      "(model.embed_tokens.weight): each parameter needs its own weight "
      "copy");
}

TEST(Bf16Plan, RefusesOrphanCopiesCopiesInFp32PlansAndAMissingInit) {
  expectRefused(
      [](plan::Plan &p) {
        named(p, "lm_head.weight").mutable_param()->set_compute_copy(0);
      },
      "(lm_head.weight.bf16) is a WEIGHT_COPY that no parameter names as "
      "its param.compute_copy");
  expectRefused(
      [](plan::Plan &p) {
        p.mutable_train()->set_precision(plan::TrainConfig::FP32);
      },
      "(model.embed_tokens.weight.bf16) is a WEIGHT_COPY but "
      "plan.train.precision is FP32: only BF16 plans and host parameters "
      "(optimizer offload) have weight copies of whole parameters");
  expectRefused(
      [](plan::Plan &p) {
        for (int i = 0; i < p.programs_size(); ++i)
          if (p.programs(i).kind() == plan::INIT)
            p.mutable_programs()->DeleteSubrange(i, 1);
      },
      "the plan has 2 WEIGHT_COPY tensors but no INIT program");
  expectRefused(
      [](plan::Plan &p) {
        named(p, "lm_head.weight.bf16")
            .set_kind(static_cast<plan::TensorKind>(9));
      },
      "has kind 9: it must be one of PARAMETER, GRADIENT, OPTIMIZER_STATE, "
      "INPUT, ACTIVATION, SCALAR, WEIGHT_COPY, BUFFER");
  // A BUFFER is a whole f32 tensor: a bf16 one is refused.
  expectRefused(
      [](plan::Plan &p) {
        plan::Tensor &t = named(p, "lm_head.weight.bf16");
        t.set_kind(plan::BUFFER);
        t.clear_param();
        named(p, "lm_head.weight").mutable_param()->set_compute_copy(0);
      },
      "is a BUFFER: buffers are whole f32 tensors of the arena");
}

TEST(Bf16Plan, MemoryReportShowsPrecisionAndWeightCopies) {
  plan::Plan p = tinyModelPlan(bf16Options());
  EXPECT_EQ(p.memory().weight_copy_bytes(), 2u * 256 * 16 * 2);
  std::string line = formatMemoryReport(p.memory(), "bf16");
  EXPECT_EQ(line.rfind("memory per rank (bf16): parameters 32.1 KiB | "
                       "weight copies 16.0 KiB | gradients ",
                       0),
            0u)
      << line;
  plan::Plan fp32 = tinyModelPlan();
  EXPECT_EQ(formatMemoryReport(fp32.memory(), "fp32").find("weight copies"),
            std::string::npos);
}

std::vector<uint16_t> bf16Copy(Trainer &t, const std::string &name) {
  absl::StatusOr<std::vector<uint8_t>> bytes = t.readTensor(name);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  std::vector<uint16_t> out(bytes.ok() ? bytes->size() / 2 : 0);
  if (bytes.ok())
    std::memcpy(out.data(), bytes->data(), bytes->size());
  return out;
}

// Every element of `name`'s copy is the rounded master.
void expectCopyFollowsMaster(Trainer &t, const std::string &name) {
  absl::StatusOr<absl::Span<float>> master = t.f32Tensor(name);
  ASSERT_TRUE(master.ok()) << master.status();
  std::vector<uint16_t> copy = bf16Copy(t, name + ".bf16");
  ASSERT_EQ(copy.size(), master->size());
  for (size_t i = 0; i < copy.size(); ++i)
    ASSERT_EQ(copy[i], roundToBf16((*master)[i])) << name << "[" << i << "]";
}

TEST(Bf16Trainer, InitFillsTheCopiesAndTheOptimizerRefreshesThem) {
  auto trainer = tinyTrainer(bf16Options());
  ASSERT_NE(trainer, nullptr);
  expectCopyFollowsMaster(*trainer, "model.embed_tokens.weight");
  expectCopyFollowsMaster(*trainer, "lm_head.weight");
  ASSERT_TRUE(trainer->trainStep().ok());
  expectCopyFollowsMaster(*trainer, "model.embed_tokens.weight");
  expectCopyFollowsMaster(*trainer, "lm_head.weight");
}

TEST(Bf16Trainer, TrainsLikeTheFp32PlanWhenComputeReadsTheMasters) {
  auto fp32 = tinyTrainer();
  auto bf16 = tinyTrainer(bf16Options());
  ASSERT_NE(fp32, nullptr);
  ASSERT_NE(bf16, nullptr);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(fp32->trainStep()->loss, bf16->trainStep()->loss);
}

TEST(Bf16Trainer, CheckpointsKeepMastersOnlyAndResumeRecastsTheCopies) {
  TinyModelOptions model = bf16Options();
  model.steps = 4;
  auto straight = tinyTrainer(model);
  ASSERT_NE(straight, nullptr);
  std::vector<double> losses;
  for (int i = 0; i < 4; ++i)
    losses.push_back(straight->trainStep()->loss);

  auto first = tinyTrainer(model);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(first->trainStep()->loss, losses[i]);
  absl::StatusOr<std::string> saved =
      first->saveCheckpoint(test::freshDir("bf16-resume"));
  ASSERT_TRUE(saved.ok()) << saved.status();
  for (const char *file : {"model.safetensors", "optimizer.safetensors"}) {
    absl::StatusOr<SafetensorsFile> st =
        SafetensorsFile::read(*saved + "/" + file);
    ASSERT_TRUE(st.ok()) << st.status();
    for (const SafetensorsTensor &e : st->tensors())
      EXPECT_EQ(e.name.find(".bf16"), std::string::npos) << e.name;
  }

  auto second = tinyTrainer(model);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(second->resume(*saved).ok());
  // The copies were cast from the restored masters, not left at their
  // freshly initialised values.
  expectCopyFollowsMaster(*second, "model.embed_tokens.weight");
  expectCopyFollowsMaster(*second, "lm_head.weight");
  for (int i = 2; i < 4; ++i)
    EXPECT_EQ(second->trainStep()->loss, losses[i]) << "step " << i + 1;
  EXPECT_EQ(test::trainedState(*second), test::trainedState(*straight));
  EXPECT_EQ(bf16Copy(*second, "lm_head.weight.bf16"),
            bf16Copy(*straight, "lm_head.weight.bf16"));
}

} // namespace
} // namespace braid
