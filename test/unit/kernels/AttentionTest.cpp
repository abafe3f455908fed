// attention, attention_grad_input, repeat_kv, repeat_kv_grad_input against
// double references (fp32 vs double: 2e-5 relative + 2e-5 absolute), an fp32
// reference in the kernels' operation order (bit for bit), finite
// differences, dropout consistency and thread invariance.
#include <cmath>
#include <cstring>
#include <ostream>
#include <vector>

#include "kernels/common/Random.h"
#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/VecMath.h"
#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

constexpr double kRtol = 2e-5, kAtol = 2e-5;

struct Config {
  int b, s, h, hkv, dh;
  bool causal;
  double dropout;
};

void PrintTo(const Config &c, std::ostream *os) {
  *os << "B=" << c.b << " S=" << c.s << " H=" << c.h << " Hkv=" << c.hkv
      << " Dh=" << c.dh << (c.causal ? " causal" : "")
      << " dropout=" << c.dropout;
}

struct RefOut {
  std::vector<double> o, probs, dq, dk, dv;
};

// The factor of attention-probability element n: kept iff its uniform draw
// is >= p, then scaled by 1 / (1 - p) in fp32 (docs/numerics.md).
// The micro-batch the launches of these tests compute.
constexpr int64_t kMicroBatch = 1;

double dropFactor(const KernelContext &ctx, int64_t rngOffset, double p,
                  uint64_t n) {
  if (p == 0)
    return 1;
  const uint64_t key =
      rng::dropoutKey(ctx.seed, rngOffset, ctx.step, kMicroBatch);
  return rng::uniform24(key, n) >= p
             ? static_cast<double>(1.0f / (1.0f - static_cast<float>(p)))
             : 0.0;
}

RefOut reference(const Config &c, const KernelContext &ctx, double scale,
                 const std::vector<float> &q, const std::vector<float> &k,
                 const std::vector<float> &v, const std::vector<float> &dO) {
  const int S = c.s, H = c.h, Hkv = c.hkv, Dh = c.dh, group = H / Hkv;
  RefOut r;
  r.o.assign(q.size(), 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  r.probs.assign(static_cast<size_t>(c.b) * H * S * S, 0);
  auto qAt = [&](const std::vector<float> &t, int b, int i, int h, int d) {
    return static_cast<double>(t[((b * S + i) * H + h) * Dh + d]);
  };
  auto kvIdx = [&](int b, int j, int hk, int d) {
    return ((b * S + j) * Hkv + hk) * Dh + d;
  };
  for (int b = 0; b < c.b; ++b)
    for (int h = 0; h < H; ++h) {
      const int hk = h / group;
      for (int i = 0; i < S; ++i) {
        const int n = c.causal ? i + 1 : S;
        std::vector<double> p(n), fac(n), dP(n);
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; ++j) {
          double sc = 0;
          for (int d = 0; d < Dh; ++d)
            sc += qAt(q, b, i, h, d) * k[kvIdx(b, j, hk, d)];
          p[j] = scale * sc;
          mx = std::max(mx, p[j]);
        }
        for (int j = 0; j < n; ++j)
          sum += (p[j] = std::exp(p[j] - mx));
        const int64_t base = ((int64_t{b} * H + h) * S + i) * S;
        for (int j = 0; j < n; ++j) {
          p[j] /= sum;
          r.probs[base + j] = p[j];
          fac[j] = dropFactor(ctx, 7, c.dropout, base + j);
        }
        double rowSum = 0;
        for (int j = 0; j < n; ++j) {
          double dPd = 0;
          for (int d = 0; d < Dh; ++d) {
            r.o[((b * S + i) * H + h) * Dh + d] +=
                p[j] * fac[j] * v[kvIdx(b, j, hk, d)];
            dPd += qAt(dO, b, i, h, d) * v[kvIdx(b, j, hk, d)];
            r.dv[kvIdx(b, j, hk, d)] += p[j] * fac[j] * qAt(dO, b, i, h, d);
          }
          dP[j] = dPd * fac[j];
          rowSum += dP[j] * p[j];
        }
        for (int j = 0; j < n; ++j) {
          const double dS = p[j] * (dP[j] - rowSum);
          for (int d = 0; d < Dh; ++d) {
            r.dq[((b * S + i) * H + h) * Dh + d] +=
                scale * dS * k[kvIdx(b, j, hk, d)];
            r.dk[kvIdx(b, j, hk, d)] += scale * dS * qAt(q, b, i, h, d);
          }
        }
      }
    }
  return r;
}

