// The mixture-of-experts kernels on CUDA against the CPU. moe_route: the
// logits are spread wide (-4 to 4) so that no two scores of a row are
// within a few ulp, and both sides choose the same experts: the chosen ids
// agree exactly, the scores and weights within f32's rtol (expf on both
// sides, differently rounded), and the logits' gradient likewise.
// moe_permute: positions, offsets and rows exactly; the sums of
// moe_permute_grad, moe_unpermute and moe_unpermute_grad within the rtol of
// their storage (RowTestUtil.h); moe_grouped_linear and its gradients
// within the same. Outputs start from garbage, so that a
// value the kernel fails to write shows.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/rows/RowTestUtil.h"

namespace braid::gpu_test::rows_test {
namespace {

TwinHarness &harness() {
  // Never destroyed: its CUDA objects must not be released after the CUDA
  // runtime has shut down at exit.
  static TwinHarness *h = new TwinHarness({cuda::registerMoeKernels});
  return *h;
}

constexpr Tolerance kScores{1e-5, 1e-7};

KernelParams routeParams(int sigmoid, int normalize, double scale) {
  KernelParams p;
  p.setInt("sigmoid", sigmoid);
  p.setInt("normalize", normalize);
  p.setFloat("scale", scale);
  return p;
}

TwinLaunch route(int64_t n, int64_t e, int64_t k, int sigmoid, int normalize,
                 bool bias, uint64_t seed) {
  std::vector<HostTensor> ins = {
      randomTensor({n, e}, DType::kF32, seed, -4.0f, 4.0f)};
  if (bias)
    ins.push_back(randomTensor({e}, DType::kF32, seed + 1, -0.05f, 0.05f));
  return launchOf("moe_route", std::move(ins),
                  {randomIds({n, k}, seed + 2, -9, 9),
                   randomTensor({n, k}, DType::kF32, seed + 3),
                   randomTensor({n, e}, DType::kF32, seed + 4)},
                  routeParams(sigmoid, normalize, sigmoid ? 2.5 : 1.0));
}

// Mixtral's 8 experts top-2 and DeepSeek-V3's 64 top-8 with bias, over
// rows more than one grid-stride apart.
TEST(CudaMoeKernels, RouteMatchesCpu) {
  struct Case {
    int64_t n, e, k;
    int sigmoid, normalize;
    bool bias;
  };
  uint64_t seed = 100;
  for (const Case &c : {Case{37, 8, 2, 0, 1, false},
                        Case{300, 64, 8, 1, 1, true},
                        Case{5, 4, 4, 0, 0, false}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << c.n << " E=" << c.e
                                      << " K=" << c.k);
    EXPECT_TRUE(twins(harness(),
                      route(c.n, c.e, c.k, c.sigmoid, c.normalize, c.bias,
                            seed += 10),
                      {kExact, kScores, kScores}));
  }
}

TEST(CudaMoeKernels, RouteGradMatchesCpu) {
  for (int sigmoid : {0, 1}) {
    const TwinLaunch forward = route(129, 16, 4, sigmoid, 1, false, 7);
    const std::vector<HostTensor> f = cpuOutputs(harness(), forward);
    ASSERT_EQ(f.size(), 3u);
    const TwinLaunch grad =
        launchOf("moe_route_grad",
                 {randomTensor({129, 4}, DType::kF32, 8), f[2], f[0]},
                 {randomTensor({129, 16}, DType::kF32, 9)},
                 routeParams(sigmoid, 1, 1.0));
    EXPECT_TRUE(twins(harness(), grad, {kScores}));
  }
}

// 300 tokens of 96 values, top-2 of 8 experts, one choice in 50 naming no
// expert; f32 and bf16 storage.
TEST(CudaMoeKernels, PermuteAndUnpermuteMatchCpu) {
  const int64_t n = 300, k = 2, e = 8, d = 96;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    const Tolerance sums =
        dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-6} : Tolerance{1e-5, 1e-6};
    HostTensor experts = randomIds({n, k}, 3, 0, e);
    for (int64_t a = 0; a < n * k; a += 50)
      experts.i32()[a] = static_cast<int32_t>(e + 3);
    const TwinLaunch permute = launchOf(
        "moe_permute", {randomTensor({n, d}, dt, 4), experts},
        {randomTensor({n * k, d}, dt, 5), randomIds({n, k}, 6, -9, 9),
         randomIds({e + 1}, 7, -9, 9)});
    EXPECT_TRUE(twins(harness(), permute, {kExact}));
    const std::vector<HostTensor> p = cpuOutputs(harness(), permute);
    ASSERT_EQ(p.size(), 3u);
    const HostTensor weights = randomTensor({n, k}, DType::kF32, 8);
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_permute_grad",
                               {randomTensor({n * k, d}, dt, 9), p[1]},
                               {randomTensor({n, d}, dt, 10)}),
                      {sums}));
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_unpermute",
                               {randomTensor({n * k, d}, dt, 11), p[1],
                                weights},
                               {randomTensor({n, d}, dt, 12)}),
                      {sums}));
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_unpermute_grad",
                               {randomTensor({n, d}, dt, 13),
                                randomTensor({n * k, d}, dt, 14), p[1],
                                weights},
                               {randomTensor({n * k, d}, dt, 15),
                                randomTensor({n, k}, DType::kF32, 16)}),
                      {sums, Tolerance{1e-5, 1e-5}}));
  }
}

// The grouped GEMMs over blocks of uneven sizes, one expert empty and
// rows after the last block; the weight gradient accumulates.
TEST(CudaMoeKernels, GroupedLinearMatchesCpu) {
  const int64_t rows = 300, e = 8, in = 48, out = 40;
  HostTensor offsets = randomIds({e + 1}, 20, 0, 1);
  const int32_t bounds[] = {0, 37, 37, 100, 151, 200, 230, 281, 290};
  for (int64_t i = 0; i <= e; ++i)
    offsets.i32()[i] = bounds[i];
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    const Tolerance sums =
        dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-5} : Tolerance{1e-5, 1e-5};
    const HostTensor w = randomTensor({e, out, in}, dt, 21);
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_grouped_linear",
                               {randomTensor({rows, in}, dt, 22), w, offsets},
                               {randomTensor({rows, out}, dt, 23)}),
                      {sums}));
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_grouped_linear_grad_input",
                               {randomTensor({rows, out}, dt, 24), w, offsets},
                               {randomTensor({rows, in}, dt, 25)}),
                      {sums}));
    KernelParams accumulate;
    accumulate.setInt("accumulate", 1);
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_grouped_linear_grad_weight",
                               {randomTensor({rows, out}, dt, 26),
                                randomTensor({rows, in}, dt, 27), offsets},
                               {randomTensor({e, out, in}, DType::kF32, 28)},
                               accumulate),
                      {Tolerance{1e-5, 1e-5}}));
  }
}

// Captured in a CUDA graph and replayed: no host sync, no allocation.
TEST(CudaMoeKernels, CapturedInGraphs) {
  EXPECT_TRUE(twins(harness(), route(64, 8, 2, 0, 1, false, 55),
                    {kExact, kScores, kScores}, GpuMode::kGraph));
}

} // namespace
} // namespace braid::gpu_test::rows_test
