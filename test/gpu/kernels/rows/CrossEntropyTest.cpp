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

} // namespace
} // namespace braid::gpu_test::rows_test
