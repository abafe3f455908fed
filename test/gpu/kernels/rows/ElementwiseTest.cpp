// gelu, swiglu, add, dropout, split (and gradients) on CUDA against the CPU.
//
// Tolerances (see RowTestUtil.h):
//   add, dropout, split: exact in both dtypes. Each output is one f32
//     operation (a + b, x * factor) or a copy, rounded once: nothing can
//     differ, and dropout must draw the CPU's mask bit for bit.
//   gelu, swiglu and gradients: the CUDA kernels evaluate the CPU's exp and
//     the CPU's operations in the CPU's order without fused multiply-adds
//     (Elementwise.cu, ExpFloat.h), so both sides should give the same bits.
//     The tolerance kept here, f32 rtol 1e-5 atol 1e-6 and bf16 rtol 2^-7
//     (one rounding flip) atol 1e-6, is that of a few ulp on each operation;
//     it would not cover another exp: gelu_grad_input near x = -4 cancels
//     1 + tanh and 1 - tanh^2, where one ulp of exp moves dx by up to 2e-6.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerElementwiseKernels});
  return *h;
}

// 999 * 37 elements: not a multiple of any block or of the 4-wide vectors,
// so the scalar tail runs too.
const std::vector<int64_t> kShape = {999, 37};

Tolerance smoothTol(DType dt) {
  return dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-6}
                            : Tolerance{1e-5, 1e-6};
}

TEST(CudaElementwiseKernels, GeluMatchesCpu) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    const HostTensor x = randomTensor(kShape, dt, 1, -4.0f, 4.0f);
    const HostTensor dy = randomTensor(kShape, dt, 2);
    EXPECT_TRUE(twins(harness(), launchOf("gelu", {x}, {zeros(kShape, dt)}),
                      {smoothTol(dt)}));
    EXPECT_TRUE(twins(harness(),
                      launchOf("gelu_grad_input", {dy, x},
                               {zeros(kShape, dt)}),
                      {smoothTol(dt)}));
  }
}

TEST(CudaElementwiseKernels, SwigluMatchesCpu) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    const HostTensor gate = randomTensor(kShape, dt, 3, -4.0f, 4.0f);
    const HostTensor up = randomTensor(kShape, dt, 4, -2.0f, 2.0f);
    const HostTensor dy = randomTensor(kShape, dt, 5);
    EXPECT_TRUE(twins(harness(),
                      launchOf("swiglu", {gate, up}, {zeros(kShape, dt)}),
                      {smoothTol(dt)}));
    EXPECT_TRUE(twins(harness(),
                      launchOf("swiglu_grad_input", {dy, gate, up},
                               {zeros(kShape, dt), zeros(kShape, dt)}),
                      {smoothTol(dt)}));
  }
}

TEST(CudaElementwiseKernels, AddIsExact) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    EXPECT_TRUE(twins(harness(),
                      launchOf("add",
                               {randomTensor(kShape, dt, 6),
                                randomTensor(kShape, dt, 7)},
                               {zeros(kShape, dt)}),
                      {kExact}));
  }
}

TwinLaunch dropoutLaunch(const char *kernel, DType dt, double p,
                         int64_t offset, StepValues step) {
  KernelParams params;
  params.setFloat("p", p);
  params.setInt("rng_offset", offset);
  TwinLaunch l = launchOf(kernel, {randomTensor(kShape, dt, 8)},
                          {zeros(kShape, dt)}, params);
  l.step = step;
  return l;
}

TEST(CudaElementwiseKernels, DropoutDrawsTheCpuMask) {
  const StepValues step{3, 0.0, 0x1234abcdull};
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const char *kernel : {"dropout", "dropout_grad_input"})
      for (double p : {0.0, 0.1, 0.5}) {
        SCOPED_TRACE(::testing::Message()
                     << kernel << " " << dtypeLabel(dt) << " p=" << p);
        EXPECT_TRUE(twins(harness(), dropoutLaunch(kernel, dt, p, 5, step),
                          {kExact}));
      }
}