struct FloatOut {
  std::vector<float> o, probs, dq, dk, dv;
};

// The kernels' results spelled out one element at a time, in fp32 and in
// their order of operations: every dot product summed over its index in
// order from 0, the softmax through VecMath's lane-blocked helpers, key and
// value gradients added over the group's heads and then the query rows in
// order. Keys a causal row does not see are left out: the kernels may add
// them as exact zeros, which changes no sum.
FloatOut floatReference(const Config &c, const KernelContext &ctx, float scale,
                        const std::vector<float> &q,
                        const std::vector<float> &k,
                        const std::vector<float> &v,
                        const std::vector<float> &dO) {
  const int S = c.s, H = c.h, Hkv = c.hkv, Dh = c.dh, group = H / Hkv;
  const cpu::DropoutMask mask = cpu::DropoutMask::make(
      c.dropout, 7, KernelArgs{{}, {}, nullptr, &ctx, kMicroBatch});
  FloatOut r;
  r.o.assign(q.size(), 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  r.probs.assign(static_cast<size_t>(c.b) * H * S * S, 0);
  // Dropped probabilities and dS, laid out as probs.
  std::vector<float> pd(r.probs.size()), dS(r.probs.size());
  auto qIdx = [&](int b, int i, int h, int d) {
    return ((b * S + i) * H + h) * Dh + d;
  };
  auto kvIdx = [&](int b, int j, int h, int d) {
    return ((b * S + j) * Hkv + h / group) * Dh + d;
  };
  for (int b = 0; b < c.b; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < S; ++i) {
        const int n = c.causal ? i + 1 : S;
        const int64_t base = ((int64_t{b} * H + h) * S + i) * S;
        float *p = &r.probs[base];
        std::vector<float> dP(n);
        for (int j = 0; j < n; ++j) {
          float sc = 0, dPd = 0;
          for (int d = 0; d < Dh; ++d) {
            sc += q[qIdx(b, i, h, d)] * k[kvIdx(b, j, h, d)];
            dPd += dO[qIdx(b, i, h, d)] * v[kvIdx(b, j, h, d)];
          }
          p[j] = sc;
          dP[j] = dPd;
        }
        cpu::scaleInPlace(p, scale, n);
        cpu::expShiftInPlace(p, cpu::maxOf(p, n), n);
        cpu::scaleInPlace(p, 1.0f / cpu::sum(p, n), n);
        for (int j = 0; j < n; ++j) {
          pd[base + j] = mask.active ? p[j] * mask.factor(base + j) : p[j];
          if (mask.active)
            dP[j] *= mask.factor(base + j);
        }
        const float rowSum = cpu::dot(dP.data(), p, n);
        for (int j = 0; j < n; ++j)
          dS[base + j] = p[j] * (dP[j] - rowSum);
        for (int d = 0; d < Dh; ++d) {
          float o = 0, dq = 0;
          for (int j = 0; j < n; ++j) {
            o += pd[base + j] * v[kvIdx(b, j, h, d)];
            dq += dS[base + j] * k[kvIdx(b, j, h, d)];
          }
          r.o[qIdx(b, i, h, d)] = o;
          r.dq[qIdx(b, i, h, d)] = dq * scale;
        }
      }
  // Heads of a group are consecutive, so this visits them in order, each
  // with its rows in order.
  for (int b = 0; b < c.b; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < S; ++i) {
        const int64_t base = ((int64_t{b} * H + h) * S + i) * S;
        for (int j = 0; j < (c.causal ? i + 1 : S); ++j)
          for (int d = 0; d < Dh; ++d) {
            r.dv[kvIdx(b, j, h, d)] += pd[base + j] * dO[qIdx(b, i, h, d)];
            r.dk[kvIdx(b, j, h, d)] +=
                scale * dS[base + j] * q[qIdx(b, i, h, d)];
          }
      }
  return r;
}

// The same bits, +0 and -0 told apart.
void expectSameBits(const std::vector<float> &got,
                    const std::vector<float> &want, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && differ++ == 0)
      first = static_cast<int64_t>(i);
  EXPECT_EQ(differ, 0) << what << ": first at " << first << ", got "
                       << (first < 0 ? 0 : got[first]) << ", want "
                       << (first < 0 ? 0 : want[first]);
}

