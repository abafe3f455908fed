// moe_permute, moe_unpermute and their gradients (docs/kernels.md): the
// rows' expert-major order and offsets, a choice of no expert, the
// weighted combination, each gradient as the adjoint of its forward, and
// the checks' refusals.
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += double{a[i]} * b[i];
  return s;
}

// 5 tokens, 2 choices each, over 3 experts; token 3's second choice names
// expert 7, which does not exist.
const std::vector<int32_t> kExperts = {2, 0, 1, 2, 0, 1, 2, 7, 1, 0};

TEST(MoePermute, RowsInExpertOrderThenTokenOrder) {
  const int n = 5, k = 2, e = 3, d = 4;
  const auto x = randomVector(n * d, 1);
  Launch l("moe_permute");
  l.in({n, d}, x).inIds({n, k}, kExperts).out({n * k, d}, randomVector(
      n * k * d, 2)).outIds({n, k}).outIds({e + 1});
  l.run(&testPool(3));
  expectThreadInvariant(l);
  // Expert 0: tokens 0, 2, 4; expert 1: tokens 1, 2, 4; expert 2: tokens
  // 0, 1, 3.
  EXPECT_EQ(l.outputIds(2), (std::vector<int32_t>{0, 3, 6, 9}));
  EXPECT_EQ(l.outputIds(1),
            (std::vector<int32_t>{6, 0, 3, 7, 1, 4, 8, -1, 5, 2}));
  const std::vector<int> tokenOfRow = {0, 2, 4, 1, 2, 4, 0, 1, 3};
  std::vector<double> want;
  for (int t : tokenOfRow)
    for (int i = 0; i < d; ++i)
      want.push_back(x[t * d + i]);
  want.insert(want.end(), d, 0.0); // the row no choice takes
  expectNear(l.output(0), want, 0, 0, "xs");
}

// With weights, y[t] = sum_j w[t, j] * ys[positions[t, j]]; unpermuting
// the permuted rows with weights summing to one gives the tokens back.
TEST(MoeUnpermute, CombinesEachTokensChoices) {
  const int n = 5, k = 2, e = 3, d = 4;
  const auto x = randomVector(n * d, 3);
  Launch p("moe_permute");
  p.in({n, d}, x).inIds({n, k}, kExperts).out({n * k, d}).outIds({n, k})
      .outIds({e + 1});
  p.run();
  const auto ys = randomVector(n * k * d, 4);
  const auto w = randomVector(n * k, 5, 0.0f, 1.0f);
  Launch u("moe_unpermute");
  u.in({n * k, d}, ys).inIds({n, k}, p.outputIds(1)).in({n, k}, w)
      .out({n, d}, randomVector(n * d, 6));
  u.run(&testPool(2));
  expectThreadInvariant(u);
  std::vector<double> want(n * d, 0.0);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int32_t r = p.outputIds(1)[t * k + j];
      if (r < 0)
        continue;
      for (int i = 0; i < d; ++i)
        want[t * d + i] += double{w[t * k + j]} * ys[r * d + i];
    }
  expectNear(u.output(0), want, 1e-6, 1e-7, "y");

  std::vector<float> half(n * k, 0.5f);
  Launch back("moe_unpermute");
  back.in({n * k, d}, p.output(0)).inIds({n, k}, p.outputIds(1))
      .in({n, k}, half).out({n, d});
  back.run();
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i)
      EXPECT_FLOAT_EQ(back.output(0)[t * d + i],
                      t == 3 ? 0.5f * x[t * d + i] : x[t * d + i])
          << "token " << t; // token 3 kept one choice of two
}

// <permute(x), dxs> = <x, permute_grad(dxs)>, and likewise for
// unpermute's rows; dweights = dy[t] . ys at the choice's position.
TEST(MoePermuteGrads, AreTheForwardsAdjoints) {
  const int n = 5, k = 2, e = 3, d = 6;
  const auto x = randomVector(n * d, 7);
  Launch p("moe_permute");
  p.in({n, d}, x).inIds({n, k}, kExperts).out({n * k, d}).outIds({n, k})
      .outIds({e + 1});
  p.run();
  const std::vector<int32_t> positions = p.outputIds(1);
  const auto dxs = randomVector(n * k * d, 8);
  Launch pg("moe_permute_grad");
  pg.in({n * k, d}, dxs).inIds({n, k}, positions).out({n, d});
  pg.run(&testPool(3));
  expectThreadInvariant(pg);
  EXPECT_NEAR(dot(p.output(0), dxs), dot(x, pg.output(0)), 1e-5);

  const auto ys = randomVector(n * k * d, 9);
  const auto w = randomVector(n * k, 10);
  const auto dy = randomVector(n * d, 11);
  Launch u("moe_unpermute");
  u.in({n * k, d}, ys).inIds({n, k}, positions).in({n, k}, w).out({n, d});
  u.run();
  Launch ug("moe_unpermute_grad");
  ug.in({n, d}, dy).in({n * k, d}, ys).inIds({n, k}, positions)
      .in({n, k}, w)
      .out({n * k, d}, randomVector(n * k * d, 12))
      .out({n, k}, randomVector(n * k, 13));
  ug.run(&testPool(2));
  expectThreadInvariant(ug);
  EXPECT_NEAR(dot(u.output(0), dy), dot(ys, ug.output(0)), 1e-5);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int32_t r = positions[t * k + j];
      double want = 0;
      for (int i = 0; r >= 0 && i < d; ++i)
        want += double{dy[t * d + i]} * ys[r * d + i];
      EXPECT_NEAR(ug.output(1)[t * k + j], want, 1e-6)
          << "token " << t << " choice " << j;
    }
  // The row no choice takes gets no gradient.
  for (int i = 0; i < d; ++i)
    EXPECT_EQ(ug.output(0)[(n * k - 1) * d + i], 0.0f);
}

