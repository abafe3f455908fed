// The device layer as the Trainer uses it: the CPU device's arena access,
// input staging, program runs and scalar read-back, the factory's refusal
// of a device this build or machine cannot provide, and which plans need
// communicators.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/ThreadPool.h"
#include "runtime/comm/Ranks.h"
#include "runtime/device/DeviceFactory.h"
#include "runtime/device/cpu/CpuDevice.h"
#include "test/unit/runtime/TestKernels.h"
#include "test/unit/runtime/TinyModelPlan.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

LoadedPlan tinyLoaded() {
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(test::tinyModelPlan().SerializeAsString(),
               test::testKernelRegistry(), Device::kCPU);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return std::move(*plan);
}

TEST(CpuDevice, ReadsWritesAndZeroesTheArena) {
  LoadedPlan plan = tinyLoaded();
  DeviceOptions options;
  options.numThreads = 1;
  absl::StatusOr<std::unique_ptr<DeviceBackend>> device =
      createDevice(plan, options);
  ASSERT_TRUE(device.ok()) << device.status();
  DeviceBackend &d = **device;
  EXPECT_EQ(d.info().kind, Device::kCPU);
  EXPECT_EQ(d.info().threads, 1);
  ASSERT_NE(d.hostArena(), nullptr);
  const uint64_t offset = plan.proto.tensors(0).offset();
  const float in[3] = {1.5f, -2.0f, 3.25f};
  ASSERT_TRUE(d.write(offset, in, sizeof in).ok());
  float out[3] = {};
  ASSERT_TRUE(d.read(offset, out, sizeof out).ok());
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
  EXPECT_EQ(std::memcmp(d.hostArena() + offset, in, sizeof in), 0);
  ASSERT_TRUE(d.zero(offset, sizeof in).ok());
  ASSERT_TRUE(d.read(offset, out, sizeof out).ok());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(CpuDevice, StagesEveryMicroBatchRunsTheStepAndReadsBack) {
  LoadedPlan plan = tinyLoaded();
  absl::StatusOr<std::unique_ptr<CpuDevice>> device =
      CpuDevice::create(plan, /*numThreads=*/1);
  ASSERT_TRUE(device.ok()) << device.status();
  CpuDevice &d = **device;
  const int64_t numMicro = plan.proto.train().num_micro_batches();
  ASSERT_GE(numMicro, 2);
  ASSERT_TRUE(plan.tokens && plan.labels);
  const plan::Tensor &tokens = plan.proto.tensors(*plan.tokens);
  // Micro-batch m's tokens and labels are all m + 1.
  for (int64_t m = 0; m < numMicro; ++m)
    for (uint32_t id : {*plan.tokens, *plan.labels}) {
      absl::StatusOr<absl::Span<uint8_t>> staged = d.stageInput(id, m);
      ASSERT_TRUE(staged.ok()) << staged.status();
      EXPECT_EQ(staged->size(), tokens.size_bytes());
      auto *ids = reinterpret_cast<int32_t *>(staged->data());
      std::fill(ids, ids + staged->size() / 4, static_cast<int32_t>(m + 1));
    }
  EXPECT_EQ(d.stageInput(*plan.tokens, numMicro).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.stageInput(plan.proto.loss_tensor(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  StepValues values;
  values.lr = 1e-3;
  ASSERT_TRUE(d.run(plan::STEP, values).ok());
  EXPECT_EQ(d.stats().eagerRuns, 1);
  EXPECT_EQ(d.stats().graphReplays, 0);
  // The inputs hold what the last micro-batch staged.
  const auto *inArena =
      reinterpret_cast<const int32_t *>(d.hostArena() + tokens.offset());
  EXPECT_EQ(inArena[0], numMicro);
  absl::StatusOr<std::vector<float>> slots = d.readbacks();
  ASSERT_TRUE(slots.ok());
  ASSERT_EQ(slots->size(), plan.proto.num_readbacks());
  // The parameters are the arena's zeros, so every logit is 0: each loss
  // is ln(256) and every gradient 0. The last loss is the one left in the
  // loss tensor.
  float last = 0;
  ASSERT_TRUE(d.read(plan.proto.tensors(plan.proto.loss_tensor()).offset(),
                     &last, 4)
                  .ok());
  EXPECT_EQ((*slots)[plan.proto.loss_readbacks(numMicro - 1)], last);
  for (int64_t m = 0; m < numMicro; ++m)
    EXPECT_NEAR((*slots)[plan.proto.loss_readbacks(m)], std::log(256.0), 1e-5);
  EXPECT_EQ((*slots)[plan.proto.grad_norm_readback()], 0.0f);
  EXPECT_EQ((*slots)[plan.proto.step_skipped_readback()], 0.0f);

  absl::Status missing = d.run(plan::INIT, values);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(d.stats().eagerRuns, 1);
}

TEST(DeviceFactory, CudaIsRefusedWithAReasonWhereItCannotRun) {
  absl::Status s = probeDevice(Device::kCUDA);
  if (s.ok()) {
    EXPECT_TRUE(haveCudaBackend());
    return; // a machine with a usable GPU
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  if (haveCudaBackend())
    EXPECT_EQ(std::string(s.message()).rfind("cannot use a GPU: ", 0), 0u)
        << s;
  else
    EXPECT_NE(std::string(s.message()).find("built without the CUDA backend"),
              std::string::npos)
        << s;
  EXPECT_TRUE(probeDevice(Device::kCPU).ok());
}

TEST(DeviceFactory, SeveralRanksOrCollectivesNeedCommunicators) {
  LoadedPlan one = tinyLoaded();
  EXPECT_FALSE(planNeedsCommunicators(one));
  plan::Plan proto = test::tinyModelPlan();
  proto.mutable_mesh()->set_dp(2);
  absl::StatusOr<LoadedPlan> two = loadPlan(
      proto.SerializeAsString(), test::testKernelRegistry(), Device::kCPU);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_TRUE(planNeedsCommunicators(*two));
  // The CPU's collectives use the ranks' own communicators: none attached.
  if (launcherWorldSize())
    GTEST_SKIP() << "started by a launcher";
  absl::StatusOr<std::unique_ptr<Ranks>> ranks =
      Ranks::join(MeshShape{}, std::chrono::seconds(1));
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_TRUE(
      attachDeviceCommunicators(*two, **ranks, std::chrono::seconds(1)).ok());
  EXPECT_EQ((*ranks)->deviceAxis(MeshAxis::kDP), nullptr);
}

} // namespace
} // namespace braid
