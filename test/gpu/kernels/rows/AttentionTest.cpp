// attention and attention_grad_input (the reference path) on CUDA against
// the CPU.
//
// Tolerances (see RowTestUtil.h):
//   probs f32: rtol 1e-5, atol 1e-7. Scores are dot products of Dh <= 64
//     values (another order on the GPU), then softmax with expf: a few ulp.
//   o, dq, dk, dv f32: rtol 1e-4, atol 2e-5 (3e-4 for S = 2100). Sums over
//     up to S weighted head rows, with values of magnitude <= 1 and weights
//     that sum to about 1 (o) or to S * |dS| (dk, dv over many query rows):
//     the absolute error grows with the number of terms, ~ S * 2^-24.
//   bf16: rtol 2^-7 (one rounding flip); atol 2e-3 for o and the
//     gradients, whose sums cancel, and 1e-6 for probs (values >= 1/S).
// The backward launches take the CPU forward's probs as input, so both
// sides start from the same stored probabilities. Dropout cases check that
// the GPU draws the CPU's mask (a wrong mask moves values by O(1)), also
// when the launch is captured in a CUDA graph and replayed with other step
// values.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerAttentionKernels});
  return *h;
}

struct AttnCase {
  int64_t b, s, h, hkv, dh;
  bool causal;
  double dropout;
};

KernelParams attnParams(const AttnCase &c) {
  KernelParams p;
  p.setInt("num_heads", c.h);
  p.setInt("num_kv_heads", c.hkv);
  p.setInt("causal", c.causal ? 1 : 0);
  p.setFloat("scale", 1.0 / std::sqrt(static_cast<double>(c.dh)));
  p.setFloat("dropout", c.dropout);
  p.setInt("rng_offset", 4);
  return p;
}

void runAttnCase(const AttnCase &c, DType dt, uint64_t seed,
                 GpuMode mode = GpuMode::kEager,
                 std::vector<StepValues> steps = {{2, 1, 0.0, 77}}) {
  SCOPED_TRACE(::testing::Message()
               << dtypeLabel(dt) << " B=" << c.b << " S=" << c.s
               << " H=" << c.h << " Hkv=" << c.hkv << " Dh=" << c.dh
               << " causal=" << c.causal << " dropout=" << c.dropout
               << (mode == GpuMode::kGraph ? " graph" : ""));
  TwinHarness &h = harness();
  const std::vector<int64_t> qs = {c.b, c.s, c.h * c.dh},
                             kvs = {c.b, c.s, c.hkv * c.dh},
                             ps = {c.b, c.h, c.s, c.s};
  const HostTensor q = randomTensor(qs, dt, seed, -1.0f, 1.0f);
  const HostTensor k = randomTensor(kvs, dt, seed + 1, -1.0f, 1.0f);
  const HostTensor v = randomTensor(kvs, dt, seed + 2, -1.0f, 1.0f);
  const HostTensor dout = randomTensor(qs, dt, seed + 3, -1.0f, 1.0f);
  const bool isBf16 = dt == DType::kBF16;
  const double sumAtol = c.s > 1000 ? 3e-4 : 2e-5;
  const Tolerance probsTol =
      isBf16 ? Tolerance{kBf16Rtol, 1e-6} : Tolerance{1e-5, 1e-7};
  const Tolerance sumTol =
      isBf16 ? Tolerance{kBf16Rtol, 2e-3} : Tolerance{1e-4, sumAtol};

  TwinLaunch fwd = launchOf("attention", {q, k, v},
                            {zeros(qs, dt), zeros(ps, dt)}, attnParams(c));
  fwd.step = steps.back();
  {
    absl::StatusOr<TwinOutputs> outs = h.runSteps(fwd, steps, mode);
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    EXPECT_TRUE(twinsAgree(*outs, {sumTol, probsTol}));
  }
  const std::vector<HostTensor> saved = cpuOutputs(h, fwd);
  ASSERT_EQ(saved.size(), 2u);

  TwinLaunch bwd = launchOf("attention_grad_input", {dout, q, k, v, saved[1]},
                            {zeros(qs, dt), zeros(kvs, dt), zeros(kvs, dt)},
                            attnParams(c));
  bwd.step = steps.back();
  absl::StatusOr<TwinOutputs> outs = h.runSteps(bwd, steps, mode);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  EXPECT_TRUE(twinsAgree(*outs, {sumTol}));
  if (mode == GpuMode::kEager)
    EXPECT_TRUE(deterministic(h, bwd));
}

TEST(CudaAttentionKernels, MatchCpu) {
  const std::vector<AttnCase> cases = {
      {2, 37, 4, 2, 16, true, 0.0},  // grouped heads, causal
      {1, 20, 3, 3, 8, false, 0.0},  // no mask
      {2, 33, 4, 1, 64, true, 0.2},  // dropout, one kv head
      {1, 9, 2, 2, 40, false, 0.5},  // dropout, no mask
      {1, 6, 2, 1, 1, true, 0.1},    // Dh = 1: no room to stash row sums in bf16
      {1, 5, 1, 1, 1040, false, 0.0}, // Dh above one column tile
  };
  uint64_t seed = 10;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const AttnCase &c : cases)
      runAttnCase(c, dt, seed += 10);
}

// Rows longer than one chunk of keys (2048): the forward recomputes scores
// per pass, the backward walks several chunks.
TEST(CudaAttentionKernels, LongRowsMatchCpu) {
  for (DType dt : {DType::kF32, DType::kBF16})
    runAttnCase({1, 2100, 1, 1, 8, true, 0.1}, dt, 500);
}

TEST(CudaAttentionKernels, DropoutFollowsStepValuesInGraphs) {
  const std::vector<StepValues> steps = {
      {1, 0, 0.0, 5}, {1, 1, 0.0, 5}, {2, 0, 0.0, 5}};
  for (DType dt : {DType::kF32, DType::kBF16})
    runAttnCase({2, 24, 2, 1, 16, true, 0.3}, dt, 900, GpuMode::kGraph,
                steps);
}

} // namespace
} // namespace braid::gpu_test::rows_test
