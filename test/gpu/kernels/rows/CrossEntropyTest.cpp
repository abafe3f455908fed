// cross_entropy and cross_entropy_grad_input on CUDA against the CPU.
//
// Tolerances (see RowTestUtil.h):
//   lse (f32 in every plan): rtol 2e-6. A max, then a sum of V <= 1000 exp
//     terms in [0, 1] added in another order (relative error ~ sqrt(V) *
//     2^-24 on the sum, divided by lse >= log V after the log).
//   loss (f32, mean in double): rtol 2e-6, the lse error carried through.
//   dlogits f32: rtol 1e-5, atol 1e-9: one expf (2 ulp apart) times the
//     factor scale / rows, minus the factor at the label; the lse input is
//     the same on both sides. bf16: rtol 2^-7, atol 1e-9.
// Labels include -1 and V, which the kernels treat as "no target" exactly
// as the CPU does.
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
  static TwinHarness *h = new TwinHarness({cuda::registerCrossEntropyKernels});
  return *h;
}

TEST(CudaCrossEntropyKernels, MatchCpu) {
  struct Case {
    std::vector<int64_t> lead;
    int64_t v;
  };
  const std::vector<Case> cases = {{{3, 13}, 1000}, {{1}, 1}, {{2, 2, 5}, 257}};
  uint64_t seed = 1;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(::testing::Message() << dtypeLabel(dt) << " V=" << c.v);
      std::vector<int64_t> shape = c.lead;
      shape.push_back(c.v);
      const HostTensor logits = randomTensor(shape, dt, ++seed, -6.0f, 6.0f);
      HostTensor labels = randomIds(c.lead, ++seed, 0, static_cast<int32_t>(c.v));
      if (labels.numel() >= 3) {
        labels.i32()[1] = -1;
        labels.i32()[2] = static_cast<int32_t>(c.v);
      }
      const TwinLaunch fwd =
          launchOf("cross_entropy", {logits, labels},
                   {zeros({}, DType::kF32), zeros(c.lead, DType::kF32)});
      EXPECT_TRUE(twins(harness(), fwd, {Tolerance{2e-6, 0}}));
      EXPECT_TRUE(deterministic(harness(), fwd));
      const std::vector<HostTensor> saved = cpuOutputs(harness(), fwd);
      if (saved.size() != 2)
        continue;
      KernelParams p;
      p.setFloat("scale", 0.25);
      const Tolerance gradTol = dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-9}
                                                   : Tolerance{1e-5, 1e-9};
      EXPECT_TRUE(twins(harness(),
                        launchOf("cross_entropy_grad_input",
                                 {logits, labels, saved[1]},
                                 {zeros(shape, dt)}, p),
                        {gradTol}));
    }
}

// The vocabulary-parallel kernels: stats of rank 1's shard of 4 (labels over
// the whole vocabulary, so some fall in the shard), a combine of 4 ranks'
// stats, and the shard's gradient (vocab_shard). Tolerances as above: the
// stats' sum is a sum of exp terms in another order (rtol 2e-6), m and the
// target are exact; the combine is in double on both sides.
TEST(CudaCrossEntropyKernels, VocabParallelMatchCpu) {
  const std::vector<int64_t> lead = {3, 7};
  const int64_t v = 300, ranks = 4, rank = 1;
  uint64_t seed = 50;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    std::vector<int64_t> shape = lead;
    shape.push_back(v);
    const HostTensor logits = randomTensor(shape, dt, ++seed, -6.0f, 6.0f);
    HostTensor labels =
        randomIds(lead, ++seed, -2, static_cast<int32_t>(v * ranks + 2));
    labels.i32()[0] = static_cast<int32_t>(rank * v);          // first column
    labels.i32()[1] = static_cast<int32_t>((rank + 1) * v - 1); // last
    TwinLaunch stats =
        launchOf("cross_entropy_stats", {logits, labels},
                 {zeros({lead[0], lead[1], 3}, DType::kF32)});
    stats.step.tpRank = rank;
    stats.step.tpSize = ranks;
    EXPECT_TRUE(twins(harness(), stats, {Tolerance{2e-6, 0}}));

    // Stats as the ranks would give them: maxima in [-6, 6], sums in
    // [1, v], targets in [-6, 6].
    HostTensor all = randomTensor({ranks * lead[0], lead[1], 3}, DType::kF32,
                                  ++seed, -6.0f, 6.0f);
    for (int64_t r = 0; r < all.numel() / 3; ++r)
      all.f32()[3 * r + 1] = 1.0f + std::fabs(all.f32()[3 * r + 1]) * 40.0f;
    const TwinLaunch combine = launchOf(
        "cross_entropy_combine", {all, labels},
        {zeros({}, DType::kF32), zeros(lead, DType::kF32)});
    EXPECT_TRUE(twins(harness(), combine,
                      {Tolerance{1e-6, 0}, Tolerance{1e-6, 0}}));
    EXPECT_TRUE(deterministic(harness(), combine));

    const std::vector<HostTensor> lse = cpuOutputs(harness(), combine);
    if (lse.size() != 2)
      continue;
    KernelParams p;
    p.setFloat("scale", 0.25);
    p.setInt("vocab_shard", 1);
    TwinLaunch grad = launchOf("cross_entropy_grad_input",
                               {logits, labels, lse[1]}, {zeros(shape, dt)}, p);
    grad.step = stats.step;
    const Tolerance gradTol = dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-9}
                                                 : Tolerance{1e-5, 1e-9};
    EXPECT_TRUE(twins(harness(), grad, {gradTol}));
  }
}

} // namespace
} // namespace braid::gpu_test::rows_test
