// layer_norm and rms_norm with their gradients: double references (fp32
// kernel vs double: 2e-5 relative + 2e-5 absolute), finite differences of
// the forward kernels, exact accumulate, thread invariance.
#include <cmath>
#include <ostream>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

constexpr double kRtol = 2e-5, kAtol = 2e-5, kEps = 1e-5;

struct Ref {
  std::vector<double> y, mean, rstd, dx, dgamma, dbeta;
};

// The textbook formulas in double, for rows of x [n, d].
Ref reference(bool layer, const std::vector<float> &x,
              const std::vector<float> &gamma, const std::vector<float> &beta,
              const std::vector<float> &dy, int n, int d) {
  Ref r;
  r.y.resize(n * d);
  r.dx.resize(n * d);
  r.dgamma.assign(d, 0);
  r.dbeta.assign(d, 0);
  for (int i = 0; i < n; ++i) {
    const float *xr = &x[i * d];
    double mean = 0, var = 0;
    if (layer) {
      for (int j = 0; j < d; ++j)
        mean += xr[j];
      mean /= d;
    }
    for (int j = 0; j < d; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= d;
    const double rstd = 1 / std::sqrt(var + kEps);
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
    double meanG = 0, meanGX = 0;
    for (int j = 0; j < d; ++j) {
      const double xhat = (xr[j] - mean) * rstd, g = dy[i * d + j] * gamma[j];
      r.y[i * d + j] = xhat * gamma[j] + (layer ? beta[j] : 0.0);
      meanG += g / d;
      meanGX += g * xhat / d;
      r.dgamma[j] += dy[i * d + j] * xhat;
      r.dbeta[j] += dy[i * d + j];
    }
    for (int j = 0; j < d; ++j) {
      const double xhat = (xr[j] - mean) * rstd, g = dy[i * d + j] * gamma[j];
      r.dx[i * d + j] = rstd * (g - (layer ? meanG : 0.0) - xhat * meanGX);
    }
  }
  return r;
}

struct Case {
  bool layer;
  std::vector<int64_t> shape; // x's shape; last is D
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << (c.layer ? "layer_norm" : "rms_norm") << " x"
      << ::testing::PrintToString(c.shape);
}

class NormTest : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    const Case &c = GetParam();
    layer = c.layer;
    shape = c.shape;
    d = static_cast<int>(shape.back());
    n = static_cast<int>(numelOf(shape) / d);
    lead.assign(shape.begin(), shape.end() - 1);
    x = randomVector(n * d, 1, -2.0f, 3.0f);
    gamma = randomVector(d, 2, 0.5f, 1.5f);
    beta = randomVector(d, 3);
    dy = randomVector(n * d, 4);
    ref = reference(layer, x, gamma, beta, dy, n, d);
  }
  std::string name(const char *suffix) const {
    return std::string(layer ? "layer_norm" : "rms_norm") + suffix;
  }
  Launch forward() const {
    Launch l(name(""));
    l.in(shape, x).in({d}, gamma);
    if (layer)
      l.in({d}, beta);
    l.out(shape);
    if (layer)
      l.out(lead);
    l.out(lead).paramF("eps", kEps);
    return l;
  }
  // The saved statistics the backward kernels read (from the forward kernel).
  std::vector<std::vector<float>> stats() const {
    Launch f = forward();
    f.run();
    if (layer)
      return {f.output(1), f.output(2)};
    return {f.output(1)};
  }
  Launch gradInput(const std::vector<float> &dyv) const {
    Launch l(name("_grad_input"));
    l.in(shape, dyv).in(shape, x).in({d}, gamma);
    for (auto &s : stats())
      l.in(lead, s);
    l.out(shape);
    return l;
  }
  Launch gradWeight(const std::vector<float> &dyv) const {
    Launch l(name("_grad_weight"));
    l.in(shape, dyv).in(shape, x);
    for (auto &s : stats())
      l.in(lead, s);
    l.out({d});
    if (layer)
      l.out({d});
    return l;
  }

  bool layer;
  std::vector<int64_t> shape, lead;
  int n, d;
  std::vector<float> x, gamma, beta, dy;
  Ref ref;
};

TEST_P(NormTest, ForwardMatchesReference) {
  Launch f = forward();
  f.run(&testPool(2));
  expectNear(f.output(0), ref.y, kRtol, kAtol, "y");
  if (layer)
    expectNear(f.output(1), ref.mean, kRtol, kAtol, "mean");
  expectNear(f.output(layer ? 2 : 1), ref.rstd, kRtol, kAtol, "rstd");
  expectThreadInvariant(f);
}

TEST_P(NormTest, GradInputMatchesReferenceAndFiniteDifferences) {
  Launch g = gradInput(dy);
  g.run(&testPool(3));
  expectNear(g.output(0), ref.dx, kRtol, kAtol, "dx");
  expectThreadInvariant(g);
  expectGradientMatches(
      [&](const std::vector<float> &xv) {
        Launch f = forward();
        f.input(0) = xv;
        f.run();
        return project(dy, f.output(0));
      },
      x, g.output(0), 1e-3, 2e-3, 1e-4, 5, "x");
}

TEST_P(NormTest, GradWeightMatchesReferenceAndAccumulatesExactly) {
  Launch g = gradWeight(dy);
  g.run(&testPool(2));
  expectNear(g.output(0), ref.dgamma, kRtol, kAtol, "dgamma");
  if (layer)
    expectNear(g.output(1), ref.dbeta, kRtol, kAtol, "dbeta");
  expectThreadInvariant(g);

  Launch acc = gradWeight(dy);
  auto oldG = randomVector(d, 6), oldB = randomVector(d, 7);
  acc.setInitial(0, oldG);
  if (layer)
    acc.setInitial(1, oldB);
  acc.param("accumulate", 1);
  acc.run(&testPool(3));
  for (int j = 0; j < d; ++j) {
    EXPECT_EQ(acc.output(0)[j], oldG[j] + g.output(0)[j]);
    if (layer)
      EXPECT_EQ(acc.output(1)[j], oldB[j] + g.output(1)[j]);
  }

  expectGradientMatches(
      [&](const std::vector<float> &gv) {
        Launch f = forward();
        f.input(1) = gv;
        f.run();
        return project(dy, f.output(0));
      },
      gamma, g.output(0), 1e-2, 1e-3, 1e-5, 8, "gamma");
  if (layer)
    expectGradientMatches(
        [&](const std::vector<float> &bv) {
          Launch f = forward();
          f.input(2) = bv;
          f.run();
          return project(dy, f.output(0));
        },
        beta, g.output(1), 1e-2, 1e-3, 1e-5, 9, "beta");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, NormTest,
    ::testing::Values(Case{true, {2, 3, 37}}, Case{true, {5, 4}},
                      Case{true, {130, 70}}, Case{false, {2, 3, 37}},
                      Case{false, {5, 4}}, Case{false, {130, 70}}),
    [](const ::testing::TestParamInfo<Case> &info) {
      std::string s = info.param.layer ? "LayerNorm" : "RmsNorm";
      for (int64_t d : info.param.shape)
        s += "_" + std::to_string(d);
      return s;
    });

} // namespace
} // namespace braid::test
