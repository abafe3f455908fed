// The mixture-of-experts kernels on CUDA against the CPU. moe_route: the
// logits are spread wide (-4 to 4) so that no two scores of a row are
// within a few ulp, and both sides choose the same experts: the chosen ids
// agree exactly, the scores and weights within f32's rtol (expf on both
// sides, differently rounded), and the logits' gradient likewise.
// moe_permute: positions, offsets and rows exactly; the sums of
// moe_permute_grad, moe_unpermute and moe_unpermute_grad within the rtol of
// their storage (RowTestUtil.h); moe_grouped_linear and its gradients
// within the same. The unfused kernels (moe_scores, moe_topk, moe_sort,
// moe_gather, moe_gather_choices, moe_weighted_sum and their gradients)
// within the tolerances of their fused twins, ids, positions and copies
// exactly; on the GPU, the unfused combine gives the fused one's bits.
// Outputs start from garbage, so that a value the kernel fails to write
// shows.
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

KernelParams sigmoidParams(int sigmoid) {
  KernelParams p;
  p.setInt("sigmoid", sigmoid);
  return p;
}

// moe_sort's and moe_permute's capacity, none for 0 (dropless).
KernelParams capacityParams(int64_t capacity) {
  KernelParams p;
  if (capacity > 0)
    p.setInt("capacity", capacity);
  return p;
}

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

// The unfused router (braid-fuse-moe) over moe_route's cases: moe_scores
// on logits spread as wide, then moe_topk on the CPU's scores.
TEST(CudaMoeKernels, ScoresAndTopKMatchCpu) {
  struct Case {
    int64_t n, e, k;
    int sigmoid, normalize;
    bool bias;
  };
  uint64_t seed = 300;
  for (const Case &c : {Case{37, 8, 2, 0, 1, false},
                        Case{300, 64, 8, 1, 1, true},
                        Case{5, 4, 4, 0, 0, false}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << c.n << " E=" << c.e
                                      << " K=" << c.k);
    seed += 10;
    const TwinLaunch scores = launchOf(
        "moe_scores",
        {randomTensor({c.n, c.e}, DType::kF32, seed, -4.0f, 4.0f)},
        {randomTensor({c.n, c.e}, DType::kF32, seed + 1)},
        sigmoidParams(c.sigmoid));
    EXPECT_TRUE(twins(harness(), scores, {kScores}));
    const std::vector<HostTensor> s = cpuOutputs(harness(), scores);
    ASSERT_EQ(s.size(), 1u);
    std::vector<HostTensor> ins = {s[0]};
    if (c.bias)
      ins.push_back(
          randomTensor({c.e}, DType::kF32, seed + 2, -0.05f, 0.05f));
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_topk", std::move(ins),
                               {randomIds({c.n, c.k}, seed + 3, -9, 9),
                                randomTensor({c.n, c.k}, DType::kF32,
                                             seed + 4)},
                               routeParams(c.sigmoid, c.normalize,
                                           c.sigmoid ? 2.5 : 1.0)),
                      {kExact, kScores}));
  }
}

// Their gradients on moe_route's forward (CPU), one choice in 37 naming
// no expert (it adds nothing).
TEST(CudaMoeKernels, ScoresAndTopKGradsMatchCpu) {
  const int64_t n = 129, e = 16, k = 4;
  for (int sigmoid : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "sigmoid=" << sigmoid);
    const std::vector<HostTensor> f =
        cpuOutputs(harness(), route(n, e, k, sigmoid, 1, false, 17));
    ASSERT_EQ(f.size(), 3u);
    HostTensor experts = f[0];
    for (int64_t a = 0; a < n * k; a += 37)
      experts.i32()[a] = -1;
    for (int normalize : {0, 1})
      EXPECT_TRUE(twins(harness(),
                        launchOf("moe_topk_grad",
                                 {randomTensor({n, k}, DType::kF32, 18), f[2],
                                  experts},
                                 {randomTensor({n, e}, DType::kF32, 19)},
                                 routeParams(sigmoid, normalize, 1.5)),
                        {kScores}));
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_scores_grad",
                               {randomTensor({n, e}, DType::kF32, 20), f[2]},
                               {randomTensor({n, e}, DType::kF32, 21)},
                               sigmoidParams(sigmoid)),
                      {kScores}));
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

// The tokens' expert ids of the permutation tests: top-k of e, one choice
// in 50 naming no expert.
HostTensor choicesOf(int64_t n, int64_t k, int64_t e, uint64_t seed) {
  HostTensor experts = randomIds({n, k}, seed, 0, static_cast<int32_t>(e));
  for (int64_t a = 0; a < n * k; a += 50)
    experts.i32()[a] = static_cast<int32_t>(e + 3);
  return experts;
}

