// linear, linear_grad_input and linear_grad_weight on CUDA against their
// CPU twins.
//
// Tolerances. Inputs are uniform in [-1, 1), identical on both sides (bf16
// inputs are the same bit patterns, widened exactly by both). Both sides
// accumulate in f32 but in different orders (OpenBLAS's blocking against
// cuBLASLt's), so an f32 result of a K-term dot product may differ by the
// reordering error, bounded by about 2 K u sum|a b| with u = 2^-24; with
// |a b| < 1 and the typical sum near K / 4 that is well inside
// atol = K * 2^-20 (observed errors are near sqrt(K) u). A bf16 output
// rounds those nearly equal f32 values once on each side; when they fall on
// either side of a rounding boundary the results are one bf16 ulp apart,
// at most 2^-7 of the value (2^-8 per rounding), hence rtol = 2^-7 for bf16
// outputs on top of the f32 atol. The bias gradient sums N rows: atol =
// N * 2^-20 in the same way.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/CudaFamilies.h"
#include "test/gpu/kernels/common/TwinHarness.h"

namespace braid::gpu_test {
namespace {

constexpr double kBf16Rtol = 1.0 / 128;  // one bf16 ulp: 2^-7

Tolerance sumTolerance(int64_t terms, DType out) {
  const double atol = std::ldexp(static_cast<double>(std::max<int64_t>(terms, 1)), -20);
  return Tolerance{out == DType::kBF16 ? kBf16Rtol : 0.0, atol};
}

class LinearTest : public ::testing::TestWithParam<DType> {
protected:
  static TwinHarness &harness() {
    static TwinHarness *h = new TwinHarness({cuda::registerLinearKernels});
    return *h;
  }
  DType dt() const { return GetParam(); }
};

struct Dims {
  std::vector<int64_t> lead;  // leading dimensions of x
  int64_t k, m;
};

std::vector<int64_t> withLast(std::vector<int64_t> lead, int64_t last) {
  lead.push_back(last);
  return lead;
}

int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t d : v)
    p *= d;
  return p;
}

const Dims kShapes[] = {
    {{4, 16}, 64, 96},   // aligned, 3-D x
    {{37}, 53, 29},      // odd everything (unaligned leading dimensions)
    {{2, 3, 5}, 8, 1},   // a single output column
    {{1}, 300, 17},      // one row, long reduction
    {{130}, 7, 40},      // many rows: chunked bias gradient
};

TEST_P(LinearTest, Forward) {
  for (bool bias : {false, true}) {
    uint64_t seed = 1;
    for (const Dims &d : kShapes) {
      TwinLaunch l;
      l.kernel = "linear";
      l.ins.push_back(randomTensor(withLast(d.lead, d.k), dt(), seed++));
      l.ins.push_back(randomTensor({d.m, d.k}, dt(), seed++));
      if (bias)
        l.ins.push_back(randomTensor({d.m}, dt(), seed++));
      l.outs.push_back(zeros(withLast(d.lead, d.m), dt()));
      EXPECT_TRUE(expectTwins(harness(), l, sumTolerance(d.k + 1, dt())))
          << "bias " << bias << " k " << d.k << " m " << d.m;
    }
  }
}

TEST_P(LinearTest, ForwardEmptyReduction) {
  // k = 0: y is the bias, or zeros (the fallback kernel, never cuBLASLt).
  for (bool bias : {false, true}) {
    TwinLaunch l;
    l.kernel = "linear";
    l.ins.push_back(zeros({3, 0}, dt()));
    l.ins.push_back(zeros({5, 0}, dt()));
    if (bias)
      l.ins.push_back(randomTensor({5}, dt(), 9));
    // Garbage that a beta = 0 GEMM must not read.
    l.outs.push_back(tensorOf({3, 5}, dt(), std::vector<float>(15, NAN)));
    EXPECT_TRUE(expectTwins(harness(), l, kExact)) << "bias " << bias;
  }
}

TEST_P(LinearTest, ForwardInGraph) {
  TwinLaunch l;
  l.kernel = "linear";
  l.ins.push_back(randomTensor({32, 48}, dt(), 11));
  l.ins.push_back(randomTensor({24, 48}, dt(), 12));
  l.ins.push_back(randomTensor({24}, dt(), 13));
  l.outs.push_back(zeros({32, 24}, dt()));
  EXPECT_TRUE(expectTwins(harness(), l, sumTolerance(49, dt()), GpuMode::kGraph));
}

