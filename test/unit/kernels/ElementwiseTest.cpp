// gelu, swiglu, add, accumulate, fill, dropout and split with their
// gradients: double references (1e-5 relative + 1e-6 absolute), finite
// differences, dropout statistics and mask identity, thread invariance.
#include <cmath>
#include <vector>

#include "kernels/common/Random.h"
#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;
const std::vector<int64_t> kShape = {3, 5, 7};
constexpr int kN = 3 * 5 * 7;

double refGelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double refSilu(double g) { return g / (1 + std::exp(-g)); }

// d/dx of f by central differences in double: the reference derivative.
template <typename F> double derivative(F f, double x) {
  const double h = 1e-5;
  return (f(x + h) - f(x - h)) / (2 * h);
}

TEST(Gelu, ForwardAndGradientMatchReference) {
  auto x = randomVector(kN, 1, -6, 6);
  auto dy = randomVector(kN, 2);
  Launch f("gelu");
  f.in(kShape, x).out(kShape);
  f.run(&testPool(2));
  Launch g("gelu_grad_input");
  g.in(kShape, dy).in(kShape, x).out(kShape);
  g.run(&testPool(2));
  std::vector<double> y, dx;
  for (int i = 0; i < kN; ++i) {
    y.push_back(refGelu(x[i]));
    dx.push_back(dy[i] * derivative(refGelu, x[i]));
  }
  expectNear(f.output(0), y, kRtol, kAtol, "y");
  expectNear(g.output(0), dx, 1e-5, 1e-5, "dx");
  expectThreadInvariant(f);
  expectThreadInvariant(g);
  expectGradientMatches(
      [&](const std::vector<float> &xv) {
        Launch p = f;
        p.input(0) = xv;
        p.run();
        return project(dy, p.output(0));
      },
      x, g.output(0), 1e-3, 1e-3, 1e-5, 3, "x");
}

TEST(Gelu, SaturatesWithoutNaN) {
  Launch f("gelu");
  f.in({4}, {-100.0f, -30.0f, 30.0f, 100.0f}).out({4});
  f.run();
  expectNear(f.output(0), {0.0, 0.0, 30.0, 100.0}, 0, 1e-6, "y");
}

TEST(Swiglu, ForwardAndGradientMatchReference) {
  auto gate = randomVector(kN, 4, -8, 8), up = randomVector(kN, 5, -2, 2);
  auto dy = randomVector(kN, 6);
  Launch f("swiglu");
  f.in(kShape, gate).in(kShape, up).out(kShape);
  f.run(&testPool(3));
  Launch g("swiglu_grad_input");
  g.in(kShape, dy).in(kShape, gate).in(kShape, up).out(kShape).out(kShape);
  g.run(&testPool(3));
  std::vector<double> y, dgate, dup;
  for (int i = 0; i < kN; ++i) {
    y.push_back(refSilu(gate[i]) * up[i]);
    dgate.push_back(dy[i] * up[i] * derivative(refSilu, gate[i]));
    dup.push_back(dy[i] * refSilu(gate[i]));
  }
  expectNear(f.output(0), y, kRtol, kAtol, "y");
  expectNear(g.output(0), dgate, 1e-5, 1e-5, "dgate");
  expectNear(g.output(1), dup, kRtol, kAtol, "dup");
  expectThreadInvariant(f);
  expectThreadInvariant(g);
  for (int which = 0; which < 2; ++which)
    expectGradientMatches(
        [&](const std::vector<float> &xv) {
          Launch p = f;
          p.input(which) = xv;
          p.run();
          return project(dy, p.output(0));
        },
        which == 0 ? gate : up, g.output(which), 1e-3, 1e-3, 1e-5, 7 + which,
        which == 0 ? "gate" : "up");
}

TEST(Add, AccumulateAndFill) {
  auto a = randomVector(kN, 8), b = randomVector(kN, 9);
  Launch add("add");
  add.in(kShape, a).in(kShape, b).out(kShape);
  add.run(&testPool(2));
  Launch acc("accumulate");
  acc.in(kShape, a).out(kShape, b);
  acc.run(&testPool(3));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(add.output(0)[i], a[i] + b[i]);
    EXPECT_EQ(acc.output(0)[i], b[i] + a[i]);
  }
  Launch fill("fill");
  fill.out(kShape).paramF("value", -2.5);
  fill.run(&testPool(2));
  expectNear(fill.output(0), std::vector<double>(kN, -2.5), 0, 0, "fill");
  expectThreadInvariant(add);
  expectThreadInvariant(acc);
  expectThreadInvariant(fill);
}

Launch dropoutLaunch(const char *name, const std::vector<float> &x,
                     std::vector<int64_t> shape, double p, int64_t offset,
                     uint64_t seed, int64_t step, int64_t micro) {
  Launch l(name);
  l.in(shape, x).out(shape).paramF("p", p).param("rng_offset", offset);
  l.context().seed = seed;
  l.context().step = step;
  l.microBatch() = micro;
  return l;
}

TEST(Copy, CopiesTokensAndFloatsExactly) {
  Launch ids("copy");
  ids.inIds({2, 3}, {7, -1, 2047, 0, 5, 3}).outIds({2, 3});
  ids.run(&testPool(2));
  EXPECT_EQ(ids.outputIds(0), (std::vector<int32_t>{7, -1, 2047, 0, 5, 3}));
  const std::vector<float> x = randomVector(kN, 11);
  Launch floats("copy");
  floats.in(kShape, x).out(kShape);
  floats.run();
  EXPECT_EQ(floats.output(0), x);
  Launch mixed("copy");
  mixed.inIds({2, 3}, {1, 2, 3, 4, 5, 6}).out({2, 3});
  EXPECT_FALSE(mixed.check().ok());
  Launch reshaped("copy");
  reshaped.in({6}, {1, 2, 3, 4, 5, 6}).out({2, 3});
  EXPECT_FALSE(reshaped.check().ok());
}

