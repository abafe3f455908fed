// flash_attention and flash_attention_grad_input against the reference
// kernels (attention, attention_grad_input) and, for the prefix and
// segment masks, both against a double-precision reference in this file
// that draws the same dropout masks.
//
// Tolerance. The flash kernels compute the same function in fp32 with
// sums in another order: the online softmax adds exp(x - m) tile by tile
// and rescales earlier tiles by exp(m_old - m_new); backward recomputes
// P = exp(x - lse) instead of exp(x - m) / l, and forms rowsum(dP * P) as
// do . o. Each element is then a sum of at most S products, each with a
// relative error of a few fp32 ulps (2^-24 each), so its error is bounded
// by about c * 2^-24 * sum |terms| with c a small multiple of the number
// of rounding steps, not of S (the sums are the same blocked sums; only the
// scaling differs). The bound used, 2e-5 of the largest magnitude of the
// output (about 300 ulps) plus 1e-4 relative per element, covers the
// largest error measured here (1.7e-6 of the largest magnitude) with a
// wide margin, while a wrong mask, a wrong dropout draw or a missing
// rescale moves elements by 1e-2 or more.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/Random.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::roundBf16;
using test::widenBf16;

// One operand in host memory, f32, bf16 or i32.
struct Operand : test::HostTensor {
  static Operand floats(std::vector<int64_t> shape, std::vector<float> v,
                        DType t = DType::kF32) {
    Operand o;
    o.desc = {std::move(shape), t};
    o.f.assign(v.begin(), v.begin() + o.desc.numel());
    if (t == DType::kBF16)
      for (float x : o.f)
        o.b.push_back(roundBf16(x));
    return o;
  }
  static Operand zeros(std::vector<int64_t> shape, DType t = DType::kF32) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return floats(std::move(shape), std::vector<float>(n, 0.0f), t);
  }
  static Operand segments(std::vector<int32_t> v, int64_t b, int64_t s) {
    Operand o;
    o.desc = {{b, s}, DType::kI32};
    o.ids = std::move(v);
    return o;
  }
};

struct Config {
  int64_t b = 2, s = 77, h = 4, hkv = 2, dh = 8;
  bool causal = true;
  int64_t prefix = 0;
  double dropout = 0.0;
  bool segments = false;
  DType dtype = DType::kF32;
  int threads = 2;
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(dh)); }
};

KernelParams paramsOf(const Config &c) {
  KernelParams p;
  p.setInt("num_heads", c.h);
  p.setInt("num_kv_heads", c.hkv);
  p.setInt("causal", c.causal);
  p.setInt("prefix", c.prefix);
  p.setFloat("scale", c.scale());
  p.setFloat("dropout", c.dropout);
  p.setInt("rng_offset", 7);
  return p;
}

KernelContext contextFor(int threads) {
  KernelContext ctx;
  ctx.step = 5;
  ctx.seed = 1234;
  ctx.pool = &test::testPool(threads);
  return ctx;
}

// Runs `kernel` and returns its outputs as floats.
std::vector<std::vector<float>> run(const std::string &kernel,
                                    std::vector<Operand> ins,
                                    std::vector<Operand> outs,
                                    const KernelParams &params, int threads) {
  std::vector<TensorView> in, out;
  for (Operand &o : ins)
    in.push_back({o.data(), &o.desc});
  for (Operand &o : outs)
    out.push_back({o.data(), &o.desc});
  const KernelDef *def = defaultKernelRegistry().find(kernel, Device::kCPU);
  EXPECT_NE(def, nullptr) << kernel;
  if (!def)
    return {};
  std::vector<TensorDesc> inDescs, outDescs;
  for (const Operand &o : ins)
    inDescs.push_back(o.desc);
  for (const Operand &o : outs)
    outDescs.push_back(o.desc);
  const absl::Status st =
      def->check(KernelSignature{inDescs, outDescs, &params});
  EXPECT_TRUE(st.ok()) << st;
  const KernelContext ctx = contextFor(threads);
  def->run(KernelArgs{in, out, &params, &ctx, /*microBatch=*/1});
  std::vector<std::vector<float>> result;
  for (const Operand &o : outs)
    result.push_back(o.values());
  return result;
}

