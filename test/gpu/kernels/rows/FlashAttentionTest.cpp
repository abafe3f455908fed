// flash_attention and flash_attention_grad_input on CUDA against the CPU
// kernels.
//
// Tolerances (see RowTestUtil.h), as for the reference attention
// (AttentionTest.cpp), whose sums these kernels form in another order on
// each side:
//   lse f32: rtol 1e-5, atol 1e-6 (a log of a sum of up to S exponentials).
//   o, dq, dk, dv f32: rtol 1e-4, atol 2e-5 (3e-4 above 1000 keys): sums of
//     up to S weighted head rows, error ~ S * 2^-24.
//   bf16: rtol 2^-7 (one rounding flip), atol 2e-3 for the cancelling sums;
//     the lse stays f32 (rtol 1e-5, atol 1e-6).
// The backward launches take the CPU forward's o and lse, so both sides
// start from the same saved values. Dropout cases check that the GPU draws
// the CPU's mask (a wrong mask moves values by O(1)), also under CUDA-graph
// replay with other step values.
#include <cmath>
#include <vector>

#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/AttentionCases.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"
#include "gtest/gtest.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h =
      new TwinHarness({cuda::registerFusedAttentionKernels});
  return *h;
}

void runFlashCase(const AttentionCase &c, DType dt, uint64_t seed,
                  GpuMode mode = GpuMode::kEager,
                  std::vector<StepValues> steps = {{2, 0.0, 77}}) {
  SCOPED_TRACE(::testing::Message()
               << dtypeLabel(dt) << " B=" << c.b << " S=" << c.s << " H=" << c.h
               << " Hkv=" << c.hkv << " Dh=" << c.dh << " causal=" << c.causal
               << " prefix=" << c.prefix << " segments=" << c.segments
               << " dropout=" << c.dropout
               << (mode == GpuMode::kGraph ? " graph" : ""));
  TwinHarness &h = harness();
  const std::vector<int64_t> qs = {c.b, c.s, c.h * c.dh},
                             kvs = {c.b, c.s, c.hkv * c.dh},
                             ls = {c.b, c.h, c.s};
  const HostTensor q = randomTensor(qs, dt, seed, -1.0f, 1.0f);
  const HostTensor k = randomTensor(kvs, dt, seed + 1, -1.0f, 1.0f);
  const HostTensor v = randomTensor(kvs, dt, seed + 2, -1.0f, 1.0f);
  const HostTensor dout = randomTensor(qs, dt, seed + 3, -1.0f, 1.0f);
  const bool isBf16 = dt == DType::kBF16;
  const double sumAtol = c.s > 1000 ? 3e-4 : 2e-5;
  const Tolerance lseTol{1e-5, 1e-6};
  const Tolerance sumTol =
      isBf16 ? Tolerance{kBf16Rtol, 2e-3} : Tolerance{1e-4, sumAtol};

  std::vector<HostTensor> fwdIns = {q, k, v};
  if (c.segments)
    fwdIns.push_back(segmentIds(c.b, c.s, 23));
  TwinLaunch fwd =
      launchOf("flash_attention", fwdIns,
               {zeros(qs, dt), zeros(ls, DType::kF32)},
               attentionParams(c));
  fwd.step = steps.back();
  {
    absl::StatusOr<TwinOutputs> outs = h.runSteps(fwd, steps, mode);
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    EXPECT_TRUE(twinsAgree(*outs, {sumTol, lseTol}));
  }
  const std::vector<HostTensor> saved = cpuOutputs(h, fwd);
  ASSERT_EQ(saved.size(), 2u);

  std::vector<HostTensor> bwdIns = {dout, q, k, v, saved[0], saved[1]};
  if (c.segments)
    bwdIns.push_back(segmentIds(c.b, c.s, 23));
  TwinLaunch bwd =
      launchOf("flash_attention_grad_input", bwdIns,
               {zeros(qs, dt), zeros(kvs, dt), zeros(kvs, dt)},
               attentionParams(c));
  bwd.step = steps.back();
  absl::StatusOr<TwinOutputs> outs = h.runSteps(bwd, steps, mode);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  EXPECT_TRUE(twinsAgree(*outs, {sumTol}));
  if (mode == GpuMode::kEager)
    EXPECT_TRUE(deterministic(h, bwd));
}

