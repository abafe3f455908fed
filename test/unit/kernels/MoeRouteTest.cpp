// moe_route and moe_route_grad (docs/kernels.md, docs/moe.md): the router's
// scores, its choice (by score plus bias, ties to the lower expert) and
// weights against a double-precision reference, its gradient against
// central differences, and the checks' refusals.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

struct Route {
  std::vector<int32_t> experts;
  std::vector<double> weights, scores;
};

// The router in double, as docs/moe.md states it.
Route reference(const std::vector<float> &logits, int n, int e, int k,
                bool sigmoid, bool normalize, double scale,
                const std::vector<float> &bias = {}) {
  Route r;
  for (int t = 0; t < n; ++t) {
    std::vector<double> s(e);
    const float *l = logits.data() + t * e;
    if (sigmoid) {
      for (int i = 0; i < e; ++i)
        s[i] = 1 / (1 + std::exp(-double{l[i]}));
    } else {
      const double m = *std::max_element(l, l + e);
      double sum = 0;
      for (int i = 0; i < e; ++i)
        sum += s[i] = std::exp(l[i] - m);
      for (double &v : s)
        v /= sum;
    }
    std::vector<int> order(e);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const double ka = s[a] + (bias.empty() ? 0 : bias[a]);
      const double kb = s[b] + (bias.empty() ? 0 : bias[b]);
      return ka > kb;
    });
    double z = 0;
    for (int j = 0; j < k; ++j)
      z += s[order[j]];
    for (int j = 0; j < k; ++j) {
      r.experts.push_back(order[j]);
      r.weights.push_back(s[order[j]] * (normalize ? scale / z : scale));
    }
    r.scores.insert(r.scores.end(), s.begin(), s.end());
  }
  return r;
}

TEST(MoeRoute, SoftmaxTopKNormalisedAsMixtral) {
  const int n = 37, e = 8, k = 2;
  const auto logits = randomVector(n * e, 11);
  Launch l("moe_route");
  l.in({n, e}, logits).outIds({n, k}).out({n, k}).out({n, e}).param(
      "normalize", 1);
  l.run(&testPool(3));
  expectThreadInvariant(l);
  const Route want = reference(logits, n, e, k, false, true, 1.0);
  EXPECT_EQ(l.outputIds(0), want.experts);
  expectNear(l.output(1), want.weights, 1e-6, 1e-7, "weights");
  expectNear(l.output(2), want.scores, 1e-6, 1e-7, "scores");
  // Normalised softmax weights of each token sum to 1.
  for (int t = 0; t < n; ++t)
    EXPECT_NEAR(l.output(1)[t * k] + l.output(1)[t * k + 1], 1.0, 1e-6);
}

// DeepSeek-V3: sigmoid scores, a bias that chooses but does not weigh,
// normalised and scaled weights.
TEST(MoeRoute, SigmoidWithBiasAsDeepSeekV3) {
  const int n = 19, e = 16, k = 4;
  const auto logits = randomVector(n * e, 12);
  std::vector<float> bias(e, 0.0f);
  bias[3] = 2.0f;   // always chosen, first
  bias[9] = -2.0f;  // never chosen
  Launch l("moe_route");
  l.in({n, e}, logits)
      .in({e}, bias)
      .outIds({n, k})
      .out({n, k})
      .out({n, e})
      .param("sigmoid", 1)
      .param("normalize", 1)
      .paramF("scale", 2.5);
  l.run();
  const Route want = reference(logits, n, e, k, true, true, 2.5, bias);
  EXPECT_EQ(l.outputIds(0), want.experts);
  expectNear(l.output(1), want.weights, 1e-6, 1e-7, "weights");
  for (int t = 0; t < n; ++t) {
    EXPECT_EQ(l.outputIds(0)[t * k], 3) << "token " << t;
    for (int j = 0; j < k; ++j)
      EXPECT_NE(l.outputIds(0)[t * k + j], 9) << "token " << t;
    // The bias does not weigh: expert 3's weight is its score's share.
    double z = 0;
    for (int j = 0; j < k; ++j)
      z += l.output(2)[t * e + l.outputIds(0)[t * k + j]];
    EXPECT_NEAR(l.output(1)[t * k], 2.5 * l.output(2)[t * e + 3] / z, 1e-6);
  }
}