// Enough rows that the pool splits the work: every thread reads the same
// owners of the rows (a thread-local table once left the pool's threads
// with empty ones).
TEST(MoeUnpermuteGrad, SplitsOverThePool) {
  const int n = 600, k = 2, e = 4, d = 64;
  const auto experts = randomIds(n * k, 14, e);
  Launch p("moe_permute");
  p.in({n, d}, randomVector(n * d, 15))
      .inIds({n, k}, experts)
      .out({n * k, d})
      .outIds({n, k})
      .outIds({e + 1});
  p.run();
  Launch ug("moe_unpermute_grad");
  ug.in({n, d}, randomVector(n * d, 16))
      .in({n * k, d}, randomVector(n * k * d, 17))
      .inIds({n, k}, p.outputIds(1))
      .in({n, k}, randomVector(n * k, 18))
      .out({n * k, d})
      .out({n, k});
  ug.run(&testPool(3));
  expectThreadInvariant(ug);
}

// Capacity mode: each expert's first `capacity` choices in token order
// take its slots; later ones are dropped; unfilled slots are zero.
TEST(MoePermute, CapacityDropsAndPads) {
  const int n = 5, k = 2, e = 3, d = 4, capacity = 2;
  const auto x = randomVector(n * d, 19);
  Launch l("moe_permute");
  l.in({n, d}, x)
      .inIds({n, k}, kExperts)
      .out({e * capacity, d}, randomVector(e * capacity * d, 20))
      .outIds({n, k})
      .outIds({e + 1})
      .param("capacity", capacity);
  l.run(&testPool(2));
  // Expert 0: tokens 0, 2 (token 4 dropped); expert 1: tokens 1, 2
  // (token 4 dropped); expert 2: tokens 0, 1 (token 3 dropped).
  EXPECT_EQ(l.outputIds(1),
            (std::vector<int32_t>{4, 0, 2, 5, 1, 3, -1, -1, -1, -1}));
  EXPECT_EQ(l.outputIds(2), (std::vector<int32_t>{0, 2, 4, 6}));
  const std::vector<int> tokenOfSlot = {0, 2, 1, 2, 0, 1};
  std::vector<double> want;
  for (int t : tokenOfSlot)
    for (int i = 0; i < d; ++i)
      want.push_back(x[t * d + i]);
  expectNear(l.output(0), want, 0, 0, "xs");
  // The dropped choices add nothing back.
  Launch u("moe_unpermute");
  u.in({e * capacity, d}, l.output(0))
      .inIds({n, k}, l.outputIds(1))
      .in({n, k}, std::vector<float>(n * k, 1.0f))
      .out({n, d});
  u.run();
  for (int i = 0; i < d; ++i) {
    EXPECT_FLOAT_EQ(u.output(0)[3 * d + i], 0.0f) << "token 3 is dropped";
    EXPECT_FLOAT_EQ(u.output(0)[4 * d + i], 0.0f) << "token 4 is dropped";
    EXPECT_FLOAT_EQ(u.output(0)[0 * d + i], 2 * x[i]);
  }
}

