// moe_grouped_linear and its gradients (docs/kernels.md): each expert's
// block of rows through its own weight, the rows after offsets[E] zero,
// an expert without rows, accumulation, and the checks' refusals.
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

// 9 rows over 4 experts: expert 0 rows 0-2, expert 1 none, expert 2 rows
// 3-6, expert 3 row 7; row 8 belongs to no expert.
const std::vector<int32_t> kOffsets = {0, 3, 3, 7, 8};
constexpr int kRows = 9, kExperts = 4, kIn = 5, kOut = 3;

int expertOf(int r) {
  for (int e = 0; e < kExperts; ++e)
    if (r >= kOffsets[e] && r < kOffsets[e + 1])
      return e;
  return -1;
}

TEST(MoeGroupedLinear, EachBlockThroughItsExpert) {
  const auto x = randomVector(kRows * kIn, 1);
  const auto w = randomVector(kExperts * kOut * kIn, 2);
  Launch l("moe_grouped_linear");
  l.in({kRows, kIn}, x).in({kExperts, kOut, kIn}, w).inIds({kExperts + 1},
                                                           kOffsets)
      .out({kRows, kOut}, randomVector(kRows * kOut, 3));
  l.run(&testPool(2));
  expectThreadInvariant(l);
  std::vector<double> want(kRows * kOut, 0.0);
  for (int r = 0; r < kRows; ++r) {
    const int e = expertOf(r);
    for (int o = 0; e >= 0 && o < kOut; ++o)
      for (int i = 0; i < kIn; ++i)
        want[r * kOut + o] +=
            double{x[r * kIn + i]} * w[(e * kOut + o) * kIn + i];
  }
  expectNear(l.output(0), want, 1e-6, 1e-6, "y");
}

TEST(MoeGroupedLinearGrads, AreTheForwardsAdjointsAndAccumulate) {
  const auto x = randomVector(kRows * kIn, 4);
  const auto w = randomVector(kExperts * kOut * kIn, 5);
  const auto dy = randomVector(kRows * kOut, 6);
  Launch gi("moe_grouped_linear_grad_input");
  gi.in({kRows, kOut}, dy).in({kExperts, kOut, kIn}, w)
      .inIds({kExperts + 1}, kOffsets)
      .out({kRows, kIn}, randomVector(kRows * kIn, 7));
  gi.run();
  Launch gw("moe_grouped_linear_grad_weight");
  gw.in({kRows, kOut}, dy).in({kRows, kIn}, x).inIds({kExperts + 1}, kOffsets)
      .out({kExperts, kOut, kIn}, randomVector(kExperts * kOut * kIn, 8));
  gw.run(&testPool(3));
  expectThreadInvariant(gw);
  std::vector<double> dx(kRows * kIn, 0.0), dw(kExperts * kOut * kIn, 0.0);
  for (int r = 0; r < kRows; ++r) {
    const int e = expertOf(r);
    for (int o = 0; e >= 0 && o < kOut; ++o)
      for (int i = 0; i < kIn; ++i) {
        dx[r * kIn + i] += double{dy[r * kOut + o]} *
                           w[(e * kOut + o) * kIn + i];
        dw[(e * kOut + o) * kIn + i] +=
            double{dy[r * kOut + o]} * x[r * kIn + i];
      }
  }
  // Row 8 (no expert) gets a zero gradient; expert 1 (no rows) zeros.
  expectNear(gi.output(0), dx, 1e-6, 1e-6, "dx");
  expectNear(gw.output(0), dw, 1e-6, 1e-6, "dw");

  // accumulate = 1 adds into what the outputs held.
  const auto old = randomVector(kExperts * kOut * kIn, 9);
  Launch acc("moe_grouped_linear_grad_weight");
  acc.in({kRows, kOut}, dy).in({kRows, kIn}, x)
      .inIds({kExperts + 1}, kOffsets).out({kExperts, kOut, kIn}, old)
      .param("accumulate", 1);
  acc.run();
  for (size_t i = 0; i < dw.size(); ++i)
    dw[i] += old[i];
  expectNear(acc.output(0), dw, 1e-6, 1e-6, "dw accumulated");
}

TEST(MoeGroupedLinear, ChecksRefuseBadShapes) {
  Launch offsets("moe_grouped_linear");
  offsets.inDesc({9, 5}, DType::kF32)
      .inDesc({4, 3, 5}, DType::kF32)
      .inDesc({4}, DType::kI32)
      .outDesc({9, 3}, DType::kF32);
  EXPECT_THAT(std::string(offsets.check().message()),
              HasSubstr("moe_grouped_linear: input 2 (offsets) has shape [4], "
                        "expected [5]"));
  Launch width("moe_grouped_linear_grad_input");
  width.inDesc({9, 5}, DType::kF32)
      .inDesc({4, 3, 5}, DType::kF32)
      .inDesc({5}, DType::kI32)
      .outDesc({9, 5}, DType::kF32);
  EXPECT_THAT(std::string(width.check().message()),
              HasSubstr("input 0 (dy) has shape [9, 5], expected [N, 3]"));
  Launch dw("moe_grouped_linear_grad_weight");
  dw.inDesc({9, 3}, DType::kBF16)
      .inDesc({9, 5}, DType::kBF16)
      .inDesc({5}, DType::kI32)
      .outDesc({4, 5, 3}, DType::kF32);
  EXPECT_THAT(std::string(dw.check().message()),
              HasSubstr("output 0 (dweight) has shape [4, 5, 3], expected "
                        "[4, 3, 5]"));
}

} // namespace
} // namespace braid::test