TEST(MoeRoute, TiesGoToTheLowerExpertAndUnnormalisedWeightsAreScores) {
  Launch l("moe_route");
  l.in({1, 4}, {0.5f, 1.0f, 1.0f, 1.0f}).outIds({1, 3}).out({1, 3}).out(
      {1, 4});
  l.run();
  EXPECT_EQ(l.outputIds(0), (std::vector<int32_t>{1, 2, 3}));
  for (int j = 0; j < 3; ++j)
    EXPECT_EQ(l.output(1)[j], l.output(2)[j + 1]);
}

// sum(dw * weights(logits)) differentiated by moe_route_grad and by central
// differences, for softmax and sigmoid, with and without normalisation.
TEST(MoeRouteGrad, MatchesCentralDifferences) {
  const int n = 5, e = 6, k = 3;
  for (int sigmoid : {0, 1})
    for (int normalize : {0, 1}) {
      const auto logits = randomVector(n * e, 20 + 2 * sigmoid + normalize);
      const auto dw = randomVector(n * k, 30);
      Launch f("moe_route");
      f.in({n, e}, logits).outIds({n, k}).out({n, k}).out({n, e});
      f.param("sigmoid", sigmoid).param("normalize", normalize).paramF(
          "scale", 1.5);
      f.run();
      Launch g("moe_route_grad");
      g.in({n, k}, dw).in({n, e}, f.output(2)).inIds({n, k}, f.outputIds(0));
      g.out({n, e});
      g.param("sigmoid", sigmoid).param("normalize", normalize).paramF(
          "scale", 1.5);
      g.run(&testPool(2));
      expectThreadInvariant(g);
      // The choice stays as it is under the small steps of the check.
      const std::vector<int32_t> chosen = f.outputIds(0);
      auto loss = [&](const std::vector<float> &x) {
        const Route r = reference(x, n, e, k, sigmoid, normalize, 1.5);
        double total = 0;
        for (int t = 0; t < n; ++t)
          for (int j = 0; j < k; ++j) {
            // The weight of the expert chosen at the base point.
            const int c = chosen[t * k + j];
            double z = 0;
            for (int i = 0; i < k; ++i)
              z += r.scores[t * e + chosen[t * k + i]];
            const double s = r.scores[t * e + c];
            total += dw[t * k + j] * s * (normalize ? 1.5 / z : 1.5);
          }
        return total;
      };
      expectGradientMatches(loss, logits, g.output(0), 1e-3, 1e-3, 1e-5, 40,
                            "dlogits");
    }
}

TEST(MoeRoute, ChecksRefuseBadShapesAndDtypes) {
  auto route = [](int k, DType logits) {
    Launch l("moe_route");
    l.inDesc({4, 8}, logits)
        .outDesc({4, k}, DType::kI32)
        .outDesc({4, k}, DType::kF32)
        .outDesc({4, 8}, DType::kF32);
    return l.check();
  };
  EXPECT_TRUE(route(2, DType::kF32).ok()) << route(2, DType::kF32);
  EXPECT_THAT(std::string(route(9, DType::kF32).message()),
              HasSubstr("moe_route: output 0 (experts) chooses 9 experts per "
                        "row of the 8 of input 0 (logits): 1 to 8"));
  EXPECT_THAT(std::string(route(2, DType::kBF16).message()),
              HasSubstr("moe_route: input 0 (logits) has dtype bf16, expected "
                        "f32: the router scores, chooses and weighs in f32 in "
                        "every plan"));
  Launch bias("moe_route");
  bias.inDesc({4, 8}, DType::kF32)
      .inDesc({7}, DType::kF32)
      .outDesc({4, 2}, DType::kI32)
      .outDesc({4, 2}, DType::kF32)
      .outDesc({4, 8}, DType::kF32);
  EXPECT_THAT(std::string(bias.check().message()),
              HasSubstr("moe_route: input 1 (bias) has shape [7], expected "
                        "[8]"));
  Launch grad("moe_route_grad");
  grad.inDesc({4, 2}, DType::kF32)
      .inDesc({4, 8}, DType::kF32)
      .inDesc({3, 2}, DType::kI32)
      .outDesc({4, 8}, DType::kF32);
  EXPECT_THAT(std::string(grad.check().message()),
              HasSubstr("moe_route_grad: input 2 (experts) has shape [3, 2], "
                        "input 1 (scores) [4, 8]: one row per token of both"));
  Launch flag("moe_route");
  flag.inDesc({4, 8}, DType::kF32)
      .outDesc({4, 2}, DType::kI32)
      .outDesc({4, 2}, DType::kF32)
      .outDesc({4, 8}, DType::kF32)
      .param("normalize", 2);
  EXPECT_FALSE(flag.check().ok());
}

} // namespace
} // namespace braid::test
