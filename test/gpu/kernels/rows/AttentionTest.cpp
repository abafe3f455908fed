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
// values. Prefix-LM and segment masks are checked like the causal one: the
// probs must hold zeros at the same keys, and a key the GPU let through (or
// masked wrongly) moves o and the gradients by O(1).
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/AttentionCases.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerAttentionKernels});
  return *h;
}

void runAttentionCase(const AttentionCase &c, DType dt, uint64_t seed,
                 GpuMode mode = GpuMode::kEager,
                 std::vector<StepValues> steps = {{2, 0.0, 77}}) {
  SCOPED_TRACE(::testing::Message()
               << dtypeLabel(dt) << " B=" << c.b << " S=" << c.s
               << " H=" << c.h << " Hkv=" << c.hkv << " Dh=" << c.dh
               << " causal=" << c.causal << " prefix=" << c.prefix
               << " segments=" << c.segments << " dropout=" << c.dropout
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

  std::vector<HostTensor> fwdIns = {q, k, v};
  if (c.segments)
    fwdIns.push_back(segmentIds(c.b, c.s, 4));
  TwinLaunch fwd = launchOf("attention", fwdIns,
                            {zeros(qs, dt), zeros(ps, dt)},
                            attentionParams(c));
  fwd.step = steps.back();
  {
    absl::StatusOr<TwinOutputs> outs = h.runSteps(fwd, steps, mode);
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    EXPECT_TRUE(twinsAgree(*outs, {sumTol, probsTol}));
  }
  const std::vector<HostTensor> saved = cpuOutputs(h, fwd);
  ASSERT_EQ(saved.size(), 2u);

  std::vector<HostTensor> bwdIns = {dout, q, k, v, saved[1]};
  if (c.segments)
    bwdIns.push_back(segmentIds(c.b, c.s, 4));
  TwinLaunch bwd = launchOf("attention_grad_input", bwdIns,
                            {zeros(qs, dt), zeros(kvs, dt), zeros(kvs, dt)},
                            attentionParams(c));
  bwd.step = steps.back();
  absl::StatusOr<TwinOutputs> outs = h.runSteps(bwd, steps, mode);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  EXPECT_TRUE(twinsAgree(*outs, {sumTol}));
  if (mode == GpuMode::kEager)
    EXPECT_TRUE(deterministic(h, bwd));
}

TEST(CudaAttentionKernels, MatchCpu) {
  const std::vector<AttentionCase> cases = {
      {2, 37, 4, 2, 16, true, 0, false, 0.0},   // grouped heads, causal
      {1, 20, 3, 3, 8, false, 0, false, 0.0},   // no mask
      {2, 33, 4, 1, 64, true, 0, false, 0.2},   // dropout, one kv head
      {1, 9, 2, 2, 40, false, 0, false, 0.5},   // dropout, no mask
      {1, 6, 2, 1, 1, true, 0, false, 0.1},     // Dh = 1: no stash in bf16
      {1, 5, 1, 1, 1040, false, 0, false, 0.0}, // Dh above one column tile
  };
  uint64_t seed = 10;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const AttentionCase &c : cases)
      runAttentionCase(c, dt, seed += 10);
}

// Prefix-LM and segment (packed document) masks, alone and together, with
// and without dropout; the backward must give masked keys nothing.
TEST(CudaAttentionKernels, MasksMatchCpu) {
  const std::vector<AttentionCase> cases = {
      {1, 13, 2, 1, 8, true, 5, false, 0.0},   // prefix-LM
      {2, 13, 4, 2, 16, true, 5, false, 0.3},  // prefix-LM, dropout
      {1, 9, 2, 2, 8, true, 9, false, 0.0},    // prefix = S: no mask left
      {2, 30, 4, 2, 16, true, 0, true, 0.0},   // documents, causal
      {2, 29, 2, 1, 8, false, 0, true, 0.2},   // documents only, dropout
      {2, 40, 4, 2, 16, true, 7, true, 0.1},   // prefix and documents, dropout
      {1, 6, 2, 1, 1, true, 2, true, 0.1},     // Dh = 1: no stash in bf16
  };
  uint64_t seed = 300;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const AttentionCase &c : cases)
      runAttentionCase(c, dt, seed += 10);
}

// Rows longer than one chunk of keys (2048): the forward recomputes scores
// per pass, the backward walks several chunks; also with a prefix longer
// than a chunk, whose rows all take the recomputing path.
TEST(CudaAttentionKernels, LongRowsMatchCpu) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    runAttentionCase({1, 2100, 1, 1, 8, true, 0, false, 0.1}, dt, 500);
    runAttentionCase({1, 2100, 1, 1, 8, true, 2060, false, 0.1}, dt, 600);
  }
}

TEST(CudaAttentionKernels, DropoutFollowsStepValuesInGraphs) {
  const std::vector<StepValues> steps = {
      {1, 0.0, 5}, {3, 0.0, 5}, {2, 0.0, 5}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    runAttentionCase({2, 24, 2, 1, 16, true, 0, false, 0.3}, dt, 900,
                GpuMode::kGraph, steps);
    runAttentionCase({2, 24, 2, 1, 16, true, 3, true, 0.3}, dt, 950,
                GpuMode::kGraph, steps);
  }
}

// One TP rank's slice of the heads (head_shard): the draws use the whole
// tensor's head index, from the rank and axis size of the step values, also
// under graph replay.
TEST(CudaAttentionKernels, HeadShardDropoutMatchesCpu) {
  // step, lr, seed, update, tpRank, tpSize
  const std::vector<StepValues> rank2of4 = {{2, 0.0, 77, 2, 2, 4}};
  const std::vector<StepValues> replay = {{1, 0.0, 5, 1, 1, 2},
                                          {3, 0.0, 5, 3, 1, 2}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    runAttentionCase({2, 13, 4, 2, 16, true, 0, false, 0.3, true}, dt, 1000,
                     GpuMode::kEager, rank2of4);
    runAttentionCase({2, 24, 2, 1, 16, true, 3, true, 0.3, true}, dt, 1050,
                     GpuMode::kGraph, replay);
  }
}

} // namespace
} // namespace braid::gpu_test::rows_test
