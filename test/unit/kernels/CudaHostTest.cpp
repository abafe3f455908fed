// The host arithmetic of the CUDA kernels (GemmProblem, LaunchPlan): plain
// C++ that needs no device, so it runs on every machine with nvcc.
//
// The GEMM problems are checked by running them through a host GEMM that
// reads GemmProblem the way cuBLASLt documents it (column-major, element
// (i, j) at i + j * ld, op = transpose when the flag is set) and comparing
// with the row-major definitions of docs/kernels.md. Exact: both sum the
// same small integers.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/GemmProblem.h"
#include "kernels/cuda/LaunchPlan.h"

namespace braid::cuda {
namespace {

// D = alpha op(A) op(B) + beta C, as cuBLASLt defines it (one batch).
void hostGemm(const GemmProblem &p, const std::vector<double> &a,
              const std::vector<double> &b, std::vector<double> &c) {
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0;
      for (int64_t l = 0; l < p.k; ++l) {
        const double av = p.transA ? a[l + i * p.a.ld] : a[i + l * p.a.ld];
        const double bv = p.transB ? b[j + l * p.b.ld] : b[l + j * p.b.ld];
        sum += av * bv;
      }
      double &out = c[i + j * p.c.ld];
      out = p.alpha * sum + p.beta * out;
    }
}

std::vector<double> sequence(int64_t n, int seed) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<double>((i * 7 + seed * 3) % 11) - 5;
  return v;
}

constexpr int64_t kN = 5, kM = 3, kK = 4;

TEST(GemmProblemTest, LinearForwardIsXTimesWTransposed) {
  const GemmProblem p =
      linearForward(kN, kM, kK, DType::kBF16, DType::kBF16, DType::kBF16);
  ASSERT_TRUE(validateGemm(p).ok()) << validateGemm(p);
  const std::vector<double> x = sequence(kN * kK, 1), w = sequence(kM * kK, 2);
  std::vector<double> y(kN * kM, 0);
  hostGemm(p, /*A=*/w, /*B=*/x, y);
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t o = 0; o < kM; ++o) {
      double want = 0;
      for (int64_t i = 0; i < kK; ++i)
        want += x[r * kK + i] * w[o * kK + i];
      EXPECT_EQ(y[r * kM + o], want) << r << ", " << o;
    }
}

TEST(GemmProblemTest, LinearGradInputIsDyTimesW) {
  for (bool accumulate : {false, true}) {
    const GemmProblem p = linearGradInput(kN, kM, kK, DType::kF32,
                                          DType::kF32, DType::kF32,
                                          accumulate);
    ASSERT_TRUE(validateGemm(p).ok()) << validateGemm(p);
    const std::vector<double> dy = sequence(kN * kM, 3),
                              w = sequence(kM * kK, 4);
    std::vector<double> dx = sequence(kN * kK, 5);
    const std::vector<double> old = dx;
    hostGemm(p, /*A=*/w, /*B=*/dy, dx);
    for (int64_t r = 0; r < kN; ++r)
      for (int64_t i = 0; i < kK; ++i) {
        double want = accumulate ? old[r * kK + i] : 0;
        for (int64_t o = 0; o < kM; ++o)
          want += dy[r * kM + o] * w[o * kK + i];
        EXPECT_EQ(dx[r * kK + i], want) << r << ", " << i;
      }
  }
}

TEST(GemmProblemTest, LinearGradWeightIsDyTransposedTimesX) {
  for (bool accumulate : {false, true}) {
    const GemmProblem p = linearGradWeight(kN, kM, kK, DType::kBF16,
                                           DType::kBF16, DType::kF32,
                                           accumulate);
    ASSERT_TRUE(validateGemm(p).ok()) << validateGemm(p);
    const std::vector<double> dy = sequence(kN * kM, 6),
                              x = sequence(kN * kK, 7);
    std::vector<double> dw = sequence(kM * kK, 8);
    const std::vector<double> old = dw;
    hostGemm(p, /*A=*/x, /*B=*/dy, dw);
    for (int64_t o = 0; o < kM; ++o)
      for (int64_t i = 0; i < kK; ++i) {
        double want = accumulate ? old[o * kK + i] : 0;
        for (int64_t r = 0; r < kN; ++r)
          want += dy[r * kM + o] * x[r * kK + i];
        EXPECT_EQ(dw[o * kK + i], want) << o << ", " << i;
      }
  }
}

TEST(GemmProblemTest, ValidateRefusesMismatches) {
  GemmProblem p =
      linearForward(kN, kM, kK, DType::kF32, DType::kF32, DType::kF32);
  GemmProblem q = p;
  q.k += 1;
  EXPECT_FALSE(validateGemm(q).ok());
  q = p;
  q.b.type = DType::kBF16;
  EXPECT_FALSE(validateGemm(q).ok());
  q = p;
  q.c.type = DType::kBF16;  // f32 operands need an f32 output
  EXPECT_FALSE(validateGemm(q).ok());
  q = p;
  q.a.ld = q.a.rows - 1;
  EXPECT_FALSE(validateGemm(q).ok());
  q = p;
  q.batch = 0;
  EXPECT_FALSE(validateGemm(q).ok());
  q = p;
  q.epilogue = GemmEpilogue::kBias;
  q.batch = 2;
  EXPECT_FALSE(validateGemm(q).ok());
}

TEST(LaunchPlanTest, BlocksFor) {
  EXPECT_EQ(blocksFor(0, 256), 1);
  EXPECT_EQ(blocksFor(1, 256), 1);
  EXPECT_EQ(blocksFor(256, 256), 1);
  EXPECT_EQ(blocksFor(257, 256), 2);
  EXPECT_EQ(blocksFor(int64_t{1} << 40, 256), kMaxBlocks);
  EXPECT_EQ(alignUp(1, 256), 256);
  EXPECT_EQ(alignUp(512, 256), 512);
}

TEST(LaunchPlanTest, ColumnSplitCoversEveryRowOnce) {
  for (int64_t rows : {int64_t{0}, int64_t{64}, int64_t{65}, int64_t{1000},
                       int64_t{100000}})
    for (size_t ws : {size_t{0}, size_t{1000}, size_t{64} << 20}) {
      const ColumnSplit s = planColumnSplit(rows, 50, 1, ws);
      ASSERT_GE(s.chunks, 1);
      EXPECT_LE(static_cast<size_t>(s.workspaceBytes), ws);
      EXPECT_GE(s.chunks * s.rowsPerChunk, rows);
      EXPECT_LT((s.chunks - 1) * s.rowsPerChunk, std::max<int64_t>(rows, 1));
      if (s.chunks > 1)
        EXPECT_EQ(s.workspaceBytes, s.chunks * 50 * 4);
    }
}

TEST(LaunchPlanTest, NormChunksMatchTheCpuBlocksWhenTheyFit) {
  const int64_t numels[] = {10000, 4096, 0, 1};
  NormChunks plan = planNormChunks(numels, 4, size_t{1} << 20);
  EXPECT_EQ(plan.chunkElements, 4096);
  EXPECT_EQ(plan.chunks, 3 + 1 + 0 + 1);
  // Room for 3 partials: the chunk doubles until 3 suffice.
  plan = planNormChunks(numels, 4, 3 * 8);
  EXPECT_EQ(plan.chunkElements, 16384);
  EXPECT_EQ(plan.chunks, 3);
  // Not even one per non-empty input.
  plan = planNormChunks(numels, 4, 2 * 8);
  EXPECT_LT(plan.chunks, 0);
}

}  // namespace
}  // namespace braid::cuda
