// End to end on a GPU (docs/gpu-backend.md, "Tests"): llama-tiny in BF16
// trained 20 steps with --device=cuda follows the CPU FP32 run of llama-tiny
// on the same data within kLossTolerance; the losses and gradient norms with
// CUDA graphs on and off are identical; and a run saved half way and resumed
// is bit-exact; mixtral-tiny and deepseek-tiny follow their CPU runs.
// Plans are compiled with this build's braidc.
//
// main() (test/gpu/GpuTestMain.cpp) exits with ctest's skip code when the
// driver shows no device; a device the backend cannot use (no cuBLASLt, say)
// skips each test with the probe's sentence.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "runtime/data/TokenData.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/Trainer.h"

namespace braid {
namespace {

constexpr int kSteps = 20;
// bf16 storage rounds each value by up to 2^-9 relative; the CPU run of the
// same BF16 plan stays within 0.002 nats of the FP32 run over these 20 steps
// (test/e2e/Bf16TrainingTest.cpp, tolerance 0.02). On the GPU the f32
// accumulations also run in another order (cuBLASLt's tiling, parallel
// reductions), which can flip some bf16 roundings, so the bound is wider:
// 0.05 nats, about 1% of the loss (5.5 falling to 3.7), still far below what
// a kernel computing something else would move it by.
constexpr double kLossTolerance = 0.05;

// Every CPU and CUDA kernel, independent of what the default registry holds.
const KernelRegistry &registry() {
  static const KernelRegistry *r = [] {
    auto *reg = new KernelRegistry();
    absl::Status cpu = registerCpuKernels(*reg);
    absl::Status gpu = registerCudaKernels(*reg);
    if (!cpu.ok() || !gpu.ok()) {
      std::fprintf(stderr, "cannot build the kernel registry: %s %s\n",
                   std::string(cpu.message()).c_str(),
                   std::string(gpu.message()).c_str());
      std::abort();
    }
    return reg;
  }();
  return *r;
}

// Why the CUDA backend cannot run here, or "" when it can.
std::string unusable() {
  static const std::string *why = [] {
    absl::Status s = probeDevice(Device::kCUDA);
    return new std::string(s.ok() ? "" : std::string(s.message()));
  }();
  return *why;
}

#define SKIP_WITHOUT_A_USABLE_GPU()                                            \
  do {                                                                         \
    if (std::string why = unusable(); !why.empty())                            \
      GTEST_SKIP() << why;                                                     \
  } while (0)

// The plan of models/<model>.pbtxt, compiled once per test process with
// braidc's `flags` (e.g. "--offload=activations"), named by `variant`.
std::string compile(const std::string &model, const std::string &flags = "",
                    const std::string &variant = "") {
  std::string dir = absl::StrCat(::testing::TempDir(), "/braid-gpu-", getpid());
  std::filesystem::create_directories(dir);
  std::string plan = dir + "/" + model + variant + ".plan";
  if (!std::filesystem::exists(plan)) {
    std::string cmd = absl::StrCat(BRAID_BINARY_DIR, "/bin/braidc ",
                                   BRAID_SOURCE_DIR, "/models/", model,
                                   ".pbtxt ", flags, " -o ", plan, " 2>&1");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  return plan;
}

std::unique_ptr<Trainer> makeTrainer(const std::string &model, Device device,
                                     bool graphs,
                                     const std::string &planPath = "") {
  absl::StatusOr<LoadedPlan> plan = loadPlanFile(
      planPath.empty() ? compile(model) : planPath, registry(), device);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok())
    return nullptr;
  absl::StatusOr<TokenData> data = TokenData::fromFile(
      std::string(BRAID_DATA_DIR) + "/tinyshakespeare.txt", TokenFormat::kText,
      plan->proto.model().vocab_size());
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok())
    return nullptr;
  TrainerOptions options;
  options.totalSteps = kSteps;
  options.numThreads = 4;
  options.cudaGraphs = graphs;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::create(std::move(*plan), std::move(*data), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return trainer.ok() ? std::move(*trainer) : nullptr;
}

struct TrainedRun {
  std::vector<double> losses;
  std::vector<float> gradNorms;
  DeviceStats stats;
};

void trainSteps(Trainer &trainer, int steps, TrainedRun &run) {
  for (int i = 0; i < steps; ++i) {
    absl::StatusOr<StepResult> r = trainer.trainStep();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok())
      break;
    run.losses.push_back(r->loss);
    run.gradNorms.push_back(r->gradNorm);
  }
  run.stats = trainer.device().stats();
}

TrainedRun train(const std::string &model, Device device, bool graphs,
                 const LoadedPlan **planOut = nullptr,
                 std::unique_ptr<Trainer> *keep = nullptr) {
  TrainedRun run;
  std::unique_ptr<Trainer> trainer = makeTrainer(model, device, graphs);
  if (trainer == nullptr)
    return run;
  trainSteps(*trainer, kSteps, run);
  if (planOut != nullptr)
    *planOut = &trainer->plan();
  if (keep != nullptr)
    *keep = std::move(trainer);
  return run;
}

// The runs a device makes in kSteps steps of `plan`: INIT once, then the
// STEP program once per step. With graphs, each program's first run is
// eager, STEP's second is captured, and the rest replay.
DeviceStats expectedStats(const LoadedPlan &plan, bool graphs) {
  const int64_t init = plan.program(plan::INIT) != nullptr ? 1 : 0;
  DeviceStats s;
  if (!graphs) {
    s.eagerRuns = init + kSteps;
    return s;
  }
  s.eagerRuns = init + 1;
  s.graphCaptures = 1;
  s.graphReplays = kSteps - 2;
  return s;
}

void expectStats(const DeviceStats &got, const DeviceStats &want) {
  EXPECT_EQ(got.eagerRuns, want.eagerRuns);
  EXPECT_EQ(got.graphCaptures, want.graphCaptures);
  EXPECT_EQ(got.graphReplays, want.graphReplays);
}

TEST(GpuTraining, LlamaTinyBf16FollowsTheCpuFp32Losses) {
  SKIP_WITHOUT_A_USABLE_GPU();
  TrainedRun cpu = train("llama-tiny", Device::kCPU, false);
  std::unique_ptr<Trainer> keep;
  const LoadedPlan *plan = nullptr;
  TrainedRun gpu = train("llama-tiny-bf16", Device::kCUDA, true, &plan, &keep);
  ASSERT_EQ(cpu.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(gpu.losses.size(), static_cast<size_t>(kSteps));
  double worst = 0;
  for (int i = 0; i < kSteps; ++i) {
    std::printf("step %2d  cpu fp32 %.6f  gpu bf16 %.6f  diff %+.6f  "
                "grad norm cpu %.4f gpu %.4f\n",
                i + 1, cpu.losses[i], gpu.losses[i],
                gpu.losses[i] - cpu.losses[i], cpu.gradNorms[i],
                gpu.gradNorms[i]);
    ASSERT_TRUE(std::isfinite(gpu.losses[i])) << "step " << i + 1;
    ASSERT_TRUE(std::isfinite(gpu.gradNorms[i])) << "step " << i + 1;
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], kLossTolerance)
        << "step " << i + 1;
    worst = std::max(worst, std::fabs(gpu.losses[i] - cpu.losses[i]));
  }
  std::printf("largest difference %.6f (tolerance %.3f)\n", worst,
              kLossTolerance);
  // It learns: the last loss is well below the first.
  EXPECT_LT(gpu.losses.back(), gpu.losses.front() - 1.0);
  // Graphs were used: each program captured once, then replayed.
  ASSERT_NE(plan, nullptr);
  expectStats(gpu.stats, expectedStats(*plan, true));
}

