// linear, linear_grad_input, linear_grad_weight against a double reference,
// finite differences, and accumulate. GEMMs run in OpenBLAS fp32: tolerance
// 1e-5 relative plus 1e-5 absolute against double.
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-5;

// x [n, k], w [m, k]: y = x w^T + b.
std::vector<double> refLinear(const std::vector<float> &x,
                              const std::vector<float> &w,
                              const std::vector<float> *b, int n, int k,
                              int m) {
  std::vector<double> y(n * m);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < m; ++j) {
      double s = b ? (*b)[j] : 0.0;
      for (int i = 0; i < k; ++i)
        s += static_cast<double>(x[r * k + i]) * w[j * k + i];
      y[r * m + j] = s;
    }
  return y;
}

TEST(Linear, MatchesReferenceWithAndWithoutBias) {
  const int n = 6, k = 5, m = 7;
  auto x = randomVector(n * k, 1), w = randomVector(m * k, 2),
       b = randomVector(m, 3);
  Launch withBias("linear");
  withBias.in({2, 3, k}, x).in({m, k}, w).in({m}, b).out({2, 3, m});
  withBias.run();
  expectNear(withBias.output(0), refLinear(x, w, &b, n, k, m), kRtol, kAtol,
             "y with bias");

  Launch noBias("linear");
  noBias.in({2, 3, k}, x).in({m, k}, w).out({2, 3, m});
  noBias.run(&testPool(2));
  expectNear(noBias.output(0), refLinear(x, w, nullptr, n, k, m), kRtol, kAtol,
             "y without bias");
}

TEST(Linear, RankOneInputAndEmptyReduction) {
  const int k = 9, m = 4;
  auto x = randomVector(k, 4), w = randomVector(m * k, 5),
       b = randomVector(m, 6);
  Launch l("linear");
  l.in({k}, x).in({m, k}, w).in({m}, b).out({m});
  l.run();
  expectNear(l.output(0), refLinear(x, w, &b, 1, k, m), kRtol, kAtol, "y");

  // K = 0: y is the bias alone.
  Launch empty("linear");
  empty.in({3, 0}, {}).in({m, 0}, {}).in({m}, b).out({3, m});
  empty.run();
  std::vector<double> want;
  for (int r = 0; r < 3; ++r)
    for (float v : b)
      want.push_back(v);
  expectNear(empty.output(0), want, 0, 0, "y with K = 0");
}

TEST(LinearGradInput, MatchesReferenceAndAccumulates) {
  const int n = 5, k = 6, m = 3;
  auto dy = randomVector(n * m, 7), w = randomVector(m * k, 8);
  std::vector<double> want(n * k);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < m; ++j)
        want[r * k + i] += static_cast<double>(dy[r * m + j]) * w[j * k + i];
  Launch l("linear_grad_input");
  l.in({n, m}, dy).in({m, k}, w).out({n, k});
  l.run();
  expectNear(l.output(0), want, kRtol, kAtol, "dx");

  auto old = randomVector(n * k, 9);
  Launch acc("linear_grad_input");
  acc.in({n, m}, dy).in({m, k}, w).out({n, k}, old).param("accumulate", 1);
  acc.run();
  for (int i = 0; i < n * k; ++i)
    want[i] += old[i];
  expectNear(acc.output(0), want, kRtol, kAtol, "dx accumulated");
}

TEST(LinearGradWeight, MatchesReferenceAndAccumulates) {
  const int n = 7, k = 4, m = 5;
  auto dy = randomVector(n * m, 10), x = randomVector(n * k, 11);
  std::vector<double> dw(m * k), db(m);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < m; ++j) {
      db[j] += dy[r * m + j];
      for (int i = 0; i < k; ++i)
        dw[j * k + i] += static_cast<double>(dy[r * m + j]) * x[r * k + i];
    }
  Launch l("linear_grad_weight");
  l.in({n, m}, dy).in({n, k}, x).out({m, k}).out({m});
  l.run(&testPool(3));
  expectNear(l.output(0), dw, kRtol, kAtol, "dw");
  expectNear(l.output(1), db, kRtol, kAtol, "db");

  auto oldW = randomVector(m * k, 12), oldB = randomVector(m, 13);
  Launch acc("linear_grad_weight");
  acc.in({n, m}, dy).in({n, k}, x).out({m, k}, oldW).out({m}, oldB);
  acc.param("accumulate", 1);
  acc.run(&testPool(2));
  for (int i = 0; i < m * k; ++i)
    dw[i] += oldW[i];
  expectNear(acc.output(0), dw, kRtol, kAtol, "dw accumulated");
  // The bias gradient is not a GEMM: the old value gets exactly the sum.
  for (int j = 0; j < m; ++j)
    EXPECT_EQ(acc.output(1)[j], oldB[j] + l.output(1)[j]) << "db[" << j << "]";
}

TEST(LinearGradWeight, BiasGradientIsThreadInvariant) {
  const int n = 33, m = 150;
  Launch l("linear_grad_weight");
  l.in({3, 11, m}, randomVector(n * m, 14))
      .in({3, 11, 2}, randomVector(n * 2, 15))
      .out({m, 2})
      .out({m});
  l.run(nullptr);
  const std::vector<float> first = l.output(1);
  for (int t = 2; t <= 3; ++t) {
    l.run(&testPool(t));
    EXPECT_EQ(l.output(1), first) << t << " threads";
  }
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  const int n = 4, k = 5, m = 3;
  auto x = randomVector(n * k, 16), w = randomVector(m * k, 17),
       b = randomVector(m, 18), proj = randomVector(n * m, 19);
  Launch fwd("linear");
  fwd.in({n, k}, x).in({m, k}, w).in({m}, b).out({n, m});
  auto lossOf = [&](int which) {
    return [&, which](const std::vector<float> &v) {
      Launch f = fwd;
      f.input(which) = v;
      f.run();
      return project(proj, f.output(0));
    };
  };

  Launch gi("linear_grad_input");
  gi.in({n, m}, proj).in({m, k}, w).out({n, k});
  gi.run();
  Launch gw("linear_grad_weight");
  gw.in({n, m}, proj).in({n, k}, x).out({m, k}).out({m});
  gw.run();
  expectGradientMatches(lossOf(0), x, gi.output(0), 1e-2, 1e-3, 1e-5, 20, "x");
  expectGradientMatches(lossOf(1), w, gw.output(0), 1e-2, 1e-3, 1e-5, 21, "w");
  expectGradientMatches(lossOf(2), b, gw.output(1), 1e-2, 1e-3, 1e-5, 22, "b");
}

} // namespace
} // namespace braid::test
