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

// The batched GEMM of capacity mode is the grouped one over E equal
// blocks, every row computed.
TEST(MoeBatchedLinear, IsTheGroupedOneOverEqualBlocks) {
  const int c = 3, rows = kExperts * c;
  const std::vector<int32_t> uniform = {0, 3, 6, 9, 12};
  const auto x = randomVector(rows * kIn, 30);
  const auto w = randomVector(kExperts * kOut * kIn, 31);
  const auto dy = randomVector(rows * kOut, 32);
  const auto check = [&](const char *batched, const char *grouped,
                         std::vector<int64_t> a, const std::vector<float> &av,
                         std::vector<int64_t> b, const std::vector<float> &bv,
                         std::vector<int64_t> out) {
    Launch one(batched), two(grouped);
    one.in(a, av).in(b, bv).out(out);
    two.in(a, av).in(b, bv).inIds({kExperts + 1}, uniform).out(out);
    one.run(&testPool(2));
    two.run(&testPool(2));
    EXPECT_EQ(one.output(0), two.output(0)) << batched;
  };
  check("moe_batched_linear", "moe_grouped_linear", {rows, kIn}, x,
        {kExperts, kOut, kIn}, w, {rows, kOut});
  check("moe_batched_linear_grad_input", "moe_grouped_linear_grad_input",
        {rows, kOut}, dy, {kExperts, kOut, kIn}, w, {rows, kIn});
  check("moe_batched_linear_grad_weight", "moe_grouped_linear_grad_weight",
        {rows, kOut}, dy, {rows, kIn}, x, {kExperts, kOut, kIn});
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
              HasSubstr("input 0 (dy) has shape [9, 5], expected [R, 3]"));
  Launch blocks("moe_batched_linear");
  blocks.inDesc({10, 5}, DType::kF32)
      .inDesc({4, 3, 5}, DType::kF32)
      .outDesc({10, 3}, DType::kF32);
  EXPECT_THAT(std::string(blocks.check().message()),
              HasSubstr("moe_batched_linear: input 0 (x) has 10 rows, not a "
                        "multiple of the 4 experts' equal blocks"));
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
