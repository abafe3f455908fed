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

// Under expert parallel the rows arrive sender by sender, each sender's
// rows expert by expert: 2 x E blocks, block g through expert g mod E, each
// expert's gradient summed over its two blocks.
TEST(MoeGroupedLinear, BlocksCycleOverTheExperts) {
  // Sender 0: 2, 0, 1, 1 rows; sender 1: 1, 2, 0, 2 rows; row 9 is spare.
  const std::vector<int32_t> offsets = {0, 2, 2, 3, 4, 5, 7, 7, 9};
  const int rows = 10;
  auto expertOfRow = [&](int r) {
    for (int g = 0; g + 1 < static_cast<int>(offsets.size()); ++g)
      if (r >= offsets[g] && r < offsets[g + 1])
        return g % kExperts;
    return -1;
  };
  const auto x = randomVector(rows * kIn, 40);
  const auto w = randomVector(kExperts * kOut * kIn, 41);
  const auto dy = randomVector(rows * kOut, 42);
  Launch fwd("moe_grouped_linear");
  fwd.in({rows, kIn}, x).in({kExperts, kOut, kIn}, w).inIds({9}, offsets)
      .out({rows, kOut}, randomVector(rows * kOut, 43));
  fwd.run(&testPool(2));
  Launch gw("moe_grouped_linear_grad_weight");
  gw.in({rows, kOut}, dy).in({rows, kIn}, x).inIds({9}, offsets)
      .out({kExperts, kOut, kIn}, randomVector(kExperts * kOut * kIn, 44));
  gw.run(&testPool(2));
  std::vector<double> y(rows * kOut, 0.0), dw(kExperts * kOut * kIn, 0.0);
  for (int r = 0; r < rows; ++r) {
    const int e = expertOfRow(r);
    for (int o = 0; e >= 0 && o < kOut; ++o)
      for (int i = 0; i < kIn; ++i) {
        y[r * kOut + o] += double{x[r * kIn + i]} * w[(e * kOut + o) * kIn + i];
        dw[(e * kOut + o) * kIn + i] +=
            double{dy[r * kOut + o]} * x[r * kIn + i];
      }
  }
  expectNear(fwd.output(0), y, 1e-6, 1e-6, "y");
  expectNear(gw.output(0), dw, 1e-6, 1e-6, "dw");
}

// moe_block_counts: the rows a rank sends each expert. moe_ep_offsets: of
// the group's gathered counts, the blocks this rank receives, sender by
// sender and expert by expert over its own experts.
TEST(MoeExpertParallel, CountsAndTheReceivedBlocks) {
  Launch counts("moe_block_counts");
  counts.inIds({5}, {0, 2, 2, 5, 9}).outIds({4});
  counts.run();
  EXPECT_EQ(counts.outputIds(0), (std::vector<int32_t>{2, 0, 3, 4}));
  // Two ranks of two experts: rank 0 sends 1, 2 | 3, 0; rank 1 2, 0 | 1, 1.
  const std::vector<int32_t> all = {1, 2, 3, 0, 2, 0, 1, 1};
  for (int rank : {0, 1}) {
    Launch offsets("moe_ep_offsets");
    offsets.inIds({8}, all).outIds({5});
    offsets.context().epRank = rank;
    offsets.run();
    EXPECT_EQ(offsets.outputIds(0), rank == 0
                                        ? (std::vector<int32_t>{0, 1, 3, 5, 5})
                                        : (std::vector<int32_t>{0, 3, 3, 4, 5}))
        << "rank " << rank;
  }
  Launch bad("moe_ep_offsets");
  bad.inDesc({6}, DType::kI32).outDesc({5}, DType::kI32);
  EXPECT_THAT(std::string(bad.check().message()),
              HasSubstr("expected G x G x m counts and G x m + 1 offsets"));
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
                        "expected one more than a multiple of the weight's 4 "
                        "experts"));
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