// Random inputs of one problem (bf16-representable, so that f32 and bf16
// launches see the same values).
struct Problem {
  Config c;
  std::vector<float> q, k, v, dO;
  std::vector<int32_t> seg;
  explicit Problem(const Config &cfg) : c(cfg) {
    auto values = [](int64_t n, uint32_t seed, float scale) {
      std::vector<float> x = test::randomVector(n, seed, -scale, scale);
      for (float &e : x)
        e = widenBf16(roundBf16(e));
      return x;
    };
    // Scores of several units, so that the softmax is far from uniform
    // and the running maximum changes between tiles.
    q = values(c.b * c.s * c.h * c.dh, 11, 2.0f);
    k = values(c.b * c.s * c.hkv * c.dh, 12, 2.0f);
    v = values(c.b * c.s * c.hkv * c.dh, 13, 1.0f);
    dO = values(c.b * c.s * c.h * c.dh, 14, 1.0f);
    // Documents of 1 to 40 tokens.
    for (int64_t bi = 0; bi < c.b; ++bi) {
      int32_t id = 0;
      int64_t left = 0;
      for (int64_t i = 0; i < c.s; ++i) {
        if (left == 0) {
          ++id;
          left = 1 + (i * 7 + bi * 13 + 5) % 40;
        }
        seg.push_back(id);
        --left;
      }
    }
  }
  std::vector<int64_t> qShape() const { return {c.b, c.s, c.h * c.dh}; }
  std::vector<int64_t> kvShape() const { return {c.b, c.s, c.hkv * c.dh}; }
  std::vector<int64_t> lseShape() const { return {c.b, c.h, c.s}; }
  Operand op(const std::vector<float> &x, std::vector<int64_t> shape) const {
    return Operand::floats(std::move(shape), x, c.dtype);
  }
};

struct Grads {
  std::vector<float> o, lse, dq, dk, dv;
};

Grads runFlash(const Problem &p, int threads) {
  const Config &c = p.c;
  const KernelParams params = paramsOf(c);
  std::vector<Operand> ins = {p.op(p.q, p.qShape()), p.op(p.k, p.kvShape()),
                              p.op(p.v, p.kvShape())};
  if (c.segments)
    ins.push_back(Operand::segments(p.seg, c.b, c.s));
  auto fwd =
      run("flash_attention", ins,
          {Operand::zeros(p.qShape(), c.dtype), Operand::zeros(p.lseShape())},
          params, threads);
  Grads g;
  g.o = fwd[0];
  g.lse = fwd[1];
  std::vector<Operand> bins = {
      p.op(p.dO, p.qShape()), p.op(p.q, p.qShape()),
      p.op(p.k, p.kvShape()), p.op(p.v, p.kvShape()),
      p.op(g.o, p.qShape()),  Operand::floats(p.lseShape(), g.lse)};
  if (c.segments)
    bins.push_back(Operand::segments(p.seg, c.b, c.s));
  auto bwd = run("flash_attention_grad_input", bins,
                 {Operand::zeros(p.qShape(), c.dtype),
                  Operand::zeros(p.kvShape(), c.dtype),
                  Operand::zeros(p.kvShape(), c.dtype)},
                 params, threads);
  g.dq = bwd[0];
  g.dk = bwd[1];
  g.dv = bwd[2];
  return g;
}

// The reference kernels, with the same masks.
Grads runReference(const Problem &p, int threads) {
  const Config &c = p.c;
  const KernelParams params = paramsOf(c);
  const std::vector<int64_t> probsShape = {c.b, c.h, c.s, c.s};
  std::vector<Operand> ins = {p.op(p.q, p.qShape()), p.op(p.k, p.kvShape()),
                              p.op(p.v, p.kvShape())};
  if (c.segments)
    ins.push_back(Operand::segments(p.seg, c.b, c.s));
  auto fwd = run("attention", ins,
                 {Operand::zeros(p.qShape(), c.dtype),
                  Operand::zeros(probsShape, c.dtype)},
                 params, threads);
  std::vector<Operand> bins = {p.op(p.dO, p.qShape()), p.op(p.q, p.qShape()),
                               p.op(p.k, p.kvShape()), p.op(p.v, p.kvShape()),
                               p.op(fwd[1], probsShape)};
  if (c.segments)
    bins.push_back(Operand::segments(p.seg, c.b, c.s));
  auto bwd = run("attention_grad_input", bins,
                 {Operand::zeros(p.qShape(), c.dtype),
                  Operand::zeros(p.kvShape(), c.dtype),
                  Operand::zeros(p.kvShape(), c.dtype)},
                 params, threads);
  Grads g;
  g.o = fwd[0];
  g.dq = bwd[0];
  g.dk = bwd[1];
  g.dv = bwd[2];
  return g;
}

