// grad_norm and adamw on CUDA against their CPU twins.
//
// grad_norm: exact. Both sides cut every input into the same 4096-element
// blocks, sum each block in double over the same 8 lanes and tree, without
// fused multiply-adds, and add the block sums in order; the square root is
// correctly rounded on both.
//
// adamw: the element update is the CPU's sequence of correctly rounded f32
// operations (no contraction), so with identical scalars it is exact. The
// scalars are computed in double on the device from the device step values:
// CUDA's pow may differ from glibc's in the last place of a double, which
// can move a bias correction by one f32 ulp after rounding, and that ulp
// moves the update of a parameter by about 2^-23 relative to the update.
// After a few steps the difference stays within rtol 1e-6 plus atol 1e-7
// (parameters near 1, learning rates near 1e-2).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/common/TwinHarness.h"

namespace braid::gpu_test {
namespace {

TwinHarness &harness() {
  static TwinHarness *h = new TwinHarness({cuda::registerOptimizerKernels});
  return *h;
}

TEST(GradNormTest, FixedOrderMatchesCpuBitForBit) {
  TwinLaunch l;
  l.kernel = "grad_norm";
  const std::vector<std::vector<int64_t>> shapes = {
      {100, 100}, {4096}, {5}, {0}, {3, 4097}, {1}, {8191}};
  uint64_t seed = 1;
  for (const auto &s : shapes)
    l.ins.push_back(randomTensor(s, DType::kF32, seed++, -3.0f, 3.0f));
  l.outs.push_back(zeros({}, DType::kF32));
  EXPECT_TRUE(expectTwins(harness(), l, kExact));
  EXPECT_TRUE(expectTwins(harness(), l, kExact, GpuMode::kGraph));
}

TEST(GradNormTest, ManyInputsSpanSeveralLaunches) {
  // More inputs than one launch's table holds (128).
  TwinLaunch l;
  l.kernel = "grad_norm";
  for (int i = 0; i < 300; ++i)
    l.ins.push_back(randomTensor({(i * 37) % 900 + 1}, DType::kF32, 100 + i));
  l.outs.push_back(zeros({}, DType::kF32));
  EXPECT_TRUE(expectTwins(harness(), l, kExact));
}

TEST(GradNormTest, NoElements) {
  TwinLaunch l;
  l.kernel = "grad_norm";
  l.ins.push_back(zeros({0}, DType::kF32));
  l.outs.push_back(tensorOf({}, DType::kF32, {5.0f}));
  EXPECT_TRUE(expectTwins(harness(), l, kExact));
}

TwinLaunch adamwLaunch(int64_t n, float norm, double gradClip,
                       double weightDecay, float skip = 0) {
  TwinLaunch l;
  l.kernel = "adamw";
  l.ins.push_back(randomTensor({n}, DType::kF32, 1, -0.5f, 0.5f));
  l.ins.push_back(tensorOf({}, DType::kF32, {norm}));
  l.ins.push_back(tensorOf({}, DType::kF32, {skip}));
  l.outs.push_back(randomTensor({n}, DType::kF32, 2, -1.0f, 1.0f));
  l.outs.push_back(randomTensor({n}, DType::kF32, 3, -0.01f, 0.01f));
  l.outs.push_back(randomTensor({n}, DType::kF32, 4, 0.0f, 1e-4f));
  l.params.setFloat("beta1", 0.9);
  l.params.setFloat("beta2", 0.95);
  l.params.setFloat("eps", 1e-8);
  l.params.setFloat("weight_decay", weightDecay);
  l.params.setFloat("grad_clip", gradClip);
  return l;
}

// Steps 1..count with a changing learning rate, as a schedule gives them.
std::vector<StepValues> schedule(int count) {
  std::vector<StepValues> steps(count);
  for (int i = 0; i < count; ++i) {
    steps[i].step = i + 1;
    steps[i].update = i + 1;
    steps[i].lr = 1e-2 * (1.0 - 0.1 * i);
  }
  return steps;
}

constexpr Tolerance kAdamwTolerance{1e-6, 1e-7};

TEST(AdamwTest, StepsEager) {
  // Clipping active (norm above grad_clip), inactive, and off.
  for (auto [norm, clip] : {std::pair{5.0f, 1.0}, std::pair{0.5f, 1.0},
                            std::pair{5.0f, 0.0}}) {
    TwinLaunch l = adamwLaunch(10007, norm, clip, 0.1);
    absl::StatusOr<TwinOutputs> outs = harness().runSteps(l, schedule(4));
    ASSERT_TRUE(outs.ok()) << outs.status();
    EXPECT_TRUE(twinsAgree(*outs, kAdamwTolerance))
        << "norm " << norm << " grad_clip " << clip;
  }
}

// One capture at step 1 replayed for steps 1..5: the step and learning rate
// must come from device memory, not from the capture's launch arguments.
TEST(AdamwTest, StepsReplayedFromOneGraph) {
  TwinLaunch l = adamwLaunch(3001, 2.0f, 1.0, 0.01);
  absl::StatusOr<TwinOutputs> outs =
      harness().runSteps(l, schedule(5), GpuMode::kGraph);
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_TRUE(twinsAgree(*outs, kAdamwTolerance));
}

// A launch that ignored the device step values would repeat step 1's
// update; make sure the test above can tell: steps 1 and 2 differ.
TEST(AdamwTest, LaterStepsDifferFromTheFirst) {
  TwinLaunch l = adamwLaunch(257, 2.0f, 1.0, 0.01);
  std::vector<StepValues> first = schedule(1);
  std::vector<StepValues> again = {first[0], first[0]};
  absl::StatusOr<std::vector<HostTensor>> same =
      harness().runGpu(l, again, GpuMode::kGraph);
  absl::StatusOr<std::vector<HostTensor>> real =
      harness().runGpu(l, schedule(2), GpuMode::kGraph);
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_FALSE(closeTo((*same)[0], (*real)[0], kAdamwTolerance));
}

// A step that step_guard refused changes nothing, on either device.
TEST(AdamwTest, SkippedStepChangesNothing) {
  TwinLaunch l = adamwLaunch(1025, 2.0f, 1.0, 0.01, /*skip=*/1.0f);
  absl::StatusOr<std::vector<HostTensor>> gpu =
      harness().runGpu(l, schedule(2), GpuMode::kGraph);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (size_t i = 0; i < l.outs.size(); ++i)
    EXPECT_EQ((*gpu)[i].bytes, l.outs[i].bytes) << "output " << i;
}

// step_guard flags a NaN or infinite loss sum or norm, and only those.
TEST(StepGuardTest, FlagsNonFiniteInputs) {
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  for (auto [loss, norm] : {std::pair{2.0f, 1.0f}, std::pair{kNan, 1.0f},
                            std::pair{2.0f, kInf}, std::pair{-kInf, kNan}}) {
    TwinLaunch l;
    l.kernel = "step_guard";
    l.ins.push_back(tensorOf({}, DType::kF32, {loss}));
    l.ins.push_back(tensorOf({}, DType::kF32, {norm}));
    l.outs.push_back(tensorOf({}, DType::kF32, {-1.0f}));
    absl::StatusOr<TwinOutputs> outs = harness().runSteps(l, schedule(1));
    ASSERT_TRUE(outs.ok()) << outs.status();
    EXPECT_TRUE(twinsAgree(*outs, Tolerance{0, 0})) << loss << " " << norm;
    float flag;
    std::memcpy(&flag, outs->cpu[0].bytes.data(), sizeof flag);
    EXPECT_EQ(flag, std::isfinite(loss) && std::isfinite(norm) ? 0.0f : 1.0f);
  }
}

}  // namespace
}  // namespace braid::gpu_test
