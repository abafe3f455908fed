// cross_entropy and cross_entropy_grad_input against a double reference
// (fp32 vs double: 1e-5 relative), finite differences, thread invariance.
#include <cmath>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

constexpr int kRows = 2 * 9, kV = 37;
constexpr double kScale = 0.75;

struct CrossEntropyTest : ::testing::Test {
  std::vector<float> logits = randomVector(kRows * kV, 1, -6, 6);
  std::vector<int32_t> labels = randomIds(kRows, 2, kV);

  Launch forward() const {
    Launch l("cross_entropy");
    l.in({2, 9, kV}, logits).inIds({2, 9}, labels).out({}).out({2, 9});
    return l;
  }
  Launch backward(const std::vector<float> &lse) const {
    Launch l("cross_entropy_grad_input");
    l.in({2, 9, kV}, logits).inIds({2, 9}, labels).in({2, 9}, lse);
    l.out({2, 9, kV}).paramF("scale", kScale);
    return l;
  }
};

TEST_F(CrossEntropyTest, MatchesReference) {
  std::vector<double> lse(kRows), dlogits(kRows * kV);
  double loss = 0;
  for (int r = 0; r < kRows; ++r) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < kV; ++j)
      mx = std::max<double>(mx, logits[r * kV + j]);
    for (int j = 0; j < kV; ++j)
      s += std::exp(logits[r * kV + j] - mx);
    lse[r] = mx + std::log(s);
    loss += (lse[r] - logits[r * kV + labels[r]]) / kRows;
    for (int j = 0; j < kV; ++j)
      dlogits[r * kV + j] = kScale *
                            (std::exp(logits[r * kV + j] - lse[r]) -
                             (j == labels[r] ? 1.0 : 0.0)) /
                            kRows;
  }
  Launch f = forward();
  f.run(&testPool(2));
  expectNear(f.output(0), {loss}, 1e-5, 0, "loss");
  expectNear(f.output(1), lse, 1e-5, 1e-6, "lse");
  Launch g = backward(f.output(1));
  g.run(&testPool(3));
  expectNear(g.output(0), dlogits, 1e-5, 1e-7, "dlogits");
  expectThreadInvariant(f);
  expectThreadInvariant(g);
}

TEST_F(CrossEntropyTest, GradientMatchesFiniteDifferences) {
  Launch f = forward();
  f.run();
  Launch g = backward(f.output(1));
  g.run();
  expectGradientMatches(
      [&](const std::vector<float> &lv) {
        Launch p = forward();
        p.input(0) = lv;
        p.run();
        return kScale * p.output(0)[0];
      },
      logits, g.output(0), 1e-2, 2e-3, 1e-6, 3, "logits");
}

TEST_F(CrossEntropyTest, LargeLogitsStayFinite) {
  for (float &x : logits)
    x *= 1000.0f;
  Launch f = forward();
  f.run();
  EXPECT_TRUE(std::isfinite(f.output(0)[0]));
  Launch g = backward(f.output(1));
  g.run();
  for (float d : g.output(0))
    ASSERT_TRUE(std::isfinite(d));
}

} // namespace
} // namespace braid::test
