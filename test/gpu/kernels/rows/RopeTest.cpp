// rope and rope_grad_input on CUDA against the CPU.
//
// Tolerances (see RowTestUtil.h): both sides form the angle the same way
// (double, rounded to float); the GPU evaluates cos and sin of that float in
// double and rounds, the CPU calls cosf/sinf, so the factors agree to about
// 1 ulp. Each output is x_a c -/+ x_b s: f32 rtol 1e-5, atol 1e-6 (the
// difference of two products can cancel, absolute error ~ 2^-23). bf16:
// rtol 2^-7, atol 1e-6.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerRopeKernels});
  return *h;
}

struct RopeCase {
  int64_t b, s, heads, dh;
  double theta;
};

TEST(CudaRopeKernels, MatchCpu) {
  // A long sequence makes angles large (up to 4000 rad), where the argument
  // reduction of cos and sin matters.
  const std::vector<RopeCase> cases = {
      {2, 17, 3, 8, 10000.0}, {1, 4000, 2, 64, 10000.0},
      {3, 5, 1, 2, 500000.0}, {2, 9, 4, 6, 10.0}};
  uint64_t seed = 1;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (const RopeCase &c : cases)
      for (const char *kernel : {"rope", "rope_grad_input"}) {
        SCOPED_TRACE(::testing::Message()
                     << kernel << " " << dtypeLabel(dt) << " S=" << c.s
                     << " H=" << c.heads << " Dh=" << c.dh);
        const std::vector<int64_t> shape = {c.b, c.s, c.heads * c.dh};
        KernelParams p;
        p.setInt("num_heads", c.heads);
        p.setFloat("theta", c.theta);
        const Tolerance tol = dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-6}
                                                 : Tolerance{1e-5, 1e-6};
        EXPECT_TRUE(twins(harness(),
                          launchOf(kernel, {randomTensor(shape, dt, ++seed)},
                                   {zeros(shape, dt)}, p),
                          {tol}));
      }
}

// With `cp` (docs/kernels.md, "Context parallel") the rows are CP rank r's
// part of the sequence, rotated by their positions in the whole.
TEST(CudaRopeKernels, ContextParallelPartsMatchCpu) {
  const std::vector<int64_t> shape = {2, 24, 3 * 8};
  uint64_t seed = 40;
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t ranks : {2, 4})
      for (int64_t r = 0; r < ranks; ++r)
        for (const char *kernel : {"rope", "rope_grad_input"}) {
          SCOPED_TRACE(::testing::Message()
                       << kernel << " " << dtypeLabel(dt) << " CP rank " << r
                       << " of " << ranks);
          KernelParams p;
          p.setInt("num_heads", 3);
          p.setFloat("theta", 10000.0);
          p.setInt("cp", 1);
          const Tolerance tol = dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-6}
                                                   : Tolerance{1e-5, 1e-6};
          TwinLaunch l = launchOf(kernel, {randomTensor(shape, dt, ++seed)},
                                  {zeros(shape, dt)}, p);
          l.step.cpRank = r;
          l.step.cpSize = ranks;
          EXPECT_TRUE(twins(harness(), l, {tol}));
        }
}

} // namespace
} // namespace braid::gpu_test::rows_test