// Attention in double with any of the masks, the same dropout draws.
Grads runNaive(const Problem &p) {
  const Config &c = p.c;
  const int64_t S = c.s, Dh = c.dh, group = c.h / c.hkv;
  const double scale = c.scale();
  const uint64_t key = rng::dropoutKey(1234, 7, 5, 1);
  const uint64_t threshold =
      static_cast<uint64_t>(std::ceil(c.dropout * 16777216.0));
  const double keepScale = 1.0f / (1.0f - static_cast<float>(c.dropout));
  Grads g;
  g.o.assign(p.q.size(), 0.0f);
  g.dq.assign(p.q.size(), 0.0f);
  g.dk.assign(p.k.size(), 0.0f);
  g.dv.assign(p.v.size(), 0.0f);
  g.lse.assign(c.b * c.h * S, 0.0f);
  std::vector<double> dk(p.k.size(), 0.0), dv(p.v.size(), 0.0);
  auto qAt = [&](const std::vector<float> &x, int64_t bi, int64_t i, int64_t hi,
                 int64_t d) {
    return static_cast<double>(x[((bi * S + i) * c.h + hi) * Dh + d]);
  };
  auto kvIndex = [&](int64_t bi, int64_t j, int64_t hk, int64_t d) {
    return ((bi * S + j) * c.hkv + hk) * Dh + d;
  };
  for (int64_t bi = 0; bi < c.b; ++bi)
    for (int64_t hi = 0; hi < c.h; ++hi) {
      const int64_t hk = hi / group;
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> P(S, 0.0), F(S, 0.0);
        double mx = -INFINITY;
        std::vector<bool> vis(S);
        for (int64_t j = 0; j < S; ++j) {
          vis[j] = (!c.causal || j <= i || j < c.prefix) &&
                   (!c.segments || p.seg[bi * S + i] == p.seg[bi * S + j]);
          if (!vis[j])
            continue;
          double x = 0;
          for (int64_t d = 0; d < Dh; ++d)
            x += qAt(p.q, bi, i, hi, d) * p.k[kvIndex(bi, j, hk, d)];
          P[j] = x * scale;
          mx = std::max(mx, P[j]);
        }
        double l = 0;
        for (int64_t j = 0; j < S; ++j)
          if (vis[j])
            l += (P[j] = std::exp(P[j] - mx));
        g.lse[(bi * c.h + hi) * S + i] = static_cast<float>(mx + std::log(l));
        const uint64_t base = ((bi * c.h + hi) * S + i) * S;
        for (int64_t j = 0; j < S; ++j) {
          P[j] = vis[j] ? P[j] / l : 0.0;
          F[j] = c.dropout > 0 ? ((rng::draw(key, base + j) >> 40) >= threshold
                                      ? keepScale
                                      : 0.0)
                               : 1.0;
        }
        // Forward and backward of this row.
        std::vector<double> o(Dh, 0.0), dP(S, 0.0);
        for (int64_t j = 0; j < S; ++j)
          for (int64_t d = 0; d < Dh; ++d)
            o[d] += P[j] * F[j] * p.v[kvIndex(bi, j, hk, d)];
        for (int64_t d = 0; d < Dh; ++d)
          g.o[((bi * S + i) * c.h + hi) * Dh + d] = static_cast<float>(o[d]);
        double rowSum = 0;
        for (int64_t j = 0; j < S; ++j) {
          double x = 0;
          for (int64_t d = 0; d < Dh; ++d)
            x += qAt(p.dO, bi, i, hi, d) * p.v[kvIndex(bi, j, hk, d)];
          dP[j] = x * F[j];
          rowSum += dP[j] * P[j];
        }
        for (int64_t j = 0; j < S; ++j) {
          const double dS = P[j] * (dP[j] - rowSum);
          for (int64_t d = 0; d < Dh; ++d) {
            g.dq[((bi * S + i) * c.h + hi) * Dh + d] +=
                static_cast<float>(scale * dS * p.k[kvIndex(bi, j, hk, d)]);
            dk[kvIndex(bi, j, hk, d)] += scale * dS * qAt(p.q, bi, i, hi, d);
            dv[kvIndex(bi, j, hk, d)] += P[j] * F[j] * qAt(p.dO, bi, i, hi, d);
          }
        }
      }
    }
  for (size_t n = 0; n < dk.size(); ++n) {
    g.dk[n] = static_cast<float>(dk[n]);
    g.dv[n] = static_cast<float>(dv[n]);
  }
  return g;
}

