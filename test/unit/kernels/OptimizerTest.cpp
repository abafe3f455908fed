// grad_norm and adamw: the norm against double, and three AdamW steps
// against a double implementation of PyTorch's formulas (clip_grad_norm_
// then AdamW), with clipping active and inactive.
#include <cmath>
#include <limits>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

TEST(GradNorm, MatchesDoubleAcrossBlocksAndIsThreadInvariant) {
  // Sizes across the 4096-element block boundary, and an empty input.
  const std::vector<int> sizes = {3, 4096, 10001, 0, 77};
  Launch l("grad_norm");
  double sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto g = randomVector(sizes[i], 10 + i, -3, 3);
    for (float x : g)
      sum += static_cast<double>(x) * x;
    l.in({sizes[i]}, g);
  }
  l.out({});
  l.run(&testPool(3));
  expectNear(l.output(0), {std::sqrt(sum)}, 1e-7, 0, "norm");
  expectThreadInvariant(l);
}

struct AdamwSettings {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double gradClip;
};

// PyTorch's clip_grad_norm_ followed by torch.optim.AdamW, in double.
void referenceStep(const AdamwSettings &s, int t, double lr,
                   const std::vector<float> &grad, std::vector<double> &p,
                   std::vector<double> &m, std::vector<double> &v) {
  double sq = 0;
  for (float g : grad)
    sq += static_cast<double>(g) * g;
  const double norm = std::sqrt(sq);
  const double clip =
      s.gradClip > 0 ? std::min(1.0, s.gradClip / (norm + 1e-6)) : 1.0;
  const double bc1 = 1 - std::pow(s.beta1, t), bc2 = 1 - std::pow(s.beta2, t);
  for (size_t i = 0; i < grad.size(); ++i) {
    const double g = grad[i] * clip;
    p[i] *= 1 - lr * s.weightDecay;
    m[i] = s.beta1 * m[i] + (1 - s.beta1) * g;
    v[i] = s.beta2 * v[i] + (1 - s.beta2) * g * g;
    const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + s.eps;
    p[i] -= lr / bc1 * m[i] / denom;
  }
}

void runThreeSteps(const AdamwSettings &s, bool expectClipped) {
  const int n = 1000;
  const std::vector<double> lrs = {1e-3, 2e-3, 3e-3};
  auto p0 = randomVector(n, 1);
  std::vector<double> p(p0.begin(), p0.end()), m(n, 0), v(n, 0);
  std::vector<float> pk = p0, mk(n, 0.0f), vk(n, 0.0f);
  for (int t = 1; t <= 3; ++t) {
    auto grad = randomVector(n, 100 + t, -2, 2);
    Launch norm("grad_norm");
    norm.in({10, 100}, grad).out({});
    norm.run();
    const float nrm = norm.output(0)[0];
    EXPECT_EQ(expectClipped, s.gradClip > 0 && s.gradClip < nrm);

    Launch step("adamw");
    step.in({10, 100}, grad).in({}, {nrm}).in({}, {0.0f});
    step.out({10, 100}, pk).out({10, 100}, mk).out({10, 100}, vk);
    step.paramF("beta1", s.beta1).paramF("beta2", s.beta2);
    step.paramF("eps", s.eps).paramF("weight_decay", s.weightDecay);
    step.paramF("grad_clip", s.gradClip);
    step.context().step = t;
    step.context().update = t;
    step.context().lr = lrs[t - 1];
    step.run(&testPool(2));
    pk = step.output(0);
    mk = step.output(1);
    vk = step.output(2);
    if (t == 3)
      expectThreadInvariant(step);

    referenceStep(s, t, lrs[t - 1], grad, p, m, v);
    expectNear(pk, p, 1e-6, 1e-7, "param after step " + std::to_string(t));
    expectNear(mk, m, 1e-5, 1e-7, "exp_avg after step " + std::to_string(t));
    expectNear(vk, v, 1e-5, 1e-9, "exp_avg_sq after step " + std::to_string(t));
  }
}

TEST(Adamw, MatchesPyTorchFormulaWithClippingActive) {
  AdamwSettings s;
  s.gradClip = 1.0; // the gradient norms are about 36
  runThreeSteps(s, true);
}

TEST(Adamw, MatchesPyTorchFormulaWithClippingInactive) {
  AdamwSettings s;
  s.gradClip = 1000.0;
  runThreeSteps(s, false);
  s.gradClip = 0.0; // disabled
  runThreeSteps(s, false);
}

TEST(StepGuard, FlagsANonFiniteLossSumOrNorm) {
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  struct Case {
    float lossSum, norm, flag;
  };
  for (Case c : {Case{3.5f, 0.25f, 0}, Case{kNan, 0.25f, 1},
                 Case{3.5f, kInf, 1}, Case{-kInf, 1.0f, 1},
                 Case{3.5f, kNan, 1}}) {
    Launch guard("step_guard");
    guard.in({}, {c.lossSum}).in({}, {c.norm}).out({});
    guard.run();
    EXPECT_EQ(guard.output(0)[0], c.flag) << c.lossSum << " " << c.norm;
  }
}

// A skipped step writes nothing, and the next update's bias correction
// counts the updates made (ctx.update), not the steps.
TEST(Adamw, SkipsOnTheFlagAndCorrectsBiasByUpdates) {
  const int n = 64;
  const std::vector<float> p0 = randomVector(n, 7), grad =
                                                        randomVector(n, 8);
  auto launch = [&](float skip, int64_t step, int64_t update) {
    Launch l("adamw");
    l.in({n}, grad).in({}, {1.0f}).in({}, {skip});
    l.out({n}, p0).out({n}, std::vector<float>(n, 0.0f));
    l.out({n}, std::vector<float>(n, 0.0f));
    l.paramF("beta1", 0.9).paramF("beta2", 0.95).paramF("eps", 1e-8);
    l.paramF("weight_decay", 0.1).paramF("grad_clip", 0.0);
    l.context().step = step;
    l.context().update = update;
    l.context().lr = 1e-2;
    l.run();
    return l.output(0);
  };
  EXPECT_EQ(launch(1.0f, 1, 1), p0);
  // Step 2 after a skipped step 1 is AdamW's first update.
  EXPECT_EQ(launch(0.0f, 2, 1), launch(0.0f, 1, 1));
  EXPECT_NE(launch(0.0f, 2, 2), launch(0.0f, 2, 1));
}

} // namespace
} // namespace braid::test