TEST(CudaFlashAttentionKernels, MatchCpu) {
  const std::vector<AttentionCase> cases = {
      {2, 37, 4, 2, 16, true, 0, false, 0.0},   // grouped heads, causal
      {1, 20, 3, 3, 8, false, 0, false, 0.0},   // no mask
      {2, 33, 4, 1, 64, true, 0, false, 0.2},   // dropout, one kv head
      {1, 45, 2, 2, 9, true, 12, false, 0.1},   // prefix-LM, odd head dim
      {2, 50, 4, 2, 16, true, 5, true, 0.1},    // prefix and documents
      {1, 40, 2, 1, 8, false, 0, true, 0.0},    // documents, no causal mask
      {1, 6, 2, 1, 1, true, 0, false, 0.1},     // Dh = 1: no room to stash D
      {1, 5, 1, 1, 1040, false, 0, false, 0.0}, // Dh above one column tile
  };
  uint64_t seed = 10;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const AttentionCase &c : cases)
      runFlashCase(c, dt, seed += 10);
}

// Rows longer than one chunk of keys (1024): the running maximum and sum
// carry across chunks.
TEST(CudaFlashAttentionKernels, LongRowsMatchCpu) {
  for (DType dt : {DType::kF32, DType::kBF16})
    runFlashCase({1, 1100, 2, 1, 8, true, 0, false, 0.1}, dt, 500);
}

TEST(CudaFlashAttentionKernels, DropoutFollowsStepValuesInGraphs) {
  const std::vector<StepValues> steps = {
      {1, 0.0, 5}, {3, 0.0, 5}, {2, 0.0, 5}};
  for (DType dt : {DType::kF32, DType::kBF16})
    runFlashCase({2, 24, 2, 1, 16, true, 3, true, 0.3}, dt, 900,
                 GpuMode::kGraph, steps);
  // The tensor-core kernels (bf16, Dh 64) under replay.
  runFlashCase({2, 80, 2, 1, 64, true, 3, true, 0.3}, DType::kBF16, 950,
               GpuMode::kGraph, steps);
}

// bf16 with Dh 64 and 128 runs on the tensor-core kernels
// (FlashAttentionTiles.cu), which multiply the probabilities and dS as two
// bf16 parts each: tiles of 64 rows and keys, full and partial, grouped
// heads, every mask, dropout. (Simulated in numpy over 40 seeds: the worst
// element reaches 0.86 of the tolerance, all of it the outputs' one bf16
// rounding; a single bf16 rounding of the weights would fail dv here.)
TEST(CudaFlashAttentionKernels, TensorCoreTilesMatchCpu) {
  const std::vector<AttentionCase> cases = {
      {2, 200, 4, 2, 64, true, 0, false, 0.0},  // causal, GQA, 4 tiles
      {1, 130, 2, 2, 128, false, 0, false, 0.1}, // no mask, dropout
      {2, 150, 4, 1, 64, true, 70, true, 0.1},  // prefix over tiles, docs
      {1, 64, 2, 1, 128, true, 0, true, 0.0},   // one whole tile, docs
      {1, 257, 2, 1, 64, true, 0, false, 0.0},  // one key past 4 tiles
      {3, 17, 2, 2, 128, true, 5, false, 0.2},  // less than a tile
  };
  uint64_t seed = 2000;
  for (const AttentionCase &c : cases)
    runFlashCase(c, DType::kBF16, seed += 10);
}

// One TP rank's slice of the heads (head_shard): the draws use the whole
// tensor's head index, on the CUDA cores and on the tensor-core tiles, also
// under graph replay.
TEST(CudaFlashAttentionKernels, HeadShardDropoutMatchesCpu) {
  // step, lr, seed, update, tpRank, tpSize
  const std::vector<StepValues> rank2of4 = {{2, 0.0, 77, 2, 2, 4}};
  const std::vector<StepValues> replay = {{1, 0.0, 5, 1, 1, 2},
                                          {3, 0.0, 5, 3, 1, 2}};
  for (DType dt : {DType::kF32, DType::kBF16})
    runFlashCase({2, 13, 4, 2, 16, true, 0, false, 0.3, true}, dt, 3000,
                 GpuMode::kEager, rank2of4);
  runFlashCase({2, 80, 2, 1, 64, true, 3, true, 0.3, true}, DType::kBF16,
               3050, GpuMode::kEager, rank2of4);
  runFlashCase({2, 80, 2, 1, 64, true, 3, true, 0.3, true}, DType::kBF16,
               3100, GpuMode::kGraph, replay);
}

} // namespace
} // namespace braid::gpu_test::rows_test