// |got - want| <= tol * max|want| + rtol * |want| per element.
void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 double tol, double rtol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0, worst = 0;
  for (float w : want)
    largest = std::max(largest, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, err / largest);
    ASSERT_LE(err, tol * largest + rtol * std::fabs(want[i]))
        << what << " element " << i << ": got " << got[i] << ", want "
        << want[i] << " (largest " << largest << ")";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", worst);
  ::testing::Test::RecordProperty(what, text);
}

constexpr double kTol = 2e-5, kRel = 1e-4;

void expectGradsClose(const Grads &got, const Grads &want, double tol,
                      double rtol, const std::string &what) {
  expectClose(got.o, want.o, tol, rtol, what + " o");
  expectClose(got.dq, want.dq, tol, rtol, what + " dq");
  expectClose(got.dk, want.dk, tol, rtol, what + " dk");
  expectClose(got.dv, want.dv, tol, rtol, what + " dv");
}

std::string name(const Config &c) {
  return "S=" + std::to_string(c.s) + " Dh=" + std::to_string(c.dh) +
         " H=" + std::to_string(c.h) + "/" + std::to_string(c.hkv) +
         (c.causal ? " causal" : " full") +
         (c.prefix ? " prefix=" + std::to_string(c.prefix) : "") +
         (c.segments ? " segments" : "") + (c.dropout > 0 ? " dropout" : "") +
         (c.dtype == DType::kBF16 ? " bf16" : " f32");
}

// Causal and full masks, dropout on and off, GQA and not, sizes that are
// not multiples of the key tile (64) or of 16, odd head dims.
TEST(FlashAttention, MatchesReferenceKernels) {
  const struct {
    int64_t b, s, h, hkv, dh;
  } shapes[] = {{2, 77, 4, 2, 8},
                {1, 130, 2, 1, 7},
                {2, 5, 3, 3, 5},
                {1, 64, 4, 4, 16},
                {1, 200, 4, 1, 33}};
  for (const auto &sh : shapes)
    for (bool causal : {true, false})
      for (double dropout : {0.0, 0.2}) {
        Config c;
        c.b = sh.b, c.s = sh.s, c.h = sh.h, c.hkv = sh.hkv, c.dh = sh.dh;
        c.causal = causal;
        c.dropout = dropout;
        const Problem p(c);
        SCOPED_TRACE(name(c));
        expectGradsClose(runFlash(p, 2), runReference(p, 2), kTol, kRel,
                         name(c));
      }
}

// The lse is the log-sum-exp of the scaled, masked scores.
TEST(FlashAttention, LseMatchesDoubleReference) {
  Config c;
  c.s = 150;
  c.prefix = 20;
  c.segments = true;
  const Problem p(c);
  expectClose(runFlash(p, 2).lse, runNaive(p).lse, 1e-6, 1e-6, "lse");
}

// The double reference agrees with the reference kernels, so that the
// masks the kernels lack are checked against the same function.
TEST(FlashAttention, DoubleReferenceMatchesReferenceKernels) {
  Config c;
  c.s = 70;
  c.dropout = 0.2;
  const Problem p(c);
  Grads ref = runReference(p, 2), naive = runNaive(p);
  expectGradsClose(ref, naive, kTol, kRel, "reference vs double");
}

