// rope and rope_grad_input: Hugging Face rotate-half against a double
// reference (angles rounded to float as documented; 1e-5 relative + 1e-5
// absolute), the gradient against finite differences and as the inverse.
#include <cmath>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

constexpr int kB = 2, kS = 7, kH = 3, kDh = 10;
constexpr double kTheta = 500.0;

std::vector<double> refRope(const std::vector<float> &x, int sign) {
  std::vector<double> y(x.size());
  const int half = kDh / 2;
  for (int b = 0; b < kB; ++b)
    for (int s = 0; s < kS; ++s)
      for (int h = 0; h < kH; ++h)
        for (int i = 0; i < half; ++i) {
          const double freq = std::pow(kTheta, -2.0 * i / kDh);
          const double a = static_cast<float>(s * freq);
          const double c = std::cos(a), sn = sign * std::sin(a);
          const int base = ((b * kS + s) * kH + h) * kDh;
          const double x1 = x[base + i], x2 = x[base + i + half];
          y[base + i] = x1 * c - x2 * sn;
          y[base + i + half] = x2 * c + x1 * sn;
        }
  return y;
}

Launch ropeLaunch(const char *name, const std::vector<float> &x) {
  Launch l(name);
  l.in({kB, kS, kH * kDh}, x).out({kB, kS, kH * kDh});
  l.param("num_heads", kH).paramF("theta", kTheta);
  return l;
}

TEST(Rope, MatchesReference) {
  auto x = randomVector(kB * kS * kH * kDh, 1);
  Launch f = ropeLaunch("rope", x);
  f.run(&testPool(2));
  expectNear(f.output(0), refRope(x, 1), 1e-5, 1e-5, "y");
  expectThreadInvariant(f);
  // Position 0 is the identity.
  for (int i = 0; i < kH * kDh; ++i)
    EXPECT_EQ(f.output(0)[i], x[i]);
}

TEST(RopeGradInput, IsTheInverseRotationAndMatchesFiniteDifferences) {
  auto x = randomVector(kB * kS * kH * kDh, 2);
  auto dy = randomVector(kB * kS * kH * kDh, 3);
  Launch g = ropeLaunch("rope_grad_input", dy);
  g.run(&testPool(3));
  expectNear(g.output(0), refRope(dy, -1), 1e-5, 1e-5, "dx");
  expectThreadInvariant(g);

  Launch f = ropeLaunch("rope", x);
  f.run();
  Launch back = ropeLaunch("rope_grad_input", f.output(0));
  back.run();
  std::vector<double> xd(x.begin(), x.end());
  expectNear(back.output(0), xd, 1e-5, 1e-5, "inverse(rope(x))");

  expectGradientMatches(
      [&](const std::vector<float> &xv) {
        Launch p = ropeLaunch("rope", xv);
        p.run();
        return project(dy, p.output(0));
      },
      x, g.output(0), 1e-2, 1e-4, 1e-5, 4, "x");
}

} // namespace
} // namespace braid::test