class AttentionTest : public ::testing::TestWithParam<Config> {
protected:
  void SetUp() override {
    c = GetParam();
    scale = 1.0 / std::sqrt(static_cast<double>(c.dh));
    qShape = {c.b, c.s, c.h * c.dh};
    kvShape = {c.b, c.s, c.hkv * c.dh};
    probsShape = {c.b, c.h, c.s, c.s};
    q = randomVector(numelOf(qShape), 1, -2, 2);
    k = randomVector(numelOf(kvShape), 2, -2, 2);
    v = randomVector(numelOf(kvShape), 3);
    dO = randomVector(numelOf(qShape), 4);
    ctx.seed = 1234;
    ctx.step = 3;
    ref = reference(c, ctx, scale, q, k, v, dO);
  }
  void setParams(Launch &l) const {
    l.param("num_heads", c.h).param("num_kv_heads", c.hkv);
    l.param("causal", c.causal ? 1 : 0).paramF("scale", scale);
    l.paramF("dropout", c.dropout).param("rng_offset", 7);
    l.context() = ctx;
    l.microBatch() = kMicroBatch;
  }
  Launch forward() const {
    Launch l("attention");
    l.in(qShape, q).in(kvShape, k).in(kvShape, v);
    l.out(qShape).out(probsShape);
    setParams(l);
    return l;
  }
  Launch backward(const std::vector<float> &probs) const {
    Launch l("attention_grad_input");
    l.in(qShape, dO).in(qShape, q).in(kvShape, k).in(kvShape, v);
    l.in(probsShape, probs);
    l.out(qShape).out(kvShape).out(kvShape);
    setParams(l);
    return l;
  }

  Config c;
  double scale;
  std::vector<int64_t> qShape, kvShape, probsShape;
  std::vector<float> q, k, v, dO;
  KernelContext ctx;
  RefOut ref;
};

TEST_P(AttentionTest, ForwardMatchesReference) {
  Launch f = forward();
  f.run(&testPool(2));
  expectNear(f.output(0), ref.o, kRtol, kAtol, "o");
  // probs holds the softmax before dropout, zeros above the diagonal.
  expectNear(f.output(1), ref.probs, kRtol, kAtol, "probs");
  expectThreadInvariant(f);
}

TEST_P(AttentionTest, BackwardMatchesReference) {
  Launch f = forward();
  f.run();
  Launch g = backward(f.output(1));
  g.run(&testPool(3));
  expectNear(g.output(0), ref.dq, kRtol, kAtol, "dq");
  expectNear(g.output(1), ref.dk, kRtol, kAtol, "dk");
  expectNear(g.output(2), ref.dv, kRtol, kAtol, "dv");
  expectThreadInvariant(g);
}

// Pins the order of every floating-point operation, which the lane-blocked
// loops must keep exactly (docs/kernels.md: identical bits across thread
// counts and instruction sets).
TEST_P(AttentionTest, MatchesFloatReferenceBitForBit) {
  const FloatOut want =
      floatReference(c, ctx, static_cast<float>(scale), q, k, v, dO);
  Launch f = forward();
  f.run(&testPool(2));
  expectSameBits(f.output(0), want.o, "o");
  expectSameBits(f.output(1), want.probs, "probs");
  Launch g = backward(f.output(1));
  g.run(&testPool(2));
  expectSameBits(g.output(0), want.dq, "dq");
  expectSameBits(g.output(1), want.dk, "dk");
  expectSameBits(g.output(2), want.dv, "dv");
}

