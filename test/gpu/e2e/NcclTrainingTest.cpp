// End to end on a GPU through NCCL (docs/parallel.md, "GPU: NCCL"): a plan
// whose step program has collectives, at data_parallel 1, trains on the
// CUDA device with its collectives on the rank's NCCL communicators (made as
// braid-run makes them: Ranks::join, then attachDeviceCommunicators) and
// gives the losses and gradient norms of the same run without collectives.
// The programs with collectives run eagerly (CudaDevice.h says why); the
// one without is captured.
//
// The plans are made at build time (test/e2e/Inputs/collective_plans.sh),
// so that a bundle for a machine without the compiler carries them.
// main() (test/gpu/GpuTestMain.cpp) exits with ctest's skip code when there
// is no device or no NCCL.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/CpuKernels.h"
#include "kernels/cuda/CudaKernels.h"
#include "runtime/comm/Ranks.h"
#include "runtime/data/TokenData.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/train/Trainer.h"

namespace braid {
namespace {

constexpr int kSteps = 8;
// The hand-made plan's collectives are sums over one rank, which leave every
// value as it is, and it launches the reference's kernels on stream 0 in the
// same order: the runs agree bit for bit (on the CPU:
// test/e2e/collectives-at-dp1.test). The bound, the project's for
// equivalent layouts, allows for ZeRO's plan, which reaches the same sums
// in another order.
constexpr double kRelativeTolerance = 1e-5;
constexpr std::chrono::seconds kCommTimeout(60);

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

std::string planPath(const std::string &name) {
  return std::string(BRAID_NCCL_PLANS_DIR) + "/" + name + ".plan";
}

// Why the build could not make collectives.plan, or "".
std::string whyNoPlan() {
  std::ifstream why(std::string(BRAID_NCCL_PLANS_DIR) + "/collectives.why");
  std::stringstream text;
  text << why.rdbuf();
  return text.str();
}

struct TrainedRun {
  std::vector<double> losses;
  std::vector<float> gradNorms;
  DeviceStats stats;
  bool nccl = false;
};

// kSteps of `plan` on the GPU; with `ranks`, through its communicators.
TrainedRun train(const std::string &plan, Ranks *ranks) {
  TrainedRun run;
  absl::StatusOr<LoadedPlan> loaded =
      loadPlanFile(planPath(plan), registry(), Device::kCUDA);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok())
    return run;
  if (ranks != nullptr) {
    EXPECT_TRUE(planNeedsCommunicators(*loaded));
    absl::Status attached =
        attachDeviceCommunicators(*loaded, *ranks, kCommTimeout);
    EXPECT_TRUE(attached.ok()) << attached;
    if (!attached.ok())
      return run;
    run.nccl = ranks->deviceAxis(MeshAxis::kDP) != nullptr;
  }
  absl::StatusOr<TokenData> data = TokenData::fromFile(
      std::string(BRAID_DATA_DIR) + "/tinyshakespeare.txt", TokenFormat::kText,
      loaded->proto.model().vocab_size());
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok())
    return run;
  TrainerOptions options;
  options.totalSteps = kSteps;
  options.numThreads = 4;
  options.cudaGraphs = true;
  options.ranks = ranks;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::create(std::move(*loaded), std::move(*data), options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok())
    return run;
  for (int i = 0; i < kSteps; ++i) {
    absl::StatusOr<StepResult> r = (*trainer)->trainStep();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok())
      break;
    run.losses.push_back(r->loss);
    run.gradNorms.push_back(r->gradNorm);
  }
  run.stats = (*trainer)->device().stats();
  return run;
}

TEST(NcclTraining, CollectivesAtDataParallelOneGoThroughNccl) {
  ASSERT_EQ(whyNoPlan(), "");
  if (launcherWorldSize())
    GTEST_SKIP() << "started by a launcher";
  const TrainedRun reference = train("reference", nullptr);
  absl::StatusOr<std::unique_ptr<Ranks>> ranks =
      Ranks::join(MeshShape{}, kCommTimeout);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  const TrainedRun nccl = train("collectives", ranks->get());
  ASSERT_TRUE(nccl.nccl) << "no NCCL communicator was attached";
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(nccl.losses.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    std::printf("step %d  reference %.8f  nccl %.8f  grad norm %.6f %.6f\n",
                i + 1, reference.losses[i], nccl.losses[i],
                reference.gradNorms[i], nccl.gradNorms[i]);
    ASSERT_TRUE(std::isfinite(nccl.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(nccl.losses[i], reference.losses[i],
                kRelativeTolerance * std::fabs(reference.losses[i]))
        << "step " << i + 1;
    EXPECT_NEAR(nccl.gradNorms[i], reference.gradNorms[i],
                kRelativeTolerance * std::fabs(reference.gradNorms[i]))
        << "step " << i + 1;
  }
  EXPECT_LT(nccl.losses.back(), nccl.losses.front());
  // The step program runs collectives: never captured. The reference's is.
  EXPECT_EQ(nccl.stats.graphCaptures, 0);
  EXPECT_EQ(nccl.stats.graphReplays, 0);
  EXPECT_GE(nccl.stats.eagerRuns, kSteps);
  EXPECT_EQ(reference.stats.graphCaptures, 1);
}

TEST(NcclTraining, WithoutCommunicatorsTheDeviceRefusesThePlan) {
  ASSERT_EQ(whyNoPlan(), "");
  absl::StatusOr<LoadedPlan> plan =
      loadPlanFile(planPath("collectives"), registry(), Device::kCUDA);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<std::unique_ptr<DeviceBackend>> device =
      createDevice(*plan, DeviceOptions{});
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(device.status().message().find(
                "which on a GPU go over NCCL, but no NCCL communicators were "
                "made for this run"),
            std::string::npos)
      << device.status();
}

} // namespace
} // namespace braid
