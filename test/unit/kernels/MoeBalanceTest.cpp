// The router's balancing losses (docs/kernels.md): moe_expert_counts,
// moe_aux_loss and moe_z_loss against double references, their gradients
// against central differences (through the scores' normalisation for
// sigmoid routers, through softmax for moe_route_grad's dscores), and the
// checks' refusals.
#include <cmath>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

constexpr int kTokens = 7, kExperts = 5, kTopK = 2;

std::vector<float> positive(int n, uint32_t seed) {
  return randomVector(n, seed, 0.05f, 1.0f);
}

// coeff * E / (K T^2) * sum_e counts[e] * sum_t q[t, e].
double auxReference(const std::vector<float> &scores,
                    const std::vector<float> &counts, int sigmoid,
                    double coeff) {
  double total = 0;
  for (int t = 0; t < kTokens; ++t) {
    double sum = 0;
    for (int e = 0; e < kExperts; ++e)
      sum += sigmoid ? scores[t * kExperts + e] : 0;
    for (int e = 0; e < kExperts; ++e)
      total += counts[e] * scores[t * kExperts + e] / (sigmoid ? sum : 1.0);
  }
  return coeff * kExperts / (kTopK * double(kTokens) * kTokens) * total;
}

TEST(MoeExpertCounts, CountsEveryChoiceOfAnExpert) {
  Launch l("moe_expert_counts");
  l.inIds({4, 2}, {0, 3, 3, 1, 9, 3, 0, -1}).out({4}, {7, 7, 7, 7});
  l.run();
  EXPECT_EQ(l.output(0), (std::vector<float>{2, 1, 0, 3}));
}

TEST(MoeAuxLoss, ValueAndGradient) {
  const std::vector<float> counts = {3, 0, 5, 4, 2};
  for (int sigmoid : {0, 1}) {
    SCOPED_TRACE(sigmoid ? "sigmoid" : "softmax");
    const auto scores = positive(kTokens * kExperts, 50 + sigmoid);
    Launch f("moe_aux_loss");
    f.in({kTokens, kExperts}, scores).in({kExperts}, counts).out({});
    f.paramF("coeff", 0.01).param("top_k", kTopK).param("sigmoid", sigmoid);
    f.run();
    EXPECT_NEAR(f.output(0)[0], auxReference(scores, counts, sigmoid, 0.01),
                1e-7);
    Launch g("moe_aux_loss_grad");
    g.in({kTokens, kExperts}, scores)
        .in({kExperts}, counts)
        .out({kTokens, kExperts});
    g.paramF("coeff", 0.01)
        .param("top_k", kTopK)
        .param("sigmoid", sigmoid)
        .paramF("scale", 0.5);
    g.run(&testPool(2));
    expectThreadInvariant(g);
    auto loss = [&](const std::vector<float> &x) {
      return 0.5 * auxReference(x, counts, sigmoid, 0.01);
    };
    expectGradientMatches(loss, scores, g.output(0), 1e-3, 1e-3, 1e-9, 51,
                          "dscores");
  }
}

double zReference(const std::vector<float> &logits, double coeff) {
  double total = 0;
  for (int t = 0; t < kTokens; ++t) {
    double sum = 0;
    for (int e = 0; e < kExperts; ++e)
      sum += std::exp(double{logits[t * kExperts + e]});
    total += std::log(sum) * std::log(sum);
  }
  return coeff * total / kTokens;
}

TEST(MoeZLoss, ValueAndGradient) {
  const auto logits = randomVector(kTokens * kExperts, 60, -3.0f, 3.0f);
  Launch f("moe_z_loss");
  f.in({kTokens, kExperts}, logits).out({}).paramF("coeff", 0.001);
  f.run();
  EXPECT_NEAR(f.output(0)[0], zReference(logits, 0.001), 1e-8);
  Launch g("moe_z_loss_grad");
  g.in({kTokens, kExperts}, logits).out({kTokens, kExperts});
  g.paramF("coeff", 0.001).paramF("scale", 0.25);
  g.run(&testPool(3));
  expectThreadInvariant(g);
  auto loss = [&](const std::vector<float> &x) {
    return 0.25 * zReference(x, 0.001);
  };
  expectGradientMatches(loss, logits, g.output(0), 1e-3, 1e-3, 1e-9, 61,
                        "dlogits");
}