TEST(MoePermute, ChecksRefuseBadShapes) {
  Launch rows("moe_permute");
  rows.inDesc({5, 4}, DType::kF32)
      .inDesc({4, 2}, DType::kI32)
      .outDesc({8, 4}, DType::kF32)
      .outDesc({4, 2}, DType::kI32)
      .outDesc({4}, DType::kI32);
  EXPECT_THAT(std::string(rows.check().message()),
              HasSubstr("moe_permute: input 1 (experts) has 4 rows, one per "
                        "token of input 0 (x): 5"));
  Launch offsets("moe_permute");
  offsets.inDesc({5, 4}, DType::kF32)
      .inDesc({5, 2}, DType::kI32)
      .outDesc({10, 4}, DType::kF32)
      .outDesc({5, 2}, DType::kI32)
      .outDesc({1}, DType::kI32);
  EXPECT_THAT(std::string(offsets.check().message()),
              HasSubstr("moe_permute: output 2 (offsets) has 1 entries"));
  Launch weights("moe_unpermute");
  weights.inDesc({10, 4}, DType::kBF16)
      .inDesc({5, 2}, DType::kI32)
      .inDesc({5, 2}, DType::kBF16)
      .outDesc({5, 4}, DType::kBF16);
  EXPECT_THAT(std::string(weights.check().message()),
              HasSubstr("moe_unpermute: input 2 (weights) has dtype bf16, "
                        "expected f32"));
  Launch grad("moe_unpermute_grad");
  grad.inDesc({5, 4}, DType::kF32)
      .inDesc({9, 4}, DType::kF32)
      .inDesc({5, 2}, DType::kI32)
      .inDesc({5, 2}, DType::kF32)
      .outDesc({10, 4}, DType::kF32)
      .outDesc({5, 2}, DType::kF32);
  EXPECT_THAT(std::string(grad.check().message()),
              HasSubstr("moe_unpermute_grad: output 0 (dys) has shape "
                        "[10, 4]"));
  // Capacity mode: E * capacity rows, whatever the choices.
  Launch slots("moe_permute");
  slots.inDesc({5, 4}, DType::kF32)
      .inDesc({5, 2}, DType::kI32)
      .outDesc({10, 4}, DType::kF32)
      .outDesc({5, 2}, DType::kI32)
      .outDesc({4}, DType::kI32)
      .param("capacity", 2);
  EXPECT_THAT(std::string(slots.check().message()),
              HasSubstr("moe_permute: output 0 (xs) has shape [10, 4], "
                        "expected [6, 4]"));
}

// --- moe_split_tokens and moe_join_tokens (sub-units) ---------------------

// [2, 6, 3] in three parts [2, 2, 3]: part p holds positions 2p and 2p + 1
// of each sequence.
TEST(MoeTokenParts, SplitTakesEqualPartsOfEachSequenceAndJoinRestores) {
  constexpr int kB = 2, kS = 6, kX = 3, kParts = 3;
  const auto x = randomVector(kB * kS * kX, 71);
  Launch split("moe_split_tokens");
  split.in({kB, kS, kX}, x);
  for (int p = 0; p < kParts; ++p)
    split.out({kB, kS / kParts, kX});
  split.run();
  Launch join("moe_join_tokens");
  for (int p = 0; p < kParts; ++p) {
    const std::vector<float> &part = split.output(p);
    for (int b = 0; b < kB; ++b)
      for (int s = 0; s < kS / kParts; ++s)
        for (int i = 0; i < kX; ++i)
          EXPECT_EQ(part[(b * kS / kParts + s) * kX + i],
                    x[(b * kS + p * kS / kParts + s) * kX + i])
              << "part " << p << " batch " << b << " position " << s;
    join.in({kB, kS / kParts, kX}, part);
  }
  join.out({kB, kS, kX});
  join.run(&testPool(2));
  EXPECT_EQ(join.output(0), x);
}

// The router's choices are split as they are: i32 copied bit for bit.
TEST(MoeTokenParts, SplitCopiesRouterChoices) {
  const std::vector<int32_t> ids = {0, 1, 2, 3, 4, 5, 6, 7};
  Launch split("moe_split_tokens");
  split.inIds({1, 4, 2}, ids).outIds({1, 2, 2}).outIds({1, 2, 2});
  split.run();
  EXPECT_EQ(split.outputIds(0), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(split.outputIds(1), (std::vector<int32_t>{4, 5, 6, 7}));
}

TEST(MoeTokenParts, ChecksRefuseUnequalPartsAndMixedDtypes) {
  Launch uneven("moe_split_tokens");
  uneven.in({2, 5, 3}, randomVector(30, 72)).out({2, 2, 3}).out({2, 2, 3});
  EXPECT_THAT(std::string(uneven.check().message()),
              HasSubstr("input 0 (x) has a sequence of 5, which 2 parts do "
                        "not divide"));
  Launch one("moe_join_tokens");
  one.in({2, 4, 3}, randomVector(24, 73)).out({2, 4, 3});
  EXPECT_THAT(std::string(one.check().message()),
              HasSubstr("needs at least two parts, got 1"));
  Launch mixed("moe_join_tokens");
  mixed.in({2, 2, 3}, randomVector(12, 74))
      .inIds({2, 2, 3}, std::vector<int32_t>(12, 0))
      .out({2, 4, 3});
  EXPECT_THAT(std::string(mixed.check().message()),
              HasSubstr("input 1 (part) has dtype i32, expected f32"));
  Launch shape("moe_split_tokens");
  shape.in({2, 4, 3}, randomVector(24, 75)).out({2, 2, 3}).out({2, 2, 2});
  EXPECT_THAT(std::string(shape.check().message()),
              HasSubstr("output 1 (part) has shape [2, 2, 2]"));
}

} // namespace
} // namespace braid::test