// With dropout, this passes only if backward regenerates forward's mask.
TEST_P(AttentionTest, BackwardMatchesFiniteDifferences) {
  Launch f = forward();
  f.run();
  Launch g = backward(f.output(1));
  g.run();
  for (int which = 0; which < 3; ++which) {
    const std::vector<float> &x = which == 0 ? q : which == 1 ? k : v;
    expectGradientMatches(
        [&](const std::vector<float> &xv) {
          Launch p = forward();
          p.input(which) = xv;
          p.run();
          return project(dO, p.output(0));
        },
        x, g.output(which), 1e-3, 3e-3, 1e-4, 10 + which,
        which == 0   ? "q"
        : which == 1 ? "k"
                     : "v");
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, AttentionTest,
                         ::testing::Values(Config{2, 5, 4, 2, 3, true, 0.0},
                                           Config{1, 7, 4, 1, 16, false, 0.0},
                                           Config{2, 19, 2, 2, 20, true, 0.0},
                                           Config{2, 6, 4, 2, 5, true, 0.3},
                                           Config{1, 18, 4, 1, 8, false, 0.25},
                                           Config{1, 37, 2, 1, 128, true, 0.1}),
                         [](const ::testing::TestParamInfo<Config> &info) {
                           const Config &c = info.param;
                           return "B" + std::to_string(c.b) + "S" +
                                  std::to_string(c.s) + "H" +
                                  std::to_string(c.h) + "Hkv" +
                                  std::to_string(c.hkv) + "Dh" +
                                  std::to_string(c.dh) +
                                  (c.causal ? "Causal" : "Full") +
                                  (c.dropout > 0 ? "Dropout" : "");
                         });

TEST(Attention, DropoutMaskDependsOnStepAndMicroBatch) {
  const int b = 1, s = 8, h = 2, dh = 4;
  auto q = randomVector(b * s * h * dh, 20),
       k = randomVector(b * s * h * dh, 21),
       v = randomVector(b * s * h * dh, 22);
  auto make = [&](int64_t step, int64_t micro) {
    Launch l("attention");
    l.in({b, s, h * dh}, q).in({b, s, h * dh}, k).in({b, s, h * dh}, v);
    l.out({b, s, h * dh}).out({b, h, s, s});
    l.param("num_heads", h).param("num_kv_heads", h).param("causal", 0);
    l.paramF("scale", 0.5).paramF("dropout", 0.5).param("rng_offset", 1);
    l.context().seed = 9;
    l.context().step = step;
    l.microBatch() = micro;
    l.run();
    return l.output(0);
  };
  const auto base = make(1, 0);
  EXPECT_EQ(make(1, 0), base);
  EXPECT_NE(make(2, 0), base);
  EXPECT_NE(make(1, 1), base);
}

TEST(RepeatKv, CopiesHeadsAndSumsGradients) {
  const int b = 2, s = 3, h = 6, hkv = 2, dh = 5, group = h / hkv;
  auto x = randomVector(b * s * hkv * dh, 30);
  auto dy = randomVector(b * s * h * dh, 31);
  Launch f("repeat_kv");
  f.in({b, s, hkv * dh}, x).out({b, s, h * dh});
  f.param("num_heads", h).param("num_kv_heads", hkv);
  f.run();
  Launch g("repeat_kv_grad_input");
  g.in({b, s, h * dh}, dy).out({b, s, hkv * dh});
  g.param("num_heads", h).param("num_kv_heads", hkv);
  g.run(&testPool(2));
  std::vector<double> wantY, wantDx(x.size(), 0);
  for (int r = 0; r < b * s; ++r)
    for (int hi = 0; hi < h; ++hi)
      for (int d = 0; d < dh; ++d) {
        wantY.push_back(x[(r * hkv + hi / group) * dh + d]);
        wantDx[(r * hkv + hi / group) * dh + d] += dy[(r * h + hi) * dh + d];
      }
  expectNear(f.output(0), wantY, 0, 0, "y");
  expectNear(g.output(0), wantDx, 1e-6, 1e-6, "dx");
  expectThreadInvariant(f);
  expectThreadInvariant(g);
  expectGradientMatches(
      [&](const std::vector<float> &xv) {
        Launch p = f;
        p.input(0) = xv;
        p.run();
        return project(dy, p.output(0));
      },
      x, g.output(0), 1e-2, 1e-4, 1e-5, 32, "x");
}

// Grouped-query attention reads kv heads in place; it must give exactly
// what attention over explicitly repeated heads gives.
TEST(Attention, GroupedHeadsEqualRepeatedHeads) {
  const int b = 2, s = 9, h = 4, hkv = 2, dh = 6;
  auto q = randomVector(b * s * h * dh, 40),
       k = randomVector(b * s * hkv * dh, 41),
       v = randomVector(b * s * hkv * dh, 42);
  auto repeat = [&](const std::vector<float> &x) {
    Launch r("repeat_kv");
    r.in({b, s, hkv * dh}, x).out({b, s, h * dh});
    r.param("num_heads", h).param("num_kv_heads", hkv);
    r.run();
    return r.output(0);
  };
  auto attend = [&](const std::vector<float> &kk, const std::vector<float> &vv,
                    int heads) {
    Launch l("attention");
    l.in({b, s, h * dh}, q).in({b, s, heads * dh}, kk);
    l.in({b, s, heads * dh}, vv).out({b, s, h * dh}).out({b, h, s, s});
    l.param("num_heads", h).param("num_kv_heads", heads).param("causal", 1);
    l.paramF("scale", 0.4);
    l.run(&testPool(2));
    return l;
  };
  Launch grouped = attend(k, v, hkv);
  Launch repeated = attend(repeat(k), repeat(v), h);
  EXPECT_EQ(grouped.output(0), repeated.output(0));
  EXPECT_EQ(grouped.output(1), repeated.output(1));
}

} // namespace
} // namespace braid::test