// The mixture-of-experts models in FP32 (docs/moe.md): the CUDA router,
// permutation, grouped GEMMs and balancing losses train as the CPU's do,
// within f32 summation order over 20 steps (an expert chosen differently
// by a last-bit tie would move a loss far less than a wrong kernel).
TEST(GpuTraining, MoeModelsFollowTheCpuLosses) {
  SKIP_WITHOUT_A_USABLE_GPU();
  constexpr double kMoeTolerance = 2e-3;
  for (const char *model : {"mixtral-tiny", "deepseek-tiny"}) {
    SCOPED_TRACE(model);
    TrainedRun cpu = train(model, Device::kCPU, false);
    std::unique_ptr<Trainer> keep;
    const LoadedPlan *plan = nullptr;
    TrainedRun gpu = train(model, Device::kCUDA, true, &plan, &keep);
    ASSERT_EQ(cpu.losses.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(gpu.losses.size(), static_cast<size_t>(kSteps));
    double worst = 0;
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_NEAR(gpu.losses[i], cpu.losses[i], kMoeTolerance)
          << "step " << i + 1;
      worst = std::max(worst, std::fabs(gpu.losses[i] - cpu.losses[i]));
    }
    std::printf("%s: largest loss difference cuda - cpu %.2e over %d "
                "steps (tolerance %.0e)\n",
                model, worst, kSteps, kMoeTolerance);
    EXPECT_LT(gpu.losses.back(), gpu.losses.front() - 1.0);
    ASSERT_NE(plan, nullptr);
    expectStats(gpu.stats, expectedStats(*plan, true));
  }
}