// Prefix-LM and document masks, alone and together, with dropout and GQA.
TEST(FlashAttention, PrefixAndSegmentMasks) {
  for (int64_t prefix : {0, 1, 37, 150})
    for (bool segments : {false, true})
      for (double dropout : {0.0, 0.15}) {
        if (prefix == 0 && !segments)
          continue; // covered by MatchesReferenceKernels
        Config c;
        c.b = 2, c.s = 150, c.h = 4, c.hkv = 2, c.dh = 9;
        c.prefix = prefix;
        c.segments = segments;
        c.dropout = dropout;
        const Problem p(c);
        SCOPED_TRACE(name(c));
        const Grads naive = runNaive(p);
        expectGradsClose(runFlash(p, 3), naive, kTol, kRel, name(c));
        expectGradsClose(runReference(p, 3), naive, kTol, kRel,
                         "reference " + name(c));
      }
}

// Non-causal attention within documents (an encoder over packed inputs).
TEST(FlashAttention, SegmentsWithoutCausalMask) {
  Config c;
  c.causal = false;
  c.segments = true;
  c.dropout = 0.1;
  c.s = 99;
  const Problem p(c);
  const Grads naive = runNaive(p);
  expectGradsClose(runFlash(p, 2), naive, kTol, kRel, name(c));
  expectGradsClose(runReference(p, 2), naive, kTol, kRel,
                   "reference " + name(c));
}

// bf16 storage computes the f32 function and rounds each stored value
// once: every output is the f32 launch's output within one bf16 rounding
// (2^-9 relative; the bound 2^-8 of the element plus 2^-8 of 1e-3 of the
// largest magnitude as in Bf16StorageTest). The inputs are
// bf16-representable, so both launches see the same values.
TEST(FlashAttention, Bf16IsF32RoundedOnce) {
  for (double dropout : {0.0, 0.2})
    for (bool segments : {false, true}) {
      Config c;
      c.s = 90;
      c.dh = 12;
      c.prefix = 10;
      c.dropout = dropout;
      c.segments = segments;
      const Problem pf(c);
      c.dtype = DType::kBF16;
      const Problem pb(c);
      // Backward from the same forward output: feed the f32 run's o and
      // lse (rounded) to both.
      const Grads f = runFlash(pf, 2), b = runFlash(pb, 2);
      SCOPED_TRACE(name(c));
      for (const auto &[got, want, what] :
           {std::tuple(&b.o, &f.o, "o"), std::tuple(&b.lse, &f.lse, "lse")}) {
        double largest = 0;
        for (float w : *want)
          largest = std::max(largest, std::fabs(static_cast<double>(w)));
        for (size_t i = 0; i < want->size(); ++i)
          ASSERT_LE(std::fabs((*got)[i] - (*want)[i]),
                    std::ldexp(std::fabs((*want)[i]) + 1e-3 * largest, -8))
              << what << " " << i;
      }
      // The gradients of the bf16 run read o rounded to bf16 and are
      // rounded themselves: equal to the f32 run's to bf16 precision
      // (measured: 3.5e-3 of the largest element; bound 1e-2, about two
      // bf16 ulps of 2^-8 at the largest magnitude plus the rounding of o
      // carried through D = do . o).
      expectGradsClose(b, f, 1e-2, 1e-2, "bf16 vs f32");
    }
}

// bf16 flash against the bf16 reference kernels (causal, GQA). The
// reference stores the probabilities in bf16 (2^-9 relative each) and
// reads them back in backward; flash keeps them in f32. Measured: 6.3e-3
// of the largest element (dk); bound 2e-2.
TEST(FlashAttention, Bf16MatchesReferenceKernels) {
  Config c;
  c.s = 100;
  c.dtype = DType::kBF16;
  c.dropout = 0.1;
  const Problem p(c);
  expectGradsClose(runFlash(p, 2), runReference(p, 2), 2e-2, 2e-2, name(c));
}