TEST(Dropout, MaskFollowsTheDocumentedRule) {
  const double p = 0.3;
  auto x = randomVector(kN, 10, 0.5f, 1.5f);
  Launch f = dropoutLaunch("dropout", x, kShape, p, 4, 77, 2, 1);
  f.run(&testPool(2));
  const uint64_t key = rng::dropoutKey(77, 4, 2, 1);
  const float scale = 1.0f / (1.0f - static_cast<float>(p));
  for (int i = 0; i < kN; ++i) {
    const bool keep = rng::uniform24(key, i) >= p;
    EXPECT_EQ(f.output(0)[i], keep ? x[i] * scale : 0.0f) << i;
  }
  expectThreadInvariant(f);
}

TEST(Dropout, KeepFractionWithinStatisticalBounds) {
  const int n = 200000;
  const double p = 0.2;
  std::vector<float> ones(n, 1.0f);
  Launch f = dropoutLaunch("dropout", ones, {n}, p, 0, 5, 1, 0);
  f.run(&testPool(2));
  int kept = 0;
  for (float y : f.output(0))
    kept += y != 0.0f;
  // Binomial(n, 0.8): standard deviation ~179; allow 5 of them.
  const double expected = n * (1 - p), sigma = std::sqrt(n * p * (1 - p));
  EXPECT_NEAR(kept, expected, 5 * sigma);
  double mean = 0;
  for (float y : f.output(0))
    mean += y;
  EXPECT_NEAR(mean / n, 1.0, 5 * sigma / (n * (1 - p)));
}

TEST(Dropout, SameMaskForSameKeyDifferentOtherwise) {
  std::vector<float> ones(kN, 1.0f);
  auto mask = [&](uint64_t seed, int64_t offset, int64_t step, int64_t micro) {
    Launch f =
        dropoutLaunch("dropout", ones, kShape, 0.5, offset, seed, step, micro);
    f.run();
    return f.output(0);
  };
  const auto base = mask(1, 2, 3, 0);
  EXPECT_EQ(mask(1, 2, 3, 0), base);
  EXPECT_NE(mask(2, 2, 3, 0), base);
  EXPECT_NE(mask(1, 3, 3, 0), base);
  EXPECT_NE(mask(1, 2, 4, 0), base);
  EXPECT_NE(mask(1, 2, 3, 1), base);
}

TEST(DropoutGradInput, RegeneratesTheForwardMask) {
  auto x = randomVector(kN, 11), dy = randomVector(kN, 12);
  Launch f = dropoutLaunch("dropout", x, kShape, 0.4, 6, 3, 5, 2);
  Launch g = dropoutLaunch("dropout_grad_input", dy, kShape, 0.4, 6, 3, 5, 2);
  f.run(&testPool(2));
  g.run(&testPool(3));
  const float scale = 1.0f / (1.0f - 0.4f);
  int dropped = 0;
  for (int i = 0; i < kN; ++i) {
    const bool kept = f.output(0)[i] != 0.0f;
    dropped += !kept;
    EXPECT_EQ(g.output(0)[i], kept ? dy[i] * scale : 0.0f) << i;
  }
  EXPECT_GT(dropped, 0);
  expectThreadInvariant(g);
  expectGradientMatches(
      [&](const std::vector<float> &xv) {
        Launch p = f;
        p.input(0) = xv;
        p.run();
        return project(dy, p.output(0));
      },
      x, g.output(0), 1e-2, 1e-5, 1e-6, 13, "x");
}

TEST(Dropout, ZeroProbabilityIsTheIdentity) {
  auto x = randomVector(kN, 14);
  Launch f = dropoutLaunch("dropout", x, kShape, 0.0, 0, 1, 1, 0);
  f.run();
  EXPECT_EQ(f.output(0), x);
}

TEST(Split, PartsAndGradientRoundTrip) {
  const int rows = 6, k = 5, parts = 3;
  auto x = randomVector(rows * parts * k, 15);
  Launch s("split");
  s.in({2, 3, parts * k}, x);
  for (int p = 0; p < parts; ++p)
    s.out({2, 3, k});
  s.run(&testPool(2));
  for (int p = 0; p < parts; ++p)
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < k; ++j)
        EXPECT_EQ(s.output(p)[r * k + j], x[(r * parts + p) * k + j]);
  expectThreadInvariant(s);

  Launch g("split_grad_input");
  for (int p = 0; p < parts; ++p)
    g.in({2, 3, k}, s.output(p));
  g.out({2, 3, parts * k});
  g.run(&testPool(3));
  EXPECT_EQ(g.output(0), x);
  expectThreadInvariant(g);

  // The gradient of sum_p proj_p . split(x)_p.
  std::vector<std::vector<float>> proj;
  Launch gp("split_grad_input");
  for (int p = 0; p < parts; ++p) {
    proj.push_back(randomVector(rows * k, 16 + p));
    gp.in({2, 3, k}, proj.back());
  }
  gp.out({2, 3, parts * k});
  gp.run();
  expectGradientMatches(
      [&](const std::vector<float> &xv) {
        Launch p = s;
        p.input(0) = xv;
        p.run();
        double total = 0;
        for (int i = 0; i < parts; ++i)
          total += project(proj[i], p.output(i));
        return total;
      },
      x, gp.output(0), 1e-2, 1e-5, 1e-6, 20, "x");
}

} // namespace
} // namespace braid::test
