// repeat_kv and repeat_kv_grad_input on CUDA against the CPU.
//
// Tolerances: repeat_kv copies storage bits: exact. The gradient adds the
// H / Hkv copies in head order in f32 on both sides: exact in f32; in bf16
// the single rounding of that same f32 sum is exact too, but an allowance
// of one rounding flip (rtol 2^-7) is kept in case the CPU's bf16 path adds
// in another order.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerRepeatKvKernels});
  return *h;
}

TEST(CudaRepeatKvKernels, MatchCpu) {
  struct Case {
    int64_t b, s, h, hkv, dh;
  };
  const std::vector<Case> cases = {
      {2, 11, 8, 2, 16}, {1, 5, 6, 6, 3}, {3, 4, 12, 1, 5}};
  uint64_t seed = 1;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(::testing::Message() << dtypeLabel(dt) << " H=" << c.h
                                        << " Hkv=" << c.hkv);
      const std::vector<int64_t> narrow = {c.b, c.s, c.hkv * c.dh},
                                 wide = {c.b, c.s, c.h * c.dh};
      KernelParams p;
      p.setInt("num_heads", c.h);
      p.setInt("num_kv_heads", c.hkv);
      EXPECT_TRUE(twins(harness(),
                        launchOf("repeat_kv", {randomTensor(narrow, dt, ++seed)},
                                 {zeros(wide, dt)}, p),
                        {kExact}));
      const Tolerance gradTol =
          dt == DType::kBF16 ? Tolerance{kBf16Rtol, 0} : kExact;
      EXPECT_TRUE(twins(harness(),
                        launchOf("repeat_kv_grad_input",
                                 {randomTensor(wide, dt, ++seed)},
                                 {zeros(narrow, dt)}, p),
                        {gradTol}));
    }
}

// tp_slice: all kv heads in, this TP rank's query heads out (the rank from
// the step values), the gradient over x's whole width.
TEST(CudaRepeatKvKernels, TpSliceMatchesCpu) {
  struct Case {
    int64_t h, hkv, group, rank, ranks;
  };
  // 8 query heads over 2 kv heads on 4 ranks (a kv head over two ranks),
  // over 4 kv heads on 2 ranks, and 12 over 1 on 3 ranks.
  const std::vector<Case> cases = {
      {2, 2, 4, 1, 4}, {2, 2, 4, 2, 4}, {4, 4, 2, 1, 2}, {4, 1, 12, 2, 3}};
  const int64_t b = 2, s = 5, dh = 6;
  uint64_t seed = 100;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(::testing::Message()
                   << dtypeLabel(dt) << " H=" << c.h << " Hkv=" << c.hkv
                   << " rank " << c.rank << " of " << c.ranks);
      const std::vector<int64_t> narrow = {b, s, c.hkv * dh},
                                 wide = {b, s, c.h * dh};
      KernelParams p;
      p.setInt("num_heads", c.h);
      p.setInt("num_kv_heads", c.hkv);
      p.setInt("tp_slice", 1);
      p.setInt("group", c.group);
      TwinLaunch fwd = launchOf("repeat_kv", {randomTensor(narrow, dt, ++seed)},
                                {zeros(wide, dt)}, p);
      fwd.step.tpRank = c.rank;
      fwd.step.tpSize = c.ranks;
      EXPECT_TRUE(twins(harness(), fwd, {kExact}));
      TwinLaunch grad =
          launchOf("repeat_kv_grad_input", {randomTensor(wide, dt, ++seed)},
                   {randomTensor(narrow, dt, ++seed)}, p);
      grad.step = fwd.step;
      const Tolerance gradTol =
          dt == DType::kBF16 ? Tolerance{kBf16Rtol, 0} : kExact;
      EXPECT_TRUE(twins(harness(), grad, {gradTol}));
    }
}

} // namespace
} // namespace braid::gpu_test::rows_test