// The bits do not depend on the number of threads. Backward splits its
// work by (batch, kv head) when there are at least as many pairs as
// threads, and finer otherwise: with one pair (hkv = 1, b = 1) the runs
// with 2 to 4 threads take the finer split, the one-thread run the other,
// and all must agree bit for bit.
TEST(FlashAttention, BitsDoNotDependOnThreads) {
  for (DType t : {DType::kF32, DType::kBF16})
    for (int64_t pairs : {1, 4}) {
      Config c;
      c.b = pairs == 1 ? 1 : 2;
      c.hkv = pairs == 1 ? 1 : 2;
      c.s = 150;
      c.dh = 9;
      c.prefix = 5;
      c.segments = true;
      c.dropout = 0.1;
      c.dtype = t;
      const Problem p(c);
      const Grads one = runFlash(p, 1);
      for (int threads : {2, 3, 4}) {
        const Grads many = runFlash(p, threads);
        for (const auto &[a, b, what] : {std::tuple(&one.o, &many.o, "o"),
                                         std::tuple(&one.lse, &many.lse, "lse"),
                                         std::tuple(&one.dq, &many.dq, "dq"),
                                         std::tuple(&one.dk, &many.dk, "dk"),
                                         std::tuple(&one.dv, &many.dv, "dv")})
          EXPECT_EQ(0, std::memcmp(a->data(), b->data(), a->size() * 4))
              << what << " with " << threads << " threads, " << name(c);
      }
    }
}

// The gqa fusion: attention reading grouped kv heads in place against
// repeat_kv, attention over the repeated heads, repeat_kv_grad_input.
// Forward outputs, probabilities and dq are computed by the same
// operations in the same order: equal bits. dk and dv are not: in place,
// the kernel adds the group's per-row contributions into one sum
// ((a1 + a2 + ...) + b1 + b2 ...), where the unfused graph sums each
// head's contributions first and then adds the heads ((a1 + a2 ...) +
// (b1 + b2 ...)), rounding each head's sum (to bf16 in a bf16 plan). The
// difference is a reassociation of one fp32 sum: a few ulps of the sum of
// magnitudes, bounded here by 1e-5 of the largest element (1e-2 in bf16,
// where the unfused graph rounds each head's gradient to bf16 before
// summing).
TEST(FlashAttention, GqaInPlaceMatchesRepeatedHeads) {
  for (DType t : {DType::kF32, DType::kBF16}) {
    Config c;
    c.s = 70;
    c.h = 6;
    c.hkv = 2;
    c.dh = 8;
    c.dropout = 0.1;
    c.dtype = t;
    const Problem p(c);
    const Grads grouped = runReference(p, 2);
    // The same problem with the kv heads repeated explicitly.
    Config wide = c;
    wide.hkv = c.h;
    KernelParams rep;
    rep.setInt("num_heads", c.h);
    rep.setInt("num_kv_heads", c.hkv);
    auto repeat = [&](const std::vector<float> &x) {
      return run("repeat_kv", {p.op(x, p.kvShape())},
                 {Operand::zeros(p.qShape(), t)}, rep, 2)[0];
    };
    Problem pw(wide);
    pw.q = p.q;
    pw.dO = p.dO;
    pw.k = repeat(p.k);
    pw.v = repeat(p.v);
    const Grads repeated = runReference(pw, 2);
    auto narrow = [&](const std::vector<float> &x) {
      return run("repeat_kv_grad_input", {p.op(x, p.qShape())},
                 {Operand::zeros(p.kvShape(), t)}, rep, 2)[0];
    };
    SCOPED_TRACE(t == DType::kBF16 ? "bf16" : "f32");
    EXPECT_EQ(grouped.o, repeated.o);
    EXPECT_EQ(grouped.dq, repeated.dq);
    const double tol = t == DType::kBF16 ? 1e-2 : 1e-5;
    expectClose(grouped.dk, narrow(repeated.dk), tol, 0,
                std::string("gqa dk ") + (t == DType::kBF16 ? "bf16" : "f32"));
    expectClose(grouped.dv, narrow(repeated.dv), tol, 0,
                std::string("gqa dv ") + (t == DType::kBF16 ? "bf16" : "f32"));
  }
}

} // namespace
} // namespace braid