// moe_route_grad with dscores adds the scores' gradient before the
// softmax: with zero dweights, dlogits = s * (ds - sum(s * ds)).
TEST(MoeRouteGrad, TakesTheScoresOwnGradient) {
  const auto logits = randomVector(kTokens * kExperts, 70);
  Launch f("moe_route");
  f.in({kTokens, kExperts}, logits)
      .outIds({kTokens, kTopK})
      .out({kTokens, kTopK})
      .out({kTokens, kExperts});
  f.run();
  const std::vector<float> &s = f.output(2);
  const auto ds = randomVector(kTokens * kExperts, 71);
  Launch g("moe_route_grad");
  g.in({kTokens, kTopK}, std::vector<float>(kTokens * kTopK, 0.0f))
      .in({kTokens, kExperts}, s)
      .inIds({kTokens, kTopK}, f.outputIds(0))
      .in({kTokens, kExperts}, ds)
      .out({kTokens, kExperts});
  g.run();
  std::vector<double> want(kTokens * kExperts);
  for (int t = 0; t < kTokens; ++t) {
    double inner = 0;
    for (int e = 0; e < kExperts; ++e)
      inner += double{s[t * kExperts + e]} * ds[t * kExperts + e];
    for (int e = 0; e < kExperts; ++e)
      want[t * kExperts + e] =
          s[t * kExperts + e] * (ds[t * kExperts + e] - inner);
  }
  expectNear(g.output(0), want, 1e-5, 1e-7, "dlogits");
}

// The bias moves by the rate towards the mean load, and not at all in a
// skipped step.
TEST(MoeBiasUpdate, MovesTowardsTheMeanLoad) {
  const std::vector<float> load = {6, 2, 4, 4}; // mean 4
  Launch l("moe_bias_update");
  l.in({4}, load).in({}, {0.0f}).out({4}, {0.5f, 0.0f, -0.25f, 1.0f});
  l.paramF("rate", 0.125);
  l.run();
  EXPECT_EQ(l.output(0), (std::vector<float>{0.375f, 0.125f, -0.25f, 1.0f}));
  Launch skipped("moe_bias_update");
  skipped.in({4}, load).in({}, {1.0f}).out({4}, {0.5f, 0.0f, -0.25f, 1.0f});
  skipped.paramF("rate", 0.125);
  skipped.run();
  EXPECT_EQ(skipped.output(0), (std::vector<float>{0.5f, 0.0f, -0.25f, 1.0f}));
}

TEST(MoeAuxLoss, ChecksRefuseBadShapes) {
  Launch counts("moe_aux_loss");
  counts.inDesc({7, 5}, DType::kF32)
      .inDesc({4}, DType::kF32)
      .outDesc({}, DType::kF32);
  EXPECT_THAT(std::string(counts.check().message()),
              HasSubstr("moe_aux_loss: input 1 (counts) has shape [4], "
                        "expected [5]"));
  Launch topK("moe_aux_loss_grad");
  topK.inDesc({7, 5}, DType::kF32)
      .inDesc({5}, DType::kF32)
      .outDesc({7, 5}, DType::kF32)
      .param("top_k", 6);
  EXPECT_THAT(std::string(topK.check().message()), HasSubstr("top_k"));
  Launch bf16("moe_z_loss");
  bf16.inDesc({7, 5}, DType::kBF16).outDesc({}, DType::kF32);
  EXPECT_THAT(std::string(bf16.check().message()),
              HasSubstr("moe_z_loss: input 0 (logits) has dtype bf16, "
                        "expected f32"));
}

} // namespace
} // namespace braid::test