// moe_sort, dropless and with a capacity that drops choices: positions
// and offsets exactly.
TEST(CudaMoeKernels, SortMatchesCpu) {
  const int64_t n = 300, k = 2, e = 8;
  const HostTensor experts = choicesOf(n, k, e, 30);
  for (int64_t capacity : {0, 40}) {
    SCOPED_TRACE(::testing::Message() << "capacity=" << capacity);
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_sort", {experts},
                               {randomIds({n, k}, 31, -9, 9),
                                randomIds({e + 1}, 32, -9, 9)},
                               capacityParams(capacity)),
                      {kExact, kExact}));
  }
}

// The unfused permutations over moe_sort's positions (CPU), dropless and
// with a capacity (dropped choices, slots no choice fills), 300 tokens of
// 96 values, top-2 of 8 experts; f32 and bf16 storage. The copies exactly,
// the sums within the tolerances of moe_unpermute's.
TEST(CudaMoeKernels, GatherAndWeightedSumMatchCpu) {
  const int64_t n = 300, k = 2, e = 8, d = 96;
  const HostTensor experts = choicesOf(n, k, e, 40);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtypeLabel(dt));
    const Tolerance sums =
        dt == DType::kBF16 ? Tolerance{kBf16Rtol, 1e-6} : Tolerance{1e-5, 1e-6};
    for (int64_t capacity : {0, 40}) {
      SCOPED_TRACE(::testing::Message() << "capacity=" << capacity);
      const std::vector<HostTensor> sorted = cpuOutputs(
          harness(), launchOf("moe_sort", {experts},
                              {randomIds({n, k}, 41, -9, 9),
                               randomIds({e + 1}, 42, -9, 9)},
                              capacityParams(capacity)));
      ASSERT_EQ(sorted.size(), 2u);
      const HostTensor &positions = sorted[0];
      const int64_t rows = capacity > 0 ? e * capacity : n * k;
      EXPECT_TRUE(twins(harness(),
                        launchOf("moe_gather",
                                 {randomTensor({n, d}, dt, 43), positions},
                                 {randomTensor({rows, d}, dt, 44)}),
                        {kExact}));
      EXPECT_TRUE(twins(harness(),
                        launchOf("moe_gather_choices",
                                 {randomTensor({rows, d}, dt, 45), positions},
                                 {randomTensor({n, k, d}, dt, 46)}),
                        {kExact}));
      EXPECT_TRUE(twins(harness(),
                        launchOf("moe_gather_choices_grad",
                                 {randomTensor({n, k, d}, dt, 47), positions},
                                 {randomTensor({rows, d}, dt, 48)}),
                        {kExact}));
    }
    const HostTensor weights = randomTensor({n, k}, DType::kF32, 49);
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_weighted_sum",
                               {randomTensor({n, k, d}, dt, 50), weights},
                               {randomTensor({n, d}, dt, 51)}),
                      {sums}));
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_weighted_sum_grad",
                               {randomTensor({n, d}, dt, 52),
                                randomTensor({n, k, d}, dt, 53), weights},
                               {randomTensor({n, k, d}, dt, 54),
                                randomTensor({n, k}, DType::kF32, 55)}),
                      {sums, Tolerance{1e-5, 1e-5}}));
  }
}

// The GPU's outputs of a launch; fails the test and returns empty on error.
std::vector<HostTensor> gpuOutputs(const TwinLaunch &l) {
  absl::StatusOr<std::vector<HostTensor>> outs =
      harness().runGpu(l, {l.step}, GpuMode::kEager);
  EXPECT_TRUE(outs.ok()) << l.kernel << ": " << outs.status().ToString();
  return outs.ok() ? *outs : std::vector<HostTensor>{};
}

::testing::AssertionResult sameBits(const HostTensor &fused,
                                    const HostTensor &unfused) {
  if (fused.desc.dtype != unfused.desc.dtype ||
      fused.desc.numel() != unfused.desc.numel())
    return ::testing::AssertionFailure() << "different dtypes or sizes";
  if (fused.bytes != unfused.bytes)
    return ::testing::AssertionFailure() << "different bits";
  return ::testing::AssertionSuccess();
}

