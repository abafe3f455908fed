// layer_norm and rms_norm (and their gradients) on CUDA against the CPU.
//
// Tolerances (see RowTestUtil.h for the general rationale):
//   forward, f32: y, mean, rstd rtol 1e-5, atol 1e-5: row sums of D <= 1030
//     values of magnitude <= 1 are added in another order (error about
//     sqrt(D) * 2^-24 relative), then one division and sqrt.
//   grad_input, f32: rtol 1e-4, atol 2e-5: dx = rstd * (g - mean(g) -
//     xhat * mean(g xhat)) cancels terms of magnitude ~ rstd * 1.5 <= 3.
//   grad_weight, f32 output: rtol 1e-5, atol 1e-4: column sums of up to 300
//     terms of magnitude <= 3 (xhat * dy), chunked on the GPU, sequential on
//     the CPU: 300 * 3 * 2^-24 ~ 5e-5.
//   bf16 outputs: rtol 2^-7 (one rounding flip) plus atol 4e-3 for dx, whose
//     cancelling terms reach 3 (a flip of a value near 0 is absorbed by
//     atol, anything wrong is not). bf16 inputs with f32 weight gradients
//     keep the f32 tolerance: only the order of f32 additions differs.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerNormKernels});
  return *h;
}

struct NormCase {
  std::vector<int64_t> lead; // leading dims of x
  int64_t d;
};

std::vector<int64_t> withLast(std::vector<int64_t> lead, int64_t d) {
  lead.push_back(d);
  return lead;
}

const std::vector<NormCase> kCases = {
    {{3, 100}, 72},  // 300 rows: several column chunks; D not a warp multiple
    {{2, 3}, 1030},  // D above four times the block size
    {{5}, 1},        // D = 1
    {{2, 1, 4}, 33}, // rank 4
};

KernelParams epsParams() {
  KernelParams p;
  p.setFloat("eps", 1e-5);
  return p;
}

void runNormCase(bool layer, DType dt, const NormCase &c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << (layer ? "layer_norm " : "rms_norm ") << dtypeLabel(dt)
               << " D=" << c.d);
  TwinHarness &h = harness();
  const std::vector<int64_t> xs = withLast(c.lead, c.d);
  const HostTensor x = randomTensor(xs, dt, seed, -1.0f, 1.0f);
  // A non-zero row mean, so that layer_norm's centring matters.
  HostTensor xShift = x;
  for (int64_t i = 0; i < xShift.numel(); ++i) {
    const float v = xShift.at(i) + 0.25f;
    if (dt == DType::kF32)
      xShift.f32()[i] = v;
    else
      xShift.bf16()[i] = toBf16(v);
  }
  const HostTensor gamma = randomTensor({c.d}, dt, seed + 1, 0.5f, 1.5f);
  const HostTensor beta = randomTensor({c.d}, dt, seed + 2, -0.5f, 0.5f);
  const HostTensor dy = randomTensor(xs, dt, seed + 3, -1.0f, 1.0f);
  const bool isBf16 = dt == DType::kBF16;
  const Tolerance fwd = isBf16 ? Tolerance{kBf16Rtol, 1e-3}
                               : Tolerance{1e-5, 1e-5};
  const Tolerance stats{1e-5, 1e-5};
  const Tolerance gradIn = isBf16 ? Tolerance{kBf16Rtol, 4e-3}
                                  : Tolerance{1e-4, 2e-5};
  const Tolerance gradW32{1e-5, 1e-4};
  const Tolerance gradW16{kBf16Rtol, 1e-3};

  std::vector<HostTensor> fwdIns = {xShift, gamma};
  std::vector<HostTensor> fwdOuts = {zeros(xs, dt)};
  if (layer) {
    fwdIns.push_back(beta);
    fwdOuts.push_back(zeros(c.lead, DType::kF32));
  }
  fwdOuts.push_back(zeros(c.lead, DType::kF32));
  const TwinLaunch fwdLaunch = launchOf(layer ? "layer_norm" : "rms_norm",
                                        fwdIns, fwdOuts, epsParams());
  EXPECT_TRUE(twins(h, fwdLaunch, {fwd, stats, stats}));
  const std::vector<HostTensor> saved = cpuOutputs(h, fwdLaunch);
  if (saved.empty())
    return;

  // Gradient of the input.
  std::vector<HostTensor> giIns = {dy, xShift, gamma};
  if (layer)
    giIns.push_back(saved[1]);
  giIns.push_back(saved[layer ? 2 : 1]);
  EXPECT_TRUE(twins(h,
                    launchOf(layer ? "layer_norm_grad_input"
                                   : "rms_norm_grad_input",
                             giIns, {zeros(xs, dt)}),
                    {gradIn}));

  // Gradient of the weights: f32 outputs, and bf16 outputs over bf16
  // inputs; overwritten and accumulated.
  std::vector<HostTensor> gwIns = {dy, xShift};
  if (layer)
    gwIns.push_back(saved[1]);
  gwIns.push_back(saved[layer ? 2 : 1]);
  std::vector<DType> outTypes = {DType::kF32};
  if (isBf16)
    outTypes.push_back(DType::kBF16);
  for (DType ot : outTypes)
    for (int accumulate : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "grad_weight out "
                                        << dtypeLabel(ot) << " accumulate "
                                        << accumulate);
      std::vector<HostTensor> outs = {
          randomTensor({c.d}, ot, seed + 4, -2.0f, 2.0f)};
      if (layer)
        outs.push_back(randomTensor({c.d}, ot, seed + 5, -2.0f, 2.0f));
      KernelParams p;
      p.setInt("accumulate", accumulate);
      const TwinLaunch gw = launchOf(
          layer ? "layer_norm_grad_weight" : "rms_norm_grad_weight", gwIns,
          outs, p);
      EXPECT_TRUE(twins(h, gw, {ot == DType::kF32 ? gradW32 : gradW16}));
      EXPECT_TRUE(deterministic(h, gw));
    }
}

TEST(CudaNormKernels, LayerNormMatchesCpu) {
  uint64_t seed = 100;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const NormCase &c : kCases)
      runNormCase(true, dt, c, seed += 10);
}

TEST(CudaNormKernels, RmsNormMatchesCpu) {
  uint64_t seed = 200;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const NormCase &c : kCases)
      runNormCase(false, dt, c, seed += 10);
}

// A small workspace forces fewer column chunks; the result must still match.
TEST(CudaNormKernels, WeightGradientWithoutWorkspace) {
  TwinHarness h({cuda::registerNormKernels}, 0);
  const std::vector<int64_t> xs = {400, 40};
  const HostTensor x = randomTensor(xs, DType::kF32, 7);
  const HostTensor gamma = randomTensor({40}, DType::kF32, 8, 0.5f, 1.5f);
  const TwinLaunch fwd =
      launchOf("rms_norm", {x, gamma},
               {zeros(xs, DType::kF32), zeros({400}, DType::kF32)},
               epsParams());
  const std::vector<HostTensor> saved = cpuOutputs(h, fwd);
  ASSERT_EQ(saved.size(), 2u);
  KernelParams p;
  p.setInt("accumulate", 0);
  const TwinLaunch gw = launchOf(
      "rms_norm_grad_weight",
      {randomTensor(xs, DType::kF32, 9), x, saved[1]},
      {zeros({40}, DType::kF32)}, p);
  // 400 rows summed in one chunk against the CPU's sequential order.
  EXPECT_TRUE(twins(h, gw, {Tolerance{1e-5, 2e-4}}));
}

} // namespace
} // namespace braid::gpu_test::rows_test