TEST(GpuTraining, GraphsOnAndOffGiveIdenticalLosses) {
  SKIP_WITHOUT_A_USABLE_GPU();
  std::unique_ptr<Trainer> keepOn, keepOff;
  const LoadedPlan *planOn = nullptr, *planOff = nullptr;
  TrainedRun on =
      train("llama-tiny-bf16", Device::kCUDA, true, &planOn, &keepOn);
  // One device at a time, as braid-run has.
  keepOn.reset();
  TrainedRun off =
      train("llama-tiny-bf16", Device::kCUDA, false, &planOff, &keepOff);
  ASSERT_EQ(on.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(off.losses.size(), static_cast<size_t>(kSteps));
  // A graph launches the kernels an eager run launches, with the same
  // arguments and the same cuBLASLt algorithms, and every kernel is
  // deterministic: bit for bit the same.
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(on.losses[i], off.losses[i]) << "step " << i + 1;
    EXPECT_EQ(on.gradNorms[i], off.gradNorms[i]) << "step " << i + 1;
  }
  ASSERT_NE(planOff, nullptr);
  expectStats(off.stats, expectedStats(*planOff, false));
  EXPECT_GT(on.stats.graphReplays, 0);
}

// llama-tiny-bf16 compiled with `flags` (plan suffix `suffix`), trained
// kSteps with CUDA graphs; both arenas' high-water marks must be the
// plan's and the graphs must have replayed. Its memory report in `memory`.
TrainedRun trainOffloaded(const std::string &flags, const std::string &suffix,
                          plan::MemoryReport &memory) {
  TrainedRun run;
  std::unique_ptr<Trainer> trainer =
      makeTrainer("llama-tiny-bf16", Device::kCUDA, true,
                  compile("llama-tiny-bf16", flags, suffix));
  EXPECT_NE(trainer, nullptr);
  if (trainer == nullptr)
    return run;
  memory = trainer->plan().proto.memory();
  EXPECT_GT(memory.host_bytes(), 0u);
  trainSteps(*trainer, kSteps, run);
  EXPECT_EQ(run.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(run.stats.arenaHighWater, memory.arena_bytes());
  EXPECT_EQ(run.stats.hostArenaHighWater, memory.host_bytes());
  EXPECT_GT(run.stats.graphReplays, 0);
  return run;
}

// Activation offload: the saved activations go to the pinned host arena
// and back on the copy stream (cudaMemcpyAsync, captured into the graph),
// the numbers stay the same bit for bit, and both arenas' measured
// high-water marks are the plan's.
TEST(GpuTraining, ActivationOffloadTrainsAsWithout) {
  SKIP_WITHOUT_A_USABLE_GPU();
  TrainedRun plain = train("llama-tiny-bf16", Device::kCUDA, true);
  plan::MemoryReport memory;
  TrainedRun run = trainOffloaded("--offload=activations", "-offload", memory);
  ASSERT_EQ(plain.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(run.losses.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(run.losses[i], plain.losses[i]) << "step " << i + 1;
    EXPECT_EQ(run.gradNorms[i], plain.gradNorms[i]) << "step " << i + 1;
  }
}

// Optimizer offload: masters and moments in the pinned host arena, AdamW
// on the CPU as host functions on the host stream (captured into the
// graph), the gradients out and the bf16 weights back on the copy streams.
// The host's AdamW and the GPU's round differently (no fused multiply-add
// on one of them), so the losses follow the GPU's closely, not bit for bit;
// the first, before any update, is the same.
TEST(GpuTraining, OptimizerOffloadTrainsAsWithout) {
  SKIP_WITHOUT_A_USABLE_GPU();
  TrainedRun plain = train("llama-tiny-bf16", Device::kCUDA, true);
  plan::MemoryReport memory;
  TrainedRun run =
      trainOffloaded("--offload=optimizer", "-optimizer-offload", memory);
  EXPECT_EQ(memory.optimizer_bytes(), 0u);
  ASSERT_EQ(plain.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(run.losses.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    std::printf("step %2d  device adamw %.6f  host adamw %.6f\n", i + 1,
                plain.losses[i], run.losses[i]);
    EXPECT_NEAR(run.losses[i], plain.losses[i], 1e-3 * plain.losses[0])
        << "step " << i + 1;
  }
  EXPECT_EQ(run.losses[0], plain.losses[0]);
}

// Checkpoints go through the device: masters and moments copied out and in,
// gradients zeroed, and "init" run again (captured this time) for the bf16
// weight copies.
TEST(GpuTraining, ResumeIsBitExact) {
  SKIP_WITHOUT_A_USABLE_GPU();
  std::unique_ptr<Trainer> straight =
      makeTrainer("llama-tiny-bf16", Device::kCUDA, true);
  ASSERT_NE(straight, nullptr);
  TrainedRun full;
  trainSteps(*straight, kSteps, full);
  ASSERT_EQ(full.losses.size(), static_cast<size_t>(kSteps));

  const std::string dir = absl::StrCat(::testing::TempDir(), "/braid-gpu-",
                                       getpid(), "-resume");
  std::filesystem::remove_all(dir);
  TrainedRun resumed;
  {
    std::unique_ptr<Trainer> first =
        makeTrainer("llama-tiny-bf16", Device::kCUDA, true);
    ASSERT_NE(first, nullptr);
    trainSteps(*first, kSteps / 2, resumed);
    absl::StatusOr<std::string> saved = first->saveCheckpoint(dir);
    ASSERT_TRUE(saved.ok()) << saved.status();
  }
  std::unique_ptr<Trainer> second =
      makeTrainer("llama-tiny-bf16", Device::kCUDA, true);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<ResumeReport> from = second->resume(dir);
  ASSERT_TRUE(from.ok()) << from.status();
  trainSteps(*second, kSteps - kSteps / 2, resumed);
  ASSERT_EQ(resumed.losses.size(), full.losses.size());
  for (int i = 0; i < kSteps; ++i)
    EXPECT_EQ(resumed.losses[i], full.losses[i]) << "step " << i + 1;
  // Masters and weight copies alike.
  std::vector<uint32_t> ids = straight->plan().parameters;
  ids.insert(ids.end(), straight->plan().weightCopies.begin(),
             straight->plan().weightCopies.end());
  for (uint32_t id : ids) {
    const std::string &name = straight->plan().proto.tensors(id).name();
    absl::StatusOr<std::vector<uint8_t>> a = straight->readTensor(name);
    absl::StatusOr<std::vector<uint8_t>> b = second->readTensor(name);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    EXPECT_EQ(*a, *b) << name;
  }
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace braid