// Captured once, replayed with other step values: the mask must follow the
// step values in device memory, not the ones seen at capture.
TEST(CudaElementwiseKernels, DropoutFollowsStepValuesInGraphs) {
  const std::vector<StepValues> steps = {
      {1, 0.0, 99}, {3, 0.0, 99}, {2, 0.0, 99}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    const TwinLaunch l = dropoutLaunch("dropout", dt, 0.3, 7, steps.front());
    absl::StatusOr<TwinOutputs> outs =
        harness().runSteps(l, steps, GpuMode::kGraph);
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    EXPECT_TRUE(twinsAgree(*outs, kExact));
  }
}

// With tp_dim (docs/kernels.md, "Sequence parallel") each TP rank's part
// of a [B, S, H] activation draws the whole tensor's mask: the CUDA draw
// index must be the CPU's, for parts along each dimension.
TEST(CudaElementwiseKernels, DropoutOfAPartDrawsTheCpuMask) {
  const std::vector<int64_t> whole = {4, 36, 37};
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const char *kernel : {"dropout", "dropout_grad_input"})
      for (int64_t dim : {0, 1, 2})
        for (int64_t ranks : {2, 4}) {
          if (whole[dim] % ranks != 0)
            continue;
          std::vector<int64_t> part = whole;
          part[dim] /= ranks;
          for (int64_t r = 0; r < ranks; ++r) {
            SCOPED_TRACE(::testing::Message()
                         << kernel << " " << dtypeLabel(dt) << " tp_dim "
                         << dim << " rank " << r << " of " << ranks);
            KernelParams params;
            params.setFloat("p", 0.3);
            params.setInt("rng_offset", 5);
            params.setInt("tp_dim", dim);
            TwinLaunch l = launchOf(kernel, {randomTensor(part, dt, 30 + r)},
                                    {zeros(part, dt)}, params);
            l.step = StepValues{4, 0.0, 0x5eedull};
            l.step.tpRank = r;
            l.step.tpSize = ranks;
            EXPECT_TRUE(twins(harness(), l, {kExact}));
          }
        }
}

// With cp_dim (docs/kernels.md, "Context parallel") each CP rank's
// load-balanced part, and with tp_dim too each TP rank's part of it, draws
// the whole tensor's mask: the CUDA draw index must be the CPU's.
TEST(CudaElementwiseKernels, DropoutOfAContextParallelPartDrawsTheCpuMask) {
  const std::vector<int64_t> whole = {4, 48, 37};
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const char *kernel : {"dropout", "dropout_grad_input"})
      for (int64_t cp : {2, 4})
        for (int64_t tp : {1, 3}) {
          std::vector<int64_t> part = whole;
          part[1] /= cp * tp;
          for (int64_t r = 0; r < cp * tp; ++r) {
            SCOPED_TRACE(::testing::Message()
                         << kernel << " " << dtypeLabel(dt) << " CP " << cp
                         << " TP " << tp << " rank " << r);
            KernelParams params;
            params.setFloat("p", 0.3);
            params.setInt("rng_offset", 5);
            params.setInt("cp_dim", 1);
            if (tp > 1)
              params.setInt("tp_dim", 1);
            TwinLaunch l = launchOf(kernel, {randomTensor(part, dt, 50 + r)},
                                    {zeros(part, dt)}, params);
            l.step = StepValues{4, 0.0, 0x5eedull};
            l.step.cpRank = r / tp;
            l.step.cpSize = cp;
            l.step.tpRank = r % tp;
            l.step.tpSize = tp;
            EXPECT_TRUE(twins(harness(), l, {kExact}));
          }
        }
}

TEST(CudaElementwiseKernels, SplitIsExact) {
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int parts : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << dtypeLabel(dt) << " parts "
                                        << parts);
      const int64_t k = 19;
      const std::vector<int64_t> whole = {4, 7, parts * k}, part = {4, 7, k};
      std::vector<HostTensor> partOuts, partIns;
      for (int i = 0; i < parts; ++i) {
        partOuts.push_back(zeros(part, dt));
        partIns.push_back(randomTensor(part, dt, 20 + i));
      }
      EXPECT_TRUE(twins(harness(),
                        launchOf("split", {randomTensor(whole, dt, 9)},
                                 partOuts),
                        {kExact}));
      EXPECT_TRUE(twins(harness(),
                        launchOf("split_grad_input", partIns,
                                 {zeros(whole, dt)}),
                        {kExact}));
    }
}

} // namespace
} // namespace braid::gpu_test::rows_test
