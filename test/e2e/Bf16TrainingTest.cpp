// BF16 mixed precision on the CPU (docs/gpu-backend.md, "Precision"):
// llama-tiny-bf16 is llama-tiny with bf16 weights and activations in compute
// and fp32 masters, gradients and optimizer state. Trained on the same data,
// its losses follow the fp32 run's within kLossTolerance for 20 steps, and a
// run stopped, checkpointed and resumed is bit-exact.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/data/TokenData.h"
#include "runtime/train/Trainer.h"
#include "test/support/CompiledModel.h"

namespace braid {
namespace {

constexpr int kSteps = 20;
// bf16 keeps 8 significant bits: each rounding of a weight or activation is
// off by up to 2^-9 relative. Every kernel accumulates in f32, and the
// masters, gradients and moments stay f32, so the roundings do not compound
// through the optimizer: measured over these 20 steps (loss 5.54 falling to
// 3.72) the largest difference from the fp32 run was 0.002 nats. 0.02 nats
// (about 0.5% of the loss) leaves a tenfold margin and still catches a wrong
// cast, a stale weight copy, or a kernel that misreads bf16, each of which
// moves the loss by far more.
constexpr double kLossTolerance = 0.02;

std::unique_ptr<Trainer> makeTrainer(const std::string &model) {
  absl::StatusOr<LoadedPlan> plan = testing::compileModel(model);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok())
    return nullptr;
  absl::StatusOr<TokenData> data =
      TokenData::fromFile(testing::corpusPath(), TokenFormat::kText,
                          plan->proto.model().vocab_size());
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok())
    return nullptr;
  TrainerOptions options;
  options.totalSteps = kSteps;
  options.numThreads = 2;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::create(std::move(*plan), std::move(*data), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return trainer.ok() ? std::move(*trainer) : nullptr;
}

std::vector<double> train(Trainer &trainer, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    absl::StatusOr<StepResult> r = trainer.trainStep();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok())
      break;
    losses.push_back(r->loss);
  }
  return losses;
}

TEST(Bf16Training, LlamaTinyFollowsTheFp32Losses) {
  auto fp32 = makeTrainer("llama-tiny");
  auto bf16 = makeTrainer("llama-tiny-bf16");
  ASSERT_NE(fp32, nullptr);
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->plan().proto.train().precision(), plan::TrainConfig::BF16);
  EXPECT_FALSE(bf16->plan().weightCopies.empty());
  EXPECT_GT(bf16->plan().proto.memory().weight_copy_bytes(), 0u);
  std::vector<double> a = train(*fp32, kSteps);
  std::vector<double> b = train(*bf16, kSteps);
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), static_cast<size_t>(kSteps));
  double worst = 0;
  for (int i = 0; i < kSteps; ++i) {
    std::printf("step %2d  fp32 %.6f  bf16 %.6f  diff %+.6f\n", i + 1, a[i],
                b[i], b[i] - a[i]);
    ASSERT_TRUE(std::isfinite(b[i])) << "step " << i + 1;
    EXPECT_NEAR(b[i], a[i], kLossTolerance) << "step " << i + 1;
    worst = std::max(worst, std::fabs(b[i] - a[i]));
  }
  std::printf("largest difference %.6f (tolerance %.3f)\n", worst,
              kLossTolerance);
  // Both learn: the last loss is well below the first.
  EXPECT_LT(b.back(), b.front() - 1.0);
}

TEST(Bf16Training, ResumeIsBitExact) {
  auto straight = makeTrainer("llama-tiny-bf16");
  ASSERT_NE(straight, nullptr);
  std::vector<double> full = train(*straight, kSteps);
  ASSERT_EQ(full.size(), static_cast<size_t>(kSteps));

  const std::string dir = absl::StrCat(::testing::TempDir(), "/braid-bf16-",
                                       getpid(), "-resume");
  std::filesystem::remove_all(dir);
  auto first = makeTrainer("llama-tiny-bf16");
  ASSERT_NE(first, nullptr);
  std::vector<double> head = train(*first, kSteps / 2);
  absl::StatusOr<std::string> saved = first->saveCheckpoint(dir);
  ASSERT_TRUE(saved.ok()) << saved.status();

  auto second = makeTrainer("llama-tiny-bf16");
  ASSERT_NE(second, nullptr);
  absl::StatusOr<ResumeReport> from = second->resume(dir);
  ASSERT_TRUE(from.ok()) << from.status();
  std::vector<double> tail = train(*second, kSteps - kSteps / 2);
  head.insert(head.end(), tail.begin(), tail.end());
  ASSERT_EQ(head.size(), full.size());
  for (int i = 0; i < kSteps; ++i)
    EXPECT_EQ(head[i], full[i]) << "step " << i + 1;
  // Masters and weight copies alike.
  for (uint32_t id : straight->plan().parameters) {
    const std::string &name = straight->plan().proto.tensors(id).name();
    EXPECT_EQ(*second->readTensor(name), *straight->readTensor(name)) << name;
  }
  for (uint32_t id : straight->plan().weightCopies) {
    const std::string &name = straight->plan().proto.tensors(id).name();
    EXPECT_EQ(*second->readTensor(name), *straight->readTensor(name)) << name;
  }
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace braid
