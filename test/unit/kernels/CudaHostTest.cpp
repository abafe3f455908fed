// The host arithmetic of the CUDA kernels (GemmProblem, LaunchPlan): plain
// C++ that needs no device, so it runs on every machine with nvcc.
//
// The GEMM problems are checked by running them through a host GEMM that
// reads GemmProblem the way cuBLASLt documents it (column-major, element
// (i, j) at i + j * ld, op = transpose when the flag is set) and comparing
// with the row-major definitions of docs/kernels.md. Exact: both sum the
// same small integers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
// The CPU kernels' vector helpers pass 64-byte vectors by value (see
// kernels/CMakeLists.txt on -Wno-psabi); only expFloat is used here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#include "kernels/cpu/VecMath.h"
#pragma GCC diagnostic pop
#include "kernels/cuda/ExpFloat.h"
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

// rowMajorProduct for every transposition, padded leading dimensions and a
// strided batch: the cuBLASLt reading of the problem equals the row-major
// product c = alpha op(a) op(b) + beta c of each batch.
TEST(GemmProblemTest, RowMajorProductEveryTranspositionBatched) {
  const int64_t M = 3, N = 4, K = 5;
  const int32_t batch = 2;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        // Stored shapes (transposed operands are stored K x M, N x K), each
        // row padded by 2 elements, each batch by 3.
        const int64_t aRows = ta ? K : M, aCols = ta ? M : K;
        const int64_t bRows = tb ? N : K, bCols = tb ? K : N;
        const RowMajor a{DType::kBF16, aRows, aCols, aCols + 2,
                         aRows * (aCols + 2) + 3, ta};
        const RowMajor b{DType::kBF16, bRows, bCols, bCols + 2,
                         bRows * (bCols + 2) + 3, tb};
        const RowMajor c{DType::kF32, M, N, N + 2, M * (N + 2) + 3, false};
        const GemmProblem p = rowMajorProduct(a, b, c, batch, 0.5f, beta);
        ASSERT_TRUE(validateGemm(p).ok()) << validateGemm(p);
        EXPECT_EQ(p.batch, batch);
        EXPECT_EQ(p.a.batchStride, b.batchStride);
        EXPECT_EQ(p.b.batchStride, a.batchStride);
        EXPECT_EQ(p.c.batchStride, c.batchStride);
        const std::vector<double> av = sequence(batch * a.batchStride, 9),
                                  bv = sequence(batch * b.batchStride, 10);
        std::vector<double> cv = sequence(batch * c.batchStride, 11);
        const std::vector<double> old = cv;
        for (int32_t bt = 0; bt < batch; ++bt) {
          // One batch through the column-major reading, on shifted copies.
          GemmProblem one = p;
          one.batch = 1;
          const std::vector<double> ab(av.begin() + bt * p.b.batchStride,
                                       av.end());
          const std::vector<double> bb(bv.begin() + bt * p.a.batchStride,
                                       bv.end());
          std::vector<double> cb(cv.begin() + bt * p.c.batchStride,
                                 cv.end());
          // cuBLASLt's A is our b, its B our a.
          hostGemm(one, /*A=*/bb, /*B=*/ab, cb);
          std::copy(cb.begin(), cb.end(), cv.begin() + bt * p.c.batchStride);
        }
        for (int32_t bt = 0; bt < batch; ++bt)
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double sum = 0;
              for (int64_t l = 0; l < K; ++l) {
                const double x = av[bt * a.batchStride +
                                    (ta ? l * a.ld + i : i * a.ld + l)];
                const double y = bv[bt * b.batchStride +
                                    (tb ? j * b.ld + l : l * b.ld + j)];
                sum += x * y;
              }
              const int64_t ci = bt * c.batchStride + i * c.ld + j;
              EXPECT_EQ(cv[ci], 0.5 * sum + beta * old[ci])
                  << "ta " << ta << " tb " << tb << " batch " << bt << " ("
                  << i << ", " << j << ")";
            }
        // The padding between rows and batches is never written.
        for (int32_t bt = 0; bt < batch; ++bt)
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = N; j < c.ld; ++j)
              EXPECT_EQ(cv[bt * c.batchStride + i * c.ld + j],
                        old[bt * c.batchStride + i * c.ld + j]);
      }
}

