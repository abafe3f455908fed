// The vectorisable helpers of kernels/cpu/VecMath.h: expFloat accuracy and
// limits, and the lane-blocked reductions.
#include "kernels/cpu/VecMath.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::cpu {
namespace {

// Distance in units in the last place between two positive finite floats.
int64_t ulps(float a, float b) {
  return std::abs(static_cast<int64_t>(bitsOf(a)) -
                  static_cast<int64_t>(bitsOf(b)));
}

TEST(ExpFloat, WithinOneUlpOverTheNormalRange) {
  int64_t worst = 0;
  for (float x = -87.0f; x < 88.7f; x += 0.00137f) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    worst = std::max(worst, ulps(expFloat(x), want));
  }
  EXPECT_LE(worst, 1);
}

TEST(ExpFloat, Limits) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(expFloat(0.0f), 1.0f);
  EXPECT_EQ(expFloat(-100.0f), 0.0f);
  EXPECT_EQ(expFloat(-inf), 0.0f);
  EXPECT_EQ(expFloat(89.0f), inf);
  EXPECT_EQ(expFloat(inf), inf);
  EXPECT_TRUE(std::isnan(expFloat(std::nanf(""))));
  EXPECT_LE(
      ulps(expFloat(88.72f), static_cast<float>(std::exp(double{88.72f}))), 2);
}

TEST(Reductions, MatchDoubleAndHandleTails) {
  for (int n : {1, 15, 16, 17, 100}) {
    auto a = test::randomVector(n, n), b = test::randomVector(n, n + 1);
    double d = 0, s = 0, m = -1e30;
    for (int i = 0; i < n; ++i) {
      d += static_cast<double>(a[i]) * b[i];
      s += a[i];
      m = std::max<double>(m, a[i]);
    }
    EXPECT_NEAR(dot(a.data(), b.data(), n), d, 1e-5) << n;
    EXPECT_NEAR(sum(a.data(), n), s, 1e-5) << n;
    EXPECT_EQ(maxOf(a.data(), n), static_cast<float>(m)) << n;
  }
}

TEST(Reductions, Vec16TreesAreTheArrayTrees) {
  auto a = test::randomVector(kLanes, 7);
  float copy[kLanes];
  std::copy(a.begin(), a.end(), copy);
  EXPECT_EQ(sumLanes(load16(a.data())), sumLanes(copy));
  std::copy(a.begin(), a.end(), copy);
  EXPECT_EQ(maxLanes(load16(a.data())), maxLanes(copy));
}

TEST(Masks, FirstLanesSelectsAPrefix) {
  const Vec16 ones = broadcast16(1.0f);
  for (int k = 0; k <= kLanes; ++k) {
    const Vec16 picked = firstLanes(k) ? ones : Vec16{};
    for (int l = 0; l < kLanes; ++l)
      EXPECT_EQ(picked[l], l < k ? 1.0f : 0.0f) << k << " " << l;
  }
}

} // namespace
} // namespace braid::cpu