// On the GPU, what braid-fuse-moe rewrites gives the same bits fused and
// unfused: moe_unpermute as moe_gather_choices then moe_weighted_sum, and
// moe_unpermute_grad as moe_weighted_sum_grad then moe_gather_choices_grad
// (the choices gathered again), dropless and with a capacity.
TEST(CudaMoeKernels, UnfusedCombineGivesFusedBits) {
  const int64_t n = 300, k = 2, e = 8, d = 96;
  const HostTensor experts = choicesOf(n, k, e, 60);
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t capacity : {0, 40}) {
      SCOPED_TRACE(::testing::Message() << dtypeLabel(dt)
                                        << " capacity=" << capacity);
      const std::vector<HostTensor> sorted = cpuOutputs(
          harness(), launchOf("moe_sort", {experts},
                              {randomIds({n, k}, 61, -9, 9),
                               randomIds({e + 1}, 62, -9, 9)},
                              capacityParams(capacity)));
      ASSERT_EQ(sorted.size(), 2u);
      const HostTensor &positions = sorted[0];
      const int64_t rows = capacity > 0 ? e * capacity : n * k;
      const HostTensor ys = randomTensor({rows, d}, dt, 63);
      const HostTensor weights = randomTensor({n, k}, DType::kF32, 64);
      const HostTensor dy = randomTensor({n, d}, dt, 65);

      const std::vector<HostTensor> fused = gpuOutputs(
          launchOf("moe_unpermute", {ys, positions, weights},
                   {randomTensor({n, d}, dt, 66)}));
      const std::vector<HostTensor> choices = gpuOutputs(
          launchOf("moe_gather_choices", {ys, positions},
                   {randomTensor({n, k, d}, dt, 67)}));
      ASSERT_EQ(fused.size(), 1u);
      ASSERT_EQ(choices.size(), 1u);
      const std::vector<HostTensor> unfused = gpuOutputs(
          launchOf("moe_weighted_sum", {choices[0], weights},
                   {randomTensor({n, d}, dt, 68)}));
      ASSERT_EQ(unfused.size(), 1u);
      EXPECT_TRUE(sameBits(fused[0], unfused[0])) << "y";

      const std::vector<HostTensor> fusedGrad = gpuOutputs(
          launchOf("moe_unpermute_grad", {dy, ys, positions, weights},
                   {randomTensor({rows, d}, dt, 69),
                    randomTensor({n, k}, DType::kF32, 70)}));
      const std::vector<HostTensor> sumGrad = gpuOutputs(
          launchOf("moe_weighted_sum_grad", {dy, choices[0], weights},
                   {randomTensor({n, k, d}, dt, 71),
                    randomTensor({n, k}, DType::kF32, 72)}));
      ASSERT_EQ(fusedGrad.size(), 2u);
      ASSERT_EQ(sumGrad.size(), 2u);
      const std::vector<HostTensor> dys = gpuOutputs(
          launchOf("moe_gather_choices_grad", {sumGrad[0], positions},
                   {randomTensor({rows, d}, dt, 73)}));
      ASSERT_EQ(dys.size(), 1u);
      EXPECT_TRUE(sameBits(fusedGrad[0], dys[0])) << "dys";
      EXPECT_TRUE(sameBits(fusedGrad[1], sumGrad[1])) << "dweights";
    }
}

// The grouped GEMMs over blocks of uneven sizes, one expert empty and
// The sub-units' copies (moe_split_tokens, moe_join_tokens): token rows in
// f32 and bf16 and the router's i32 choices, three parts of a sequence of
// 12, exactly.
TEST(CudaMoeKernels, TokenPartsMatchCpu) {
  const int64_t b = 3, s = 12, x = 5, parts = 3;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kI32}) {
    SCOPED_TRACE(dt == DType::kI32 ? "i32" : dtypeLabel(dt));
    auto tensor = [&](std::vector<int64_t> shape, uint64_t seed) {
      return dt == DType::kI32 ? randomIds(shape, seed, -9, 9)
                               : randomTensor(shape, dt, seed);
    };
    std::vector<HostTensor> pieces, garbage;
    for (int64_t p = 0; p < parts; ++p) {
      pieces.push_back(tensor({b, s / parts, x}, 80 + p));
      garbage.push_back(tensor({b, s / parts, x}, 90 + p));
    }
    const std::vector<Tolerance> exact(parts, kExact);
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_split_tokens", {tensor({b, s, x}, 85)},
                               garbage, KernelParams()),
                      exact));
    EXPECT_TRUE(twins(harness(),
                      launchOf("moe_join_tokens", pieces,
                               {tensor({b, s, x}, 86)}, KernelParams()),
                      {kExact}));
  }
}

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
