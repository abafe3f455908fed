// attention_merge on CUDA against the CPU (docs/kernels.md, "Context
// parallel"), including rows where one side or both saw no key (lse -inf).
//
// Tolerances (see RowTestUtil.h): both sides take exp from ExpFloat.h and
// round each product and sum separately; log is logf on the GPU and glibc's
// on the CPU, which may differ by an ulp, moving lse and the two weights by
// about 2^-23 relative: lse rtol 1e-6, atol 1e-6; o f32 rtol 1e-5, atol
// 1e-6; bf16 o rtol 2^-7 (one rounding flip).
#include <cmath>
#include <vector>

#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"
#include "gtest/gtest.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerAttentionMergeKernel});
  return *h;
}

// Uniform lse values in [-4, 4) with some rows at -inf.
HostTensor lseOf(const std::vector<int64_t> &shape, uint64_t seed,
                 int64_t every) {
  const HostTensor r = randomTensor(shape, DType::kF32, seed, -4.0f, 4.0f);
  std::vector<float> v(r.numel());
  for (int64_t i = 0; i < r.numel(); ++i)
    v[i] = i % every == 0 ? -INFINITY : static_cast<float>(r.at(i));
  return tensorOf(shape, DType::kF32, v);
}

TEST(CudaAttentionMergeKernel, MatchesCpu) {
  // every 3 and 5: rows where a, b or both (every 15th) saw no key.
  const int64_t b = 2, s = 37, h = 3, dh = 40;
  const std::vector<int64_t> os = {b, s, h * dh}, ls = {b, h, s};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    KernelParams p;
    p.setInt("num_heads", h);
    const Tolerance oTol =
        dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-6} : Tolerance{1e-5, 1e-6};
    EXPECT_TRUE(twins(harness(),
                      launchOf("attention_merge",
                               {randomTensor(os, dt, 1), lseOf(ls, 2, 3),
                                randomTensor(os, dt, 3), lseOf(ls, 4, 5)},
                               {zeros(os, dt), zeros(ls, DType::kF32)}, p),
                      {oTol, Tolerance{1e-6, 1e-6}}));
  }
}

} // namespace
} // namespace braid::gpu_test::rows_test
