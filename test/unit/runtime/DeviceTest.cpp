// The device layer as the Trainer uses it: the CPU device's arena access,
// input staging, program runs and scalar read-back, and the factory's
// refusal of a device this build or machine cannot provide.
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/ThreadPool.h"
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
  ThreadPool pool(1);
  absl::StatusOr<std::unique_ptr<DeviceBackend>> device =
      createDevice(plan, &pool, DeviceOptions());
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

TEST(CpuDevice, StagesInputsInPlaceRunsProgramsAndCollectsScalars) {
  LoadedPlan plan = tinyLoaded();
  ThreadPool pool(1);
  absl::StatusOr<std::unique_ptr<CpuDevice>> device =
      CpuDevice::create(plan, &pool);
  ASSERT_TRUE(device.ok()) << device.status();
  CpuDevice &d = **device;
  absl::StatusOr<absl::Span<uint8_t>> tokens = d.stageInput(plan.tokens);
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->data(),
            d.hostArena() + plan.proto.tensors(plan.tokens).offset());
  EXPECT_EQ(tokens->size(), plan.proto.tensors(plan.tokens).size_bytes());

  const uint32_t loss = plan.proto.loss_tensor();
  const uint32_t norm = plan.proto.grad_norm_tensor();
  const float a = 1.25f, b = 7.0f;
  ASSERT_TRUE(d.write(plan.proto.tensors(loss).offset(), &a, 4).ok());
  ASSERT_TRUE(d.write(plan.proto.tensors(norm).offset(), &b, 4).ok());
  ASSERT_TRUE(d.requestScalar(norm).ok());
  ASSERT_TRUE(d.requestScalar(loss).ok());
  absl::StatusOr<std::vector<float>> scalars = d.collectScalars();
  ASSERT_TRUE(scalars.ok());
  EXPECT_EQ(*scalars, std::vector<float>({7.0f, 1.25f}));
  EXPECT_TRUE(d.collectScalars()->empty());

  StepValues values;
  values.lr = 1e-3;
  ASSERT_TRUE(d.run("micro_batch", values).ok());
  ASSERT_TRUE(d.run("optimizer", values).ok());
  EXPECT_EQ(d.stats().eagerRuns, 2);
  EXPECT_EQ(d.stats().graphReplays, 0);
  absl::Status missing = d.run("init", values);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(d.stats().eagerRuns, 2);
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

} // namespace
} // namespace braid