TEST(GemmProblemTest, ValidateTakesMixedOutputsOnly) {
  // bf16 operands may write f32 (weight gradients) or bf16.
  EXPECT_TRUE(validateGemm(linearGradWeight(kN, kM, kK, DType::kBF16,
                                            DType::kBF16, DType::kF32, true))
                  .ok());
  EXPECT_TRUE(validateGemm(linearForward(kN, kM, kK, DType::kBF16,
                                         DType::kBF16, DType::kBF16))
                  .ok());
  GemmProblem p =
      linearForward(kN, kM, kK, DType::kI32, DType::kI32, DType::kF32);
  EXPECT_FALSE(validateGemm(p).ok());
}

TEST(LaunchPlanTest, AttentionWorkspaceSplitIsAligned) {
  for (size_t ws : {size_t{0}, size_t{1000}, size_t{1} << 20,
                    (size_t{64} << 20) + 100}) {
    const WorkspaceSplit s = splitAttentionWorkspace(ws);
    EXPECT_EQ(s.gemmBytes % 256, 0u);
    EXPECT_EQ(s.scratchOffset % 256, 0u);
    EXPECT_EQ(s.scratchBytes % 256, 0u);
    EXPECT_LE(s.gemmBytes, kAttentionGemmWorkspace);
    EXPECT_LE(s.scratchOffset + s.scratchBytes, ws);
    EXPECT_GE(s.scratchOffset, s.gemmBytes);
  }
}

TEST(LaunchPlanTest, ColumnSplitWithTwoOutputs) {
  // layer_norm's dgamma and dbeta: two partials per column and chunk.
  const ColumnSplit s = planColumnSplit(10000, 72, 2, size_t{64} << 20);
  EXPECT_GT(s.chunks, 1);
  EXPECT_LE(s.chunks, kMaxChunks);
  EXPECT_LT((s.chunks - 1) * s.rowsPerChunk, 10000);
  EXPECT_EQ(s.workspaceBytes, s.chunks * 72 * 2 * 4);
  EXPECT_GE(s.chunks * s.rowsPerChunk, 10000);
  // Room for exactly three chunks of partials.
  const ColumnSplit t = planColumnSplit(10000, 72, 2, 3 * 72 * 2 * 4 + 7);
  EXPECT_EQ(t.chunks, 3);
  EXPECT_LE(t.workspaceBytes, 3 * 72 * 2 * 4);
}

// The element-wise CUDA kernels evaluate the CPU's exp with the same
// operations (ExpFloat.h); on the host the two must agree bit for bit,
// over a sweep of every exponent and many mantissas, both signs, and the
// special values.
TEST(ExpFloatTest, MatchesTheCpuKernelsExpBitForBit) {
  auto same = [](float x) {
    const float want = cpu::expFloat(x), got = expf32::expFloat(x);
    uint32_t a, b;
    std::memcpy(&a, &want, 4);
    std::memcpy(&b, &got, 4);
    return a == b || (std::isnan(want) && std::isnan(got));
  };
  int64_t bad = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) {
    const uint32_t bitsValue = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &bitsValue, 4);
    if (!same(x) && ++bad <= 5)
      ADD_FAILURE() << "exp(" << x << ") differs";
  }
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, 88.7f, 88.8f, 89.0f, -87.3f,
                  -87.4f, -103.0f, -200.0f,
                  std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    EXPECT_TRUE(same(x)) << "exp(" << x << ")";
  EXPECT_EQ(bad, 0);
  // And it is exp: within a few ulp of the library's in the normal range.
  for (float x = -80.0f; x < 80.0f; x += 0.37f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(expf32::expFloat(x), want, want * 1e-6) << x;
  }
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