TEST_P(LinearTest, GradInput) {
  for (int accumulate : {0, 1}) {
    uint64_t seed = 100;
    for (const Dims &d : kShapes) {
      TwinLaunch l;
      l.kernel = "linear_grad_input";
      l.ins.push_back(randomTensor(withLast(d.lead, d.m), dt(), seed++));
      l.ins.push_back(randomTensor({d.m, d.k}, dt(), seed++));
      l.outs.push_back(randomTensor(withLast(d.lead, d.k), dt(), seed++));
      l.params.setInt("accumulate", accumulate);
      EXPECT_TRUE(expectTwins(harness(), l, sumTolerance(d.m + 1, dt())))
          << "accumulate " << accumulate << " k " << d.k << " m " << d.m;
    }
  }
}

TEST_P(LinearTest, GradInputEmptyReduction) {
  // m = 0: dx is zeros, or unchanged with accumulate.
  for (int accumulate : {0, 1}) {
    TwinLaunch l;
    l.kernel = "linear_grad_input";
    l.ins.push_back(zeros({4, 0}, dt()));
    l.ins.push_back(zeros({0, 6}, dt()));
    l.outs.push_back(randomTensor({4, 6}, dt(), 21));
    l.params.setInt("accumulate", accumulate);
    EXPECT_TRUE(expectTwins(harness(), l, kExact))
        << "accumulate " << accumulate;
  }
}

// dw (and db) in f32, or in the inputs' dtype.
TEST_P(LinearTest, GradWeight) {
  std::vector<DType> outTypes = {DType::kF32};
  if (dt() == DType::kBF16)
    outTypes.push_back(DType::kBF16);
  for (DType out : outTypes)
    for (int accumulate : {0, 1})
      for (bool bias : {false, true}) {
        uint64_t seed = 200;
        for (const Dims &d : kShapes) {
          const int64_t n = product(d.lead);
          TwinLaunch l;
          l.kernel = "linear_grad_weight";
          l.ins.push_back(randomTensor(withLast(d.lead, d.m), dt(), seed++));
          l.ins.push_back(randomTensor(withLast(d.lead, d.k), dt(), seed++));
          l.outs.push_back(randomTensor({d.m, d.k}, out, seed++));
          if (bias)
            l.outs.push_back(randomTensor({d.m}, out, seed++));
          l.params.setInt("accumulate", accumulate);
          EXPECT_TRUE(expectTwins(harness(), l, sumTolerance(n + 1, out)))
              << "out " << dtypeName(out) << " accumulate " << accumulate
              << " bias " << bias << " n " << n << " k " << d.k << " m "
              << d.m;
        }
      }
}

TEST_P(LinearTest, GradWeightNoRows) {
  // n = 0: dw and db are zeros, or unchanged with accumulate.
  for (int accumulate : {0, 1}) {
    TwinLaunch l;
    l.kernel = "linear_grad_weight";
    l.ins.push_back(zeros({0, 5}, dt()));
    l.ins.push_back(zeros({0, 3}, dt()));
    l.outs.push_back(randomTensor({5, 3}, DType::kF32, 31));
    l.outs.push_back(randomTensor({5}, DType::kF32, 32));
    l.params.setInt("accumulate", accumulate);
    EXPECT_TRUE(expectTwins(harness(), l, kExact))
        << "accumulate " << accumulate;
  }
}

TEST_P(LinearTest, GradWeightAccumulatesOverMicroBatchesInGraph) {
  // Three replays of one captured launch add three times.
  TwinLaunch l;
  l.kernel = "linear_grad_weight";
  l.ins.push_back(randomTensor({2, 40, 24}, dt(), 41));
  l.ins.push_back(randomTensor({2, 40, 16}, dt(), 42));
  l.outs.push_back(zeros({24, 16}, DType::kF32));
  l.outs.push_back(zeros({24}, DType::kF32));
  l.params.setInt("accumulate", 1);
  std::vector<StepValues> steps(3);
  absl::StatusOr<TwinOutputs> outs =
      harness().runSteps(l, steps, GpuMode::kGraph);
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_TRUE(twinsAgree(*outs, sumTolerance(3 * 81, DType::kF32)));
}

INSTANTIATE_TEST_SUITE_P(Storage, LinearTest,
                         ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return std::string(dtypeName(info.param));
                         });

}  // namespace
}  // namespace braid::gpu_test
