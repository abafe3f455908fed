// The context-parallel kernels and parameters of docs/kernels.md, "Context
// parallel". Each kernel runs once per simulated CP rank (ctx.cpRank,
// ctx.cpSize; 2 and 4 ranks), the rank holding Megatron's load-balanced
// part of the sequence: chunks r and 2P - 1 - r of 2P. The ranks' results,
// put back at their positions, must equal the whole-sequence kernel's:
// - bit for bit where the rank computes the same terms in the same order
//   (layout copies, RoPE, dropout draws);
// - within 1e-5 of the output's largest magnitude where sums are formed in
//   another order: the key/value gradients summed over ranks (and ring
//   steps), the outputs of a ring merged step by step with
//   attention_merge, and dq summed over the ring steps. These are fp32 sums
//   of a few hundred terms, whose reordering moves them by a few ulps of
//   the largest term (measured below 1e-6); a wrong position, mask or draw
//   moves elements by 1e-2 or more.
// The positions a rank holds are computed here independently of
// kernels/common/SequenceLayout.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/KernelHarness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The positions CP rank r of p holds in a sequence of s: chunks r and
// 2p - 1 - r of 2p chunks of s / 2p.
std::vector<int64_t> positionsOf(int64_t r, int64_t p, int64_t s) {
  const int64_t c = s / (2 * p);
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < c; ++i)
    pos.push_back(r * c + i);
  for (int64_t i = 0; i < c; ++i)
    pos.push_back((2 * p - 1 - r) * c + i);
  return pos;
}

// x [outer, s, inner] -> [outer, pos.size(), inner]: the rows at `pos`.
template <typename T>
std::vector<T> rowsAt(const std::vector<T> &x, int64_t outer, int64_t s,
                      int64_t inner, const std::vector<int64_t> &pos) {
  std::vector<T> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p : pos)
      for (int64_t e = 0; e < inner; ++e)
        out.push_back(x[(o * s + p) * inner + e]);
  return out;
}

// acc [outer, s, inner] += part [outer, pos.size(), inner] at rows `pos`.
void addRowsAt(std::vector<float> &acc, const std::vector<float> &part,
               int64_t outer, int64_t s, int64_t inner,
               const std::vector<int64_t> &pos) {
  const int64_t l = static_cast<int64_t>(pos.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < l; ++i)
      for (int64_t e = 0; e < inner; ++e)
        acc[(o * s + pos[i]) * inner + e] += part[(o * l + i) * inner + e];
}

void setCp(Launch &l, int64_t rank, int64_t size) {
  l.context().cpRank = rank;
  l.context().cpSize = size;
}

std::string rankName(int64_t rank, int64_t size) {
  return "CP rank " + std::to_string(rank) + " of " + std::to_string(size);
}

double maxAbs(const std::vector<float> &v) {
  double m = 0;
  for (float x : v)
    m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// Expects every |got - want| <= tol * max|want| (and no NaN), and returns
// the largest |got - want| / max|want|. Infinities must match exactly.
double expectClose(const std::vector<float> &got,
                   const std::vector<float> &want, double tol,
                   const std::string &what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  if (got.size() != want.size())
    return INFINITY;
  double finiteMax = 0;
  for (float w : want)
    if (std::isfinite(w))
      finiteMax = std::max(finiteMax, std::fabs(static_cast<double>(w)));
  const double scale = finiteMax > 0 ? finiteMax : 1.0;
  double worst = 0;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    double err;
    if (std::isinf(w) || std::isinf(g))
      err = g == w ? 0.0 : INFINITY;
    else
      err = std::fabs(g - w) / scale; // NaN stays NaN
    if (!(err <= tol) && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected "
                    << w << " (error " << err << " of the largest magnitude "
                    << scale << ")";
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

constexpr double kTol = 1e-5;

// --- attention
// -----------------------------------------------------------------

struct AttnCase {
  const char *name;
  int64_t ranks;
  int64_t b = 2, s = 96, h = 4, hkv = 2, dh = 8;
  bool causal = true;
  int64_t prefix = 0;
  double dropout = 0.0;
  bool segments = false;
  int threads = 2;
};

void PrintTo(const AttnCase &c, std::ostream *os) {
  *os << c.name << ", " << c.ranks << " ranks";
}

// The largest errors measured over all cases, printed at the end.
struct Worst {
  double o = 0, lse = 0, probs = 0, dq = 0, dkv = 0;
  ~Worst() {
    std::printf("[context parallel] largest errors (of the largest "
                "magnitude): o %.3g, lse %.3g, probs %.3g, dq %.3g, "
                "dk/dv %.3g\n",
                o, lse, probs, dq, dkv);
  }
};
Worst &worst() {
  static Worst w;
  return w;
}
void note(double &slot, double err) { slot = std::max(slot, err); }

class CpAttention : public ::testing::TestWithParam<AttnCase> {
protected:
  AttnCase c = GetParam();
  int64_t qw = c.h * c.dh, kw = c.hkv * c.dh;
  int64_t l = c.s / c.ranks;
  std::vector<float> q = randomVector(c.b * c.s * qw, 11);
  std::vector<float> k = randomVector(c.b * c.s * kw, 12);
  std::vector<float> v = randomVector(c.b * c.s * kw, 13);
  std::vector<float> dout = randomVector(c.b * c.s * qw, 14);
  std::vector<int32_t> seg = documents();

  // Documents of uneven lengths, boundaries off the chunk edges.
  std::vector<int32_t> documents() const {
    std::vector<int32_t> ids(c.b * c.s);
    for (int64_t bi = 0; bi < c.b; ++bi) {
      int32_t doc = 0;
      for (int64_t p = 0; p < c.s; ++p) {
        if (p > 0 && (p * (5 + bi) + 3) % 23 == 0)
          ++doc;
        ids[bi * c.s + p] = doc;
      }
    }
    return ids;
  }

  // A launch of `kernel` with the case's parameters and draws.
  Launch launch(const char *kernel) const {
    Launch x(kernel);
    x.param("num_heads", c.h).param("num_kv_heads", c.hkv);
    x.param("causal", c.causal ? 1 : 0);
    if (c.prefix > 0)
      x.param("prefix", c.prefix);
    x.paramF("scale", 1.0 / std::sqrt(static_cast<double>(c.dh)));
    x.paramF("dropout", c.dropout).param("rng_offset", 5);
    x.context().seed = 4321;
    x.context().step = 3;
    x.microBatch() = 2;
    return x;
  }
  void addSegments(Launch &x) const {
    if (c.segments)
      x.inIds({c.b, c.s}, seg);
  }
  // Context-parallel parameters of rank r's launch; step -1: all-gather.
  void cpOf(Launch &x, int64_t r, int64_t step) const {
    x.param("cp", 1);
    if (step >= 0)
      x.param("cp_kv_step", step);
    setCp(x, r, c.ranks);
  }
  // The whole sequence's flash attention and its gradients: the reference
  // each rank's rows are held to.
  struct Whole {
    Launch f, g;
  };
  Whole wholeFlash() const {
    Launch f = launch("flash_attention");
    f.in({c.b, c.s, qw}, q).in({c.b, c.s, kw}, k).in({c.b, c.s, kw}, v);
    addSegments(f);
    f.out({c.b, c.s, qw}).out({c.b, c.h, c.s});
    f.run(pool());
    Launch g = launch("flash_attention_grad_input");
    g.in({c.b, c.s, qw}, dout).in({c.b, c.s, qw}, q).in({c.b, c.s, kw}, k);
    g.in({c.b, c.s, kw}, v).in({c.b, c.s, qw}, f.output(0));
    g.in({c.b, c.h, c.s}, f.output(1));
    addSegments(g);
    g.out({c.b, c.s, qw}).out({c.b, c.s, kw}).out({c.b, c.s, kw});
    g.run(pool());
    return {std::move(f), std::move(g)};
  }

  std::vector<int64_t> pos(int64_t r) const {
    return positionsOf(r, c.ranks, c.s);
  }
  // x [B, S, w] -> rank r's rows.
  std::vector<float> rows(const std::vector<float> &x, int64_t w,
                          int64_t r) const {
    return rowsAt(x, c.b, c.s, w, pos(r));
  }
  std::vector<float> lseRows(const std::vector<float> &lse, int64_t r) const {
    return rowsAt(lse, c.b * c.h, c.s, 1, pos(r));
  }
  ThreadPool *pool() const { return &testPool(c.threads); }
};

TEST_P(CpAttention, AllGatheredKeysGiveTheWholeSequencesRows) {
  // The whole sequence on one rank.
  Launch f = launch("attention");
  f.in({c.b, c.s, qw}, q).in({c.b, c.s, kw}, k).in({c.b, c.s, kw}, v);
  addSegments(f);
  f.out({c.b, c.s, qw}).out({c.b, c.h, c.s, c.s});
  f.run(pool());
  Launch g = launch("attention_grad_input");
  g.in({c.b, c.s, qw}, dout).in({c.b, c.s, qw}, q).in({c.b, c.s, kw}, k);
  g.in({c.b, c.s, kw}, v).in({c.b, c.h, c.s, c.s}, f.output(1));
  addSegments(g);
  g.out({c.b, c.s, qw}).out({c.b, c.s, kw}).out({c.b, c.s, kw});
  g.run(pool());

  std::vector<float> dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  for (int64_t r = 0; r < c.ranks; ++r) {
    const std::string name = rankName(r, c.ranks);
    Launch rf = launch("attention");
    rf.in({c.b, l, qw}, rows(q, qw, r)).in({c.b, c.s, kw}, k);
    rf.in({c.b, c.s, kw}, v);
    addSegments(rf);
    rf.out({c.b, l, qw}).out({c.b, c.h, l, c.s});
    cpOf(rf, r, -1);
    rf.run(pool());
    note(worst().o, expectClose(rf.output(0), rows(f.output(0), qw, r), kTol,
                                name + ", o"));
    note(worst().probs,
         expectClose(rf.output(1),
                     rowsAt(f.output(1), c.b * c.h, c.s, c.s, pos(r)), kTol,
                     name + ", probs"));

    Launch rg = launch("attention_grad_input");
    rg.in({c.b, l, qw}, rows(dout, qw, r)).in({c.b, l, qw}, rows(q, qw, r));
    rg.in({c.b, c.s, kw}, k).in({c.b, c.s, kw}, v);
    rg.in({c.b, c.h, l, c.s}, rf.output(1));
    addSegments(rg);
    rg.out({c.b, l, qw}).out({c.b, c.s, kw}).out({c.b, c.s, kw});
    cpOf(rg, r, -1);
    rg.run(pool());
    note(worst().dq, expectClose(rg.output(0), rows(g.output(0), qw, r), kTol,
                                 name + ", dq"));
    // Each rank's dk, dv: its queries' terms, summed over the ranks by the
    // reduce-scatter that follows the all-gather's backward.
    for (size_t i = 0; i < dk.size(); ++i) {
      dk[i] += rg.output(1)[i];
      dv[i] += rg.output(2)[i];
    }
  }
  note(worst().dkv, expectClose(dk, g.output(1), kTol, "dk summed"));
  note(worst().dkv, expectClose(dv, g.output(2), kTol, "dv summed"));
}

TEST_P(CpAttention, FlashAllGatheredKeysGiveTheWholeSequencesRows) {
  Whole whole = wholeFlash();
  Launch &f = whole.f, &g = whole.g;

  std::vector<float> dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  for (int64_t r = 0; r < c.ranks; ++r) {
    const std::string name = rankName(r, c.ranks);
    Launch rf = launch("flash_attention");
    rf.in({c.b, l, qw}, rows(q, qw, r)).in({c.b, c.s, kw}, k);
    rf.in({c.b, c.s, kw}, v);
    addSegments(rf);
    rf.out({c.b, l, qw}).out({c.b, c.h, l});
    cpOf(rf, r, -1);
    rf.run(pool());
    note(worst().o, expectClose(rf.output(0), rows(f.output(0), qw, r), kTol,
                                name + ", o"));
    note(worst().lse, expectClose(rf.output(1), lseRows(f.output(1), r), kTol,
                                  name + ", lse"));

    Launch rg = launch("flash_attention_grad_input");
    rg.in({c.b, l, qw}, rows(dout, qw, r)).in({c.b, l, qw}, rows(q, qw, r));
    rg.in({c.b, c.s, kw}, k).in({c.b, c.s, kw}, v);
    rg.in({c.b, l, qw}, rf.output(0)).in({c.b, c.h, l}, rf.output(1));
    addSegments(rg);
    rg.out({c.b, l, qw}).out({c.b, c.s, kw}).out({c.b, c.s, kw});
    cpOf(rg, r, -1);
    rg.run(pool());
    note(worst().dq, expectClose(rg.output(0), rows(g.output(0), qw, r), kTol,
                                 name + ", dq"));
    for (size_t i = 0; i < dk.size(); ++i) {
      dk[i] += rg.output(1)[i];
      dv[i] += rg.output(2)[i];
    }
  }
  note(worst().dkv, expectClose(dk, g.output(1), kTol, "dk summed"));
  note(worst().dkv, expectClose(dv, g.output(2), kTol, "dv summed"));
}

// The ring: at step t rank r holds the k/v part of rank (r - t) mod P. The
// steps' (o, lse) merged in step order with attention_merge are the whole
// sequence's rows; backward, given the merged o and lse, returns per step
// the step's terms of dq (summed over the steps) and the dk, dv of the
// step's keys (sent back to their rank and summed there).
TEST_P(CpAttention, RingStepsMergeToTheWholeSequencesRows) {
  Whole whole = wholeFlash();
  Launch &f = whole.f, &g = whole.g;

  std::vector<float> dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  for (int64_t r = 0; r < c.ranks; ++r) {
    const std::string name = rankName(r, c.ranks);
    const std::vector<float> qr = rows(q, qw, r);
    // Forward: the steps in order, each merged into the running result.
    std::vector<float> o, lse;
    for (int64_t t = 0; t < c.ranks; ++t) {
      const int64_t src = (r - t + c.ranks) % c.ranks;
      Launch rf = launch("flash_attention");
      rf.in({c.b, l, qw}, qr).in({c.b, l, kw}, rows(k, kw, src));
      rf.in({c.b, l, kw}, rows(v, kw, src));
      addSegments(rf);
      rf.out({c.b, l, qw}).out({c.b, c.h, l});
      cpOf(rf, r, t);
      rf.run(pool());
      for (float x : rf.output(0))
        ASSERT_FALSE(std::isnan(x)) << name << ", step " << t;
      if (t == 0) {
        o = rf.output(0);
        lse = rf.output(1);
        continue;
      }
      Launch m("attention_merge");
      m.in({c.b, l, qw}, o).in({c.b, c.h, l}, lse);
      m.in({c.b, l, qw}, rf.output(0)).in({c.b, c.h, l}, rf.output(1));
      m.out({c.b, l, qw}).out({c.b, c.h, l}).param("num_heads", c.h);
      m.run(pool());
      o = m.output(0);
      lse = m.output(1);
    }
    note(worst().o,
         expectClose(o, rows(f.output(0), qw, r), kTol, name + ", merged o"));
    note(worst().lse, expectClose(lse, lseRows(f.output(1), r), kTol,
                                  name + ", merged lse"));

    // Backward: every step reads the merged o and lse.
    std::vector<float> dq(qr.size(), 0.0f);
    for (int64_t t = 0; t < c.ranks; ++t) {
      const int64_t src = (r - t + c.ranks) % c.ranks;
      Launch rg = launch("flash_attention_grad_input");
      rg.in({c.b, l, qw}, rows(dout, qw, r)).in({c.b, l, qw}, qr);
      rg.in({c.b, l, kw}, rows(k, kw, src)).in({c.b, l, kw}, rows(v, kw, src));
      rg.in({c.b, l, qw}, o).in({c.b, c.h, l}, lse);
      addSegments(rg);
      rg.out({c.b, l, qw}).out({c.b, l, kw}).out({c.b, l, kw});
      cpOf(rg, r, t);
      rg.run(pool());
      for (size_t i = 0; i < dq.size(); ++i)
        dq[i] += rg.output(0)[i];
      addRowsAt(dk, rg.output(1), c.b, c.s, kw, pos(src));
      addRowsAt(dv, rg.output(2), c.b, c.s, kw, pos(src));
    }
    note(worst().dq,
         expectClose(dq, rows(g.output(0), qw, r), kTol, name + ", dq"));
  }
  note(worst().dkv, expectClose(dk, g.output(1), kTol, "dk summed"));
  note(worst().dkv, expectClose(dv, g.output(2), kTol, "dv summed"));
}

AttnCase causal(int64_t p) {
  AttnCase c{"causal GQA", p};
  return c;
}
AttnCase prefixLm(int64_t p) {
  AttnCase c{"prefix-LM", p};
  c.prefix = 29; // off every chunk edge
  return c;
}
AttnCase documents(int64_t p) {
  AttnCase c{"causal documents", p};
  c.segments = true;
  return c;
}
AttnCase bidirectionalDocuments(int64_t p) {
  AttnCase c{"bidirectional documents", p};
  c.causal = false;
  c.segments = true;
  return c;
}
AttnCase dropout(int64_t p) {
  AttnCase c{"causal dropout", p};
  c.dropout = 0.2;
  c.prefix = 7;
  return c;
}
// One (batch, kv head) pair on three threads: flash backward takes its
// two-pass split (key tiles, then query blocks); longer sequences span
// several tiles and query blocks.
AttnCase twoPass(int64_t p) {
  AttnCase c{"two-pass backward, dropout, documents", p};
  c.b = 1;
  c.hkv = 1;
  c.s = 272;
  c.dropout = 0.1;
  c.segments = true;
  c.threads = 3;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CpAttention,
    ::testing::Values(causal(2), causal(4), prefixLm(2), prefixLm(4),
                      documents(2), documents(4), bidirectionalDocuments(2),
                      bidirectionalDocuments(4), dropout(2), dropout(4),
                      twoPass(2), twoPass(4)));

// A ring step whose keys a row cannot see: under the causal mask, rank 0 of
// 2 holds chunks 0 and 3, rank 1 chunks 1 and 2, so at step 1 rank 0's
// chunk-0 rows see no key. They get o = 0 and lse = -inf (never NaN), and
// backward adds nothing for them.
TEST(CpAttentionRing, RowsThatSeeNoKeyGiveZeroAndMinusInfinity) {
  // One batch row of 16 positions: each rank holds l = 8.
  const int64_t b = 1, h = 2, dh = 4, l = 8;
  const std::vector<float> q = randomVector(b * l * h * dh, 21);
  const std::vector<float> k = randomVector(b * l * h * dh, 22);
  const std::vector<float> v = randomVector(b * l * h * dh, 23);
  auto make = [&](const char *kernel) {
    Launch x(kernel);
    x.param("num_heads", h).param("num_kv_heads", h).param("causal", 1);
    x.paramF("scale", 0.5).param("cp", 1).param("cp_kv_step", 1);
    setCp(x, 0, 2);
    return x;
  };
  Launch f = make("flash_attention");
  f.in({b, l, h * dh}, q).in({b, l, h * dh}, k).in({b, l, h * dh}, v);
  f.out({b, l, h * dh}).out({b, h, l});
  f.run();
  for (int64_t hi = 0; hi < h; ++hi)
    for (int64_t i = 0; i < l; ++i) {
      const float lse = f.output(1)[hi * l + i];
      if (i < l / 2)
        EXPECT_EQ(lse, -kInf) << hi << ", " << i;
      else
        EXPECT_TRUE(std::isfinite(lse)) << hi << ", " << i;
    }
  for (int64_t i = 0; i < l / 2; ++i)
    for (int64_t d = 0; d < h * dh; ++d)
      EXPECT_EQ(f.output(0)[i * h * dh + d], 0.0f) << i << ", " << d;

  // Backward with lse -inf for those rows (as a merge would give a row
  // that no step let see a key): zeros there, no NaN anywhere.
  Launch g = make("flash_attention_grad_input");
  g.in({b, l, h * dh}, randomVector(b * l * h * dh, 24));
  g.in({b, l, h * dh}, q).in({b, l, h * dh}, k).in({b, l, h * dh}, v);
  g.in({b, l, h * dh}, f.output(0)).in({b, h, l}, f.output(1));
  g.out({b, l, h * dh}).out({b, l, h * dh}).out({b, l, h * dh});
  g.run();
  for (int o = 0; o < 3; ++o)
    for (float x : g.output(o))
      EXPECT_FALSE(std::isnan(x)) << "output " << o;
  for (int64_t i = 0; i < l / 2; ++i)
    for (int64_t d = 0; d < h * dh; ++d)
      EXPECT_EQ(g.output(0)[i * h * dh + d], 0.0f) << i << ", " << d;
}

// cp = 1 on a CP axis of one rank is the kernel without cp, bit for bit:
// all-gather mode, and for flash_attention ring step 0.
TEST(CpAttentionRing, OneRankIsTheWholeSequence) {
  const int64_t b = 2, s = 40, h = 4, hkv = 2, dh = 8;
  const std::vector<float> q = randomVector(b * s * h * dh, 31);
  const std::vector<float> k = randomVector(b * s * hkv * dh, 32);
  const std::vector<float> v = randomVector(b * s * hkv * dh, 33);
  for (const std::string kernel : {"flash_attention", "attention"}) {
    auto run = [&](int64_t cp, int64_t step) {
      Launch x(kernel);
      x.param("num_heads", h).param("num_kv_heads", hkv).param("causal", 1);
      x.paramF("scale", 0.3).paramF("dropout", 0.1).param("rng_offset", 1);
      x.in({b, s, h * dh}, q).in({b, s, hkv * dh}, k).in({b, s, hkv * dh}, v);
      x.out({b, s, h * dh});
      if (kernel == "attention")
        x.out({b, h, s, s});
      else
        x.out({b, h, s});
      if (cp)
        x.param("cp", 1).param("cp_kv_step", step);
      x.run(&testPool(2));
      return std::vector<std::vector<float>>{x.output(0), x.output(1)};
    };
    const auto plain = run(0, -1);
    EXPECT_EQ(run(1, -1), plain) << kernel << ", all-gather";
    if (kernel == "flash_attention")
      EXPECT_EQ(run(1, 0), plain) << kernel << ", ring step 0";
  }
}

// --- attention_merge
// -------------------------------------------------------------

TEST(AttentionMerge, CombinesTwoKeyBlocksAsOneSoftmax) {
  const int64_t b = 2, s = 5, h = 3, dh = 4;
  const std::vector<float> oa = randomVector(b * s * h * dh, 41);
  const std::vector<float> ob = randomVector(b * s * h * dh, 42);
  std::vector<float> la = randomVector(b * h * s, 43, -3.0f, 3.0f);
  std::vector<float> lb = randomVector(b * h * s, 44, -3.0f, 3.0f);
  // Rows where one side, or both, saw no key.
  la[1] = -kInf;
  lb[2] = -kInf;
  la[3] = lb[3] = -kInf;
  lb[4] = 80.0f; // far above la[4]: exp(la - lse) underflows to 0
  Launch m("attention_merge");
  m.in({b, s, h * dh}, oa).in({b, h, s}, la).in({b, s, h * dh}, ob);
  m.in({b, h, s}, lb).out({b, s, h * dh}).out({b, h, s});
  m.param("num_heads", h);
  expectThreadInvariant(m);
  m.run(&testPool(2));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < s; ++i) {
        const int64_t stat = (bi * h + hi) * s + i;
        const double a = la[stat], c = lb[stat];
        const double mx = std::max(a, c);
        const bool none = std::isinf(a) && std::isinf(c);
        const double lse =
            none ? -INFINITY
                 : mx + std::log(std::exp(a - mx) + std::exp(c - mx));
        if (none)
          EXPECT_EQ(m.output(1)[stat], -kInf) << stat;
        else
          EXPECT_NEAR(m.output(1)[stat], lse, 1e-6 * (1 + std::fabs(lse)))
              << stat;
        for (int64_t d = 0; d < dh; ++d) {
          const int64_t e = (bi * s + i) * h * dh + hi * dh + d;
          const double want =
              none ? 0.0
                   : std::exp(a - lse) * oa[e] + std::exp(c - lse) * ob[e];
          EXPECT_NEAR(m.output(0)[e], want, 1e-6) << stat << ", " << d;
          // A side without keys leaves the other's o exactly.
          if (std::isinf(a) && !none)
            EXPECT_EQ(m.output(0)[e], ob[e]);
          if (std::isinf(c) && !none)
            EXPECT_EQ(m.output(0)[e], oa[e]);
        }
      }
}

// --- layout copies -----------------------------------------------------------

// x [outer..., n (at dim), inner...] cut into p balanced parts: part k is
// the rows at positionsOf(k, p, n) along dim.
std::vector<float> balancedPart(const std::vector<float> &x,
                                const std::vector<int64_t> &shape, int64_t dim,
                                int64_t k, int64_t p) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i)
    inner *= shape[i];
  return rowsAt(x, outer, shape[dim], inner, positionsOf(k, p, shape[dim]));
}

std::vector<int64_t> withDim(std::vector<int64_t> shape, int64_t dim,
                             int64_t n) {
  shape[dim] = n;
  return shape;
}

struct LayoutCase {
  std::vector<int64_t> shape; // the whole tensor (x of stack_parts)
  int64_t dim;
  int64_t parts;
};

void PrintTo(const LayoutCase &c, std::ostream *os) {
  *os << "[";
  for (size_t i = 0; i < c.shape.size(); ++i)
    *os << (i ? ", " : "") << c.shape[i];
  *os << "] dim " << c.dim << ", " << c.parts << " parts";
}

class BalancedLayout : public ::testing::TestWithParam<LayoutCase> {
protected:
  LayoutCase c = GetParam();
  int64_t n = c.shape[c.dim] / c.parts;
  std::vector<float> x = randomVector(numelOf(c.shape), 51);
  std::vector<int64_t> partShape = withDim(c.shape, c.dim, n);
  std::vector<int64_t> stackedShape() const {
    std::vector<int64_t> s = partShape;
    s[0] *= c.parts;
    return s;
  }
};

// take_part with balanced = 1 and axis = 2: CP rank r's positions; with
// axis 1 (the default) the TP rank's. Ranks past the parts write zeros.
TEST_P(BalancedLayout, TakePartTakesTheRanksPositions) {
  for (int64_t axis : {1, 2})
    for (int64_t r = 0; r <= c.parts; ++r) {
      Launch t("take_part");
      t.in(c.shape, x).out(partShape).param("dim", c.dim);
      t.param("balanced", 1);
      if (axis == 2)
        t.param("axis", 2);
      // The other axis has another coordinate: it must not be read.
      t.context().tpRank = axis == 2 ? c.parts + 1 : r;
      t.context().cpRank = axis == 2 ? r : c.parts + 1;
      t.context().tpSize = t.context().cpSize = c.parts + 2;
      t.run(&testPool(3));
      const std::vector<float> want =
          r < c.parts ? balancedPart(x, c.shape, c.dim, r, c.parts)
                      : std::vector<float>(numelOf(partShape), 0.0f);
      EXPECT_EQ(t.output(0), want) << "axis " << axis << ", rank " << r;

      if (r == c.parts)
        continue;
      std::vector<int32_t> ids(x.size());
      for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int32_t>(i * 7 + 3);
      Launch ti("take_part");
      ti.inIds(c.shape, ids).outIds(partShape).param("dim", c.dim);
      ti.param("balanced", 1).param("axis", axis);
      (axis == 2 ? ti.context().cpRank : ti.context().tpRank) = r;
      ti.run();
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < c.dim; ++i)
        outer *= c.shape[i];
      for (size_t i = c.dim + 1; i < c.shape.size(); ++i)
        inner *= c.shape[i];
      EXPECT_EQ(ti.outputIds(0),
                rowsAt(ids, outer, c.shape[c.dim], inner,
                       positionsOf(r, c.parts, c.shape[c.dim])))
          << "i32, axis " << axis << ", rank " << r;
    }
}

// stack_parts puts balanced part k in block k of dimension 0, and
// unstack_parts undoes it: after an all-gather of the ranks' parts
// (stacked along dimension 0 in rank order) it puts every position back at
// its place in the whole sequence.
TEST_P(BalancedLayout, StackAndUnstackMoveBalancedParts) {
  std::vector<float> want;
  for (int64_t k = 0; k < c.parts; ++k) {
    const std::vector<float> pk = balancedPart(x, c.shape, c.dim, k, c.parts);
    want.insert(want.end(), pk.begin(), pk.end());
  }
  Launch st("stack_parts");
  st.in(c.shape, x).out(stackedShape()).param("dim", c.dim);
  st.param("balanced", 1);
  st.run(&testPool(3));
  EXPECT_EQ(st.output(0), want);

  // The all-gather of take_part's results, rank by rank.
  std::vector<float> gathered;
  for (int64_t r = 0; r < c.parts; ++r) {
    Launch t("take_part");
    t.in(c.shape, x).out(partShape).param("dim", c.dim);
    t.param("balanced", 1).param("axis", 2);
    setCp(t, r, c.parts);
    t.run();
    gathered.insert(gathered.end(), t.output(0).begin(), t.output(0).end());
  }
  EXPECT_EQ(gathered, want);
  Launch un("unstack_parts");
  un.in(stackedShape(), gathered).out(c.shape).param("dim", c.dim);
  un.param("balanced", 1);
  un.run(&testPool(2));
  EXPECT_EQ(un.output(0), x);

  // Without balanced the same copies move contiguous parts: different
  // elements (a kernel ignoring the parameter fails the tests above).
  Launch plain("stack_parts");
  plain.in(c.shape, x).out(stackedShape()).param("dim", c.dim);
  plain.run();
  EXPECT_NE(plain.output(0), want);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BalancedLayout,
                         ::testing::Values(LayoutCase{{4, 24, 6}, 1, 2},
                                           LayoutCase{{4, 24, 6}, 1, 4},
                                           LayoutCase{{3, 2, 16, 5}, 2, 4},
                                           LayoutCase{{3, 2, 16, 5}, 2, 2},
                                           LayoutCase{{3, 8}, 1, 4},
                                           LayoutCase{{2, 3, 12}, 2, 3}));

// --- RoPE
// --------------------------------------------------------------------------

TEST(CpRope, RotatesByThePositionsInTheWholeSequence) {
  const int64_t b = 2, s = 48, h = 2, dh = 8, w = h * dh;
  const std::vector<float> x = randomVector(b * s * w, 61);
  for (const char *kernel : {"rope", "rope_grad_input"}) {
    Launch whole(kernel);
    whole.in({b, s, w}, x).out({b, s, w}).param("num_heads", h);
    whole.paramF("theta", 10000.0);
    whole.run();
    for (int64_t p : {2, 4})
      for (int64_t r = 0; r < p; ++r) {
        const std::vector<int64_t> pos = positionsOf(r, p, s);
        const int64_t l = s / p;
        Launch part(kernel);
        part.in({b, l, w}, rowsAt(x, b, s, w, pos)).out({b, l, w});
        part.param("num_heads", h).paramF("theta", 10000.0).param("cp", 1);
        setCp(part, r, p);
        part.run(&testPool(2));
        EXPECT_EQ(part.output(0), rowsAt(whole.output(0), b, s, w, pos))
            << kernel << ", " << rankName(r, p);
      }
  }
}

TEST(CpRope, FusedLinearRopeRotatesByTheWholePositions) {
  const int64_t b = 2, s = 32, k = 6, h = 2, dh = 4, m = h * dh;
  const std::vector<float> x = randomVector(b * s * k, 62);
  const std::vector<float> wt = randomVector(m * k, 63);
  const std::vector<float> bias = randomVector(m, 64);
  const std::vector<float> dy = randomVector(b * s * m, 65);
  Launch whole("fused_linear_rope");
  whole.in({b, s, k}, x).in({m, k}, wt).in({m}, bias).out({b, s, m});
  whole.param("num_heads", h).paramF("theta", 500.0);
  whole.run();
  Launch wholeGrad("fused_linear_rope_grad_input");
  wholeGrad.in({b, s, m}, dy).in({m, k}, wt).out({b, s, k}).out({b, s, m});
  wholeGrad.param("num_heads", h).paramF("theta", 500.0);
  wholeGrad.run();
  for (int64_t p : {2, 4})
    for (int64_t r = 0; r < p; ++r) {
      const std::vector<int64_t> pos = positionsOf(r, p, s);
      const int64_t l = s / p;
      const std::string name = rankName(r, p);
      Launch f("fused_linear_rope");
      f.in({b, l, k}, rowsAt(x, b, s, k, pos)).in({m, k}, wt).in({m}, bias);
      f.out({b, l, m}).param("num_heads", h).paramF("theta", 500.0);
      f.param("cp", 1);
      setCp(f, r, p);
      f.run(&testPool(2));
      // The GEMM of fewer rows may sum in another order: within rounding.
      expectClose(f.output(0), rowsAt(whole.output(0), b, s, m, pos), 1e-6,
                  name + ", y");
      Launch g("fused_linear_rope_grad_input");
      g.in({b, l, m}, rowsAt(dy, b, s, m, pos)).in({m, k}, wt);
      g.out({b, l, k}).out({b, l, m}).param("num_heads", h);
      g.paramF("theta", 500.0).param("cp", 1);
      setCp(g, r, p);
      g.run(&testPool(2));
      expectClose(g.output(0), rowsAt(wholeGrad.output(0), b, s, k, pos), 1e-6,
                  name + ", dx");
      // The rotation alone is the rope kernels': exact.
      EXPECT_EQ(g.output(1), rowsAt(wholeGrad.output(1), b, s, m, pos))
          << name << ", dlinear";
    }
}

// --- dropout draws
// -------------------------------------------------------------

const std::vector<int64_t> kAct = {4, 48, 160};

void setDraws(Launch &l) {
  l.paramF("p", 0.3).param("rng_offset", 9);
  l.context().seed = 1234;
  l.context().step = 6;
  l.microBatch() = 3;
}

// The elements of the whole activation [B, S, H] that CP rank `cr` of `cp`
// holds along `dim`, and of those TP rank `tr` of `tp`'s contiguous part.
std::vector<float> cpTpPart(const std::vector<float> &x, int64_t dim,
                            int64_t cr, int64_t cp, int64_t tr, int64_t tp) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= kAct[i];
  for (size_t i = dim + 1; i < kAct.size(); ++i)
    inner *= kAct[i];
  const std::vector<int64_t> all = positionsOf(cr, cp, kAct[dim]);
  const int64_t l = static_cast<int64_t>(all.size()) / tp;
  const std::vector<int64_t> mine(all.begin() + tr * l,
                                  all.begin() + (tr + 1) * l);
  return rowsAt(x, outer, kAct[dim], inner, mine);
}

struct DrawCase {
  const char *kernel;
  int64_t cp, tp;
};

void PrintTo(const DrawCase &c, std::ostream *os) {
  *os << c.kernel << ", CP " << c.cp << ", TP " << c.tp;
}

class CpDraws : public ::testing::TestWithParam<DrawCase> {
protected:
  DrawCase c = GetParam();
  const std::string k = c.kernel;
  const bool elementwise = k == "dropout" || k == "dropout_grad_input";
  const bool norm = !elementwise && k != "fused_bias_dropout_add";
  const bool layer = k == "fused_add_layer_norm";
  const int64_t h = kAct.back();
  std::vector<float> a = randomVector(numelOf(kAct), 71);
  std::vector<float> b = randomVector(numelOf(kAct), 72);
  std::vector<float> bias = randomVector(h, 73);
  std::vector<float> gamma = randomVector(h, 74, 0.5f, 1.5f);
  std::vector<float> beta = randomVector(h, 75);

  // The launch over activations of `shape` holding `aa` (and `bb`).
  Launch launch(const std::vector<int64_t> &shape, std::vector<float> aa,
                std::vector<float> bb) const {
    Launch l(k);
    std::vector<int64_t> stats(shape.begin(), shape.end() - 1);
    const int64_t m = shape.back();
    if (elementwise) {
      l.in(shape, aa).out(shape);
    } else if (norm) {
      l.in(shape, aa).in(shape, bb).in({h}, gamma);
      if (layer)
        l.in({h}, beta);
      l.out(shape).out(shape);
      if (layer)
        l.out(stats);
      l.out(stats).paramF("eps", 1e-5);
    } else {
      std::vector<float> bs = bias;
      bs.resize(m);
      l.in(shape, aa).in({m}, bs).in(shape, bb).out(shape);
    }
    setDraws(l);
    return l;
  }
  std::vector<int64_t> dims() const {
    // The fused kernels draw rows of H as one run: cp_dim below H.
    if (elementwise)
      return {1, 2};
    return {1, 0};
  }
};

// Every rank's outputs are its elements of the whole kernel's, bit for bit:
// the draws are the whole tensor's.
TEST_P(CpDraws, RanksDrawTheWholeTensorsMask) {
  Launch w = launch(kAct, a, b);
  w.run(&testPool(2));
  for (int64_t dim : dims()) {
    if (kAct[dim] % (2 * c.cp * c.tp) != 0)
      continue;
    std::vector<int64_t> shape = kAct;
    shape[dim] /= c.cp * c.tp;
    for (int64_t cr = 0; cr < c.cp; ++cr)
      for (int64_t tr = 0; tr < c.tp; ++tr) {
        const std::string name = rankName(cr, c.cp) + ", TP rank " +
                                 std::to_string(tr) + ", cp_dim " +
                                 std::to_string(dim);
        Launch l = launch(shape, cpTpPart(a, dim, cr, c.cp, tr, c.tp),
                          cpTpPart(b, dim, cr, c.cp, tr, c.tp));
        l.param("cp_dim", dim);
        setCp(l, cr, c.cp);
        if (c.tp > 1) {
          l.param("tp_dim", dim);
          l.context().tpRank = tr;
          l.context().tpSize = c.tp;
        }
        l.run(&testPool(3));
        for (int o = 0; o < w.numOutputs(); ++o) {
          if (norm && o >= 2) // statistics: [B, S], rows of the outputs
            continue;
          EXPECT_EQ(l.output(o), cpTpPart(w.output(o), dim, cr, c.cp, tr, c.tp))
              << name << ", output " << o;
        }
      }
  }
  // Without cp_dim the last rank's part draws other masks.
  std::vector<int64_t> shape = kAct;
  shape[1] /= c.cp * c.tp;
  const int64_t last = c.cp - 1;
  Launch plain = launch(shape, cpTpPart(a, 1, last, c.cp, 0, c.tp),
                        cpTpPart(b, 1, last, c.cp, 0, c.tp));
  setCp(plain, last, c.cp);
  plain.run();
  EXPECT_NE(plain.output(0), cpTpPart(w.output(0), 1, last, c.cp, 0, c.tp));
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, CpDraws,
    ::testing::Values(DrawCase{"dropout", 2, 1}, DrawCase{"dropout", 4, 1},
                      DrawCase{"dropout", 2, 2}, DrawCase{"dropout", 4, 3},
                      DrawCase{"dropout_grad_input", 4, 1},
                      DrawCase{"dropout_grad_input", 2, 2},
                      DrawCase{"fused_bias_dropout_add", 2, 1},
                      DrawCase{"fused_bias_dropout_add", 4, 2},
                      DrawCase{"fused_add_layer_norm", 2, 1},
                      DrawCase{"fused_add_layer_norm", 2, 2},
                      DrawCase{"fused_add_rms_norm", 4, 1},
                      DrawCase{"fused_add_rms_norm", 4, 2}));

// cp_dim -1, or cp_dim on a CP axis of one rank: the kernel of old.
TEST(CpDraws, WholeTensorsDrawAsWithoutTheParameter) {
  const std::vector<float> x = randomVector(numelOf(kAct), 76);
  Launch plain("dropout");
  plain.in(kAct, x).out(kAct);
  setDraws(plain);
  plain.run(&testPool(3));
  for (int64_t dim : {-1, 0, 1, 2}) {
    Launch l("dropout");
    l.in(kAct, x).out(kAct).param("cp_dim", dim);
    setDraws(l);
    l.run(&testPool(2));
    EXPECT_EQ(l.output(0), plain.output(0)) << "cp_dim " << dim;
  }
}

// --- checks
// --------------------------------------------------------------------

std::string checkMessage(const Launch &l) {
  absl::Status s = l.check();
  EXPECT_FALSE(s.ok());
  return std::string(s.message());
}

// An attention launch with q [2, sq, 16], k and v [2, sk, 8] (4 heads of 4,
// 2 kv heads) and, when segLen > 0, segment ids [2, segLen].
Launch attnSig(const char *kernel, int64_t sq, int64_t sk, int64_t segLen) {
  Launch l(kernel);
  const bool flash = std::string(kernel) == "flash_attention";
  l.inDesc({2, sq, 16}, DType::kF32).inDesc({2, sk, 8}, DType::kF32);
  l.inDesc({2, sk, 8}, DType::kF32);
  if (segLen > 0)
    l.inDesc({2, segLen}, DType::kI32);
  l.outDesc({2, sq, 16}, DType::kF32);
  if (flash)
    l.outDesc({2, 4, sq}, DType::kF32);
  else
    l.outDesc({2, 4, sq, sk}, DType::kF32);
  l.param("num_heads", 4).param("num_kv_heads", 2).param("causal", 1);
  l.paramF("scale", 0.5);
  return l;
}

TEST(ContextParallelChecks, Attention) {
  for (const char *kernel : {"attention", "flash_attention"}) {
    Launch ag = attnSig(kernel, 6, 24, 24);
    ag.param("cp", 1);
    EXPECT_TRUE(ag.check().ok()) << kernel << ": " << ag.check();
    ag.param("cp_kv_step", -1).param("prefix", 24);
    EXPECT_TRUE(ag.check().ok()) << kernel << ": " << ag.check();
    ag.param("prefix", 25);
    EXPECT_THAT(checkMessage(ag),
                HasSubstr("parameter 'prefix' is 25, expected a value in "
                          "[0, 24]"));

    Launch odd = attnSig(kernel, 5, 10, 0);
    odd.param("cp", 1);
    EXPECT_THAT(checkMessage(odd),
                HasSubstr(std::string(kernel) +
                          ": input 0 (q) has shape [2, 5, 16]; with cp = 1 "
                          "its sequence dimension must be even"));

    Launch notMultiple = attnSig(kernel, 6, 20, 0);
    notMultiple.param("cp", 1);
    EXPECT_THAT(checkMessage(notMultiple),
                HasSubstr("input 1 (k) has shape [2, 20, 8], expected "
                          "[2, P * 6, 8] for an integer P >= 1"));

    Launch segWhole = attnSig(kernel, 6, 24, 6);
    segWhole.param("cp", 1);
    EXPECT_THAT(checkMessage(segWhole),
                HasSubstr("has shape [2, 6], expected [2, 24] ([B, S], the "
                          "whole sequence's)"));

    Launch stepWithoutCp = attnSig(kernel, 6, 6, 0);
    stepWithoutCp.param("cp_kv_step", 1);
    EXPECT_THAT(checkMessage(stepWithoutCp),
                HasSubstr("parameter 'cp_kv_step' is 1, which needs cp = 1"));

    Launch badStep = attnSig(kernel, 6, 6, 0);
    badStep.param("cp", 1).param("cp_kv_step", -2);
    EXPECT_THAT(checkMessage(badStep),
                HasSubstr("parameter 'cp_kv_step' is -2, expected -1"));

    Launch badCp = attnSig(kernel, 6, 6, 0);
    badCp.param("cp", 2);
    EXPECT_THAT(checkMessage(badCp),
                HasSubstr("parameter 'cp' is 2, expected a value in [0, 1]"));
  }

  // Ring steps: k, v as long as q; segment ids of any multiple of Sq.
  for (int64_t n : {1, 2, 4}) {
    Launch ring = attnSig("flash_attention", 6, 6, 6 * n);
    ring.param("cp", 1).param("cp_kv_step", 3).param("prefix", 6 * n);
    EXPECT_TRUE(ring.check().ok()) << n << ": " << ring.check();
  }
  Launch ringPrefix = attnSig("flash_attention", 6, 6, 12);
  ringPrefix.param("cp", 1).param("cp_kv_step", 0).param("prefix", 13);
  EXPECT_THAT(checkMessage(ringPrefix), HasSubstr("'prefix' is 13"));
  Launch ringSeg = attnSig("flash_attention", 6, 6, 9);
  ringSeg.param("cp", 1).param("cp_kv_step", 0);
  EXPECT_THAT(checkMessage(ringSeg),
              HasSubstr("input 3 (segment_ids) has shape [2, 9], expected "
                        "[2, P * 6] for an integer P >= 1"));
  Launch ringKeys = attnSig("flash_attention", 6, 12, 0);
  ringKeys.param("cp", 1).param("cp_kv_step", 1);
  EXPECT_THAT(checkMessage(ringKeys),
              HasSubstr("input 1 (k) has shape [2, 12, 8], expected "
                        "[2, 6, 8] ([B, Sq, num_kv_heads * Dh] with Dh = 4: "
                        "in a ring step"));
  // attention has no lse to merge ring steps with.
  Launch unfusedRing = attnSig("attention", 6, 6, 0);
  unfusedRing.param("cp", 1).param("cp_kv_step", 0);
  EXPECT_THAT(checkMessage(unfusedRing),
              HasSubstr("attention: parameter 'cp_kv_step' must be -1"));

  // The gradients: lse [B, H, Sq], probs [B, H, Sq, Sk].
  Launch grad("attention_grad_input");
  grad.inDesc({2, 6, 16}, DType::kF32).inDesc({2, 6, 16}, DType::kF32);
  grad.inDesc({2, 24, 8}, DType::kF32).inDesc({2, 24, 8}, DType::kF32);
  grad.inDesc({2, 4, 6, 24}, DType::kF32);
  grad.outDesc({2, 6, 16}, DType::kF32).outDesc({2, 24, 8}, DType::kF32);
  grad.outDesc({2, 24, 8}, DType::kF32);
  grad.param("num_heads", 4).param("num_kv_heads", 2).param("causal", 1);
  grad.paramF("scale", 0.5).param("cp", 1);
  EXPECT_TRUE(grad.check().ok()) << grad.check();
  Launch flashGrad("flash_attention_grad_input");
  flashGrad.inDesc({2, 6, 16}, DType::kF32).inDesc({2, 6, 16}, DType::kF32);
  flashGrad.inDesc({2, 6, 8}, DType::kF32).inDesc({2, 6, 8}, DType::kF32);
  flashGrad.inDesc({2, 6, 16}, DType::kF32).inDesc({2, 4, 6}, DType::kF32);
  flashGrad.inDesc({2, 18}, DType::kI32);
  flashGrad.outDesc({2, 6, 16}, DType::kF32).outDesc({2, 6, 8}, DType::kF32);
  flashGrad.outDesc({2, 6, 8}, DType::kF32);
  flashGrad.param("num_heads", 4).param("num_kv_heads", 2).param("causal", 1);
  flashGrad.paramF("scale", 0.5).param("cp", 1).param("cp_kv_step", 2);
  EXPECT_TRUE(flashGrad.check().ok()) << flashGrad.check();
}

TEST(ContextParallelChecks, AttentionMerge) {
  auto make = [](std::vector<int64_t> lseB, DType ob) {
    Launch l("attention_merge");
    l.inDesc({2, 3, 8}, DType::kBF16).inDesc({2, 2, 3}, DType::kF32);
    l.inDesc({2, 3, 8}, ob).inDesc(std::move(lseB), DType::kF32);
    l.outDesc({2, 3, 8}, DType::kBF16).outDesc({2, 2, 3}, DType::kF32);
    l.param("num_heads", 2);
    return l;
  };
  Launch ok = make({2, 2, 3}, DType::kBF16);
  EXPECT_TRUE(ok.check().ok()) << ok.check();
  Launch shape = make({2, 3, 2}, DType::kBF16);
  EXPECT_THAT(checkMessage(shape),
              HasSubstr("attention_merge: input 3 (lse_b) has shape "
                        "[2, 3, 2], expected [2, 2, 3] ([B, H, S])"));
  Launch dtype = make({2, 2, 3}, DType::kF32);
  EXPECT_THAT(checkMessage(dtype),
              HasSubstr("input 2 (o_b) has dtype f32, expected bf16"));
  Launch heads = make({2, 2, 3}, DType::kBF16);
  heads.param("num_heads", 3);
  EXPECT_THAT(checkMessage(heads), HasSubstr("not a multiple of num_heads"));
}

TEST(ContextParallelChecks, LayoutCopies) {
  Launch take("take_part");
  take.inDesc({2, 12, 3}, DType::kF32).outDesc({2, 6, 3}, DType::kF32);
  take.param("dim", 1).param("balanced", 1).param("axis", 2);
  EXPECT_TRUE(take.check().ok()) << take.check();
  take.param("axis", 3);
  EXPECT_THAT(checkMessage(take),
              HasSubstr("parameter 'axis' is 3, expected a value in [1, 2]"));
  Launch oddTake("take_part");
  oddTake.inDesc({2, 12, 3}, DType::kF32).outDesc({2, 3, 3}, DType::kF32);
  oddTake.param("dim", 1).param("balanced", 1);
  EXPECT_THAT(checkMessage(oddTake),
              HasSubstr("take_part: output 0 (y) has shape [2, 3, 3]; with "
                        "balanced = 1 each part holds two halves of equal "
                        "length (chunks k and 2P - 1 - k of dimension 1), so "
                        "its length 3 must be even"));
  oddTake.param("balanced", 0);
  EXPECT_TRUE(oddTake.check().ok()) << oddTake.check();
  Launch oddStack("stack_parts");
  oddStack.inDesc({2, 6, 5}, DType::kBF16).outDesc({4, 3, 5}, DType::kBF16);
  oddStack.param("dim", 1).param("balanced", 1);
  EXPECT_THAT(checkMessage(oddStack),
              HasSubstr("output 0 (y) has shape [4, 3, 5]; with balanced = 1"));
  Launch oddUnstack("unstack_parts");
  oddUnstack.inDesc({4, 3, 5}, DType::kI32).outDesc({2, 6, 5}, DType::kI32);
  oddUnstack.param("dim", 1).param("balanced", 1);
  EXPECT_THAT(checkMessage(oddUnstack),
              HasSubstr("input 0 (x) has shape [4, 3, 5]; with balanced = 1"));
  Launch badBalanced("stack_parts");
  badBalanced.inDesc({2, 8, 5}, DType::kF32).outDesc({4, 4, 5}, DType::kF32);
  badBalanced.param("dim", 1).param("balanced", 2);
  EXPECT_THAT(checkMessage(badBalanced),
              HasSubstr("parameter 'balanced' is 2, expected a value in "
                        "[0, 1]"));
}

TEST(ContextParallelChecks, RopeAndDraws) {
  Launch rope("rope");
  rope.inDesc({2, 5, 8}, DType::kF32).outDesc({2, 5, 8}, DType::kF32);
  rope.param("num_heads", 2).paramF("theta", 1e4);
  EXPECT_TRUE(rope.check().ok()) << rope.check();
  rope.param("cp", 1);
  EXPECT_THAT(checkMessage(rope),
              HasSubstr("rope: input 0 (x) has shape [2, 5, 8]; with cp = 1 "
                        "its sequence dimension must be even"));
  Launch fused("fused_linear_rope");
  fused.inDesc({2, 5, 4}, DType::kF32).inDesc({8, 4}, DType::kF32);
  fused.outDesc({2, 5, 8}, DType::kF32);
  fused.param("num_heads", 2).paramF("theta", 1e4).param("cp", 1);
  EXPECT_THAT(checkMessage(fused), HasSubstr("with cp = 1"));

  Launch d("dropout");
  d.inDesc({2, 4, 6}, DType::kF32).outDesc({2, 4, 6}, DType::kF32);
  d.paramF("p", 0.1).param("rng_offset", 0);
  for (int64_t dim : {-1, 0, 1, 2}) {
    d.param("cp_dim", dim);
    EXPECT_TRUE(d.check().ok()) << dim << ": " << d.check();
  }
  d.param("cp_dim", 3);
  EXPECT_THAT(checkMessage(d),
              HasSubstr("dropout: parameter 'cp_dim' is 3, expected -1 or a "
                        "dimension of input 0 (x) (rank 3) below 3"));
  d.param("cp_dim", 1).param("tp_dim", 2);
  EXPECT_THAT(checkMessage(d),
              HasSubstr("parameters 'cp_dim' (1) and 'tp_dim' (2) name "
                        "different dimensions"));
  d.param("tp_dim", 1);
  EXPECT_TRUE(d.check().ok()) << d.check();
  Launch odd("dropout_grad_input");
  odd.inDesc({2, 5, 6}, DType::kF32).outDesc({2, 5, 6}, DType::kF32);
  odd.paramF("p", 0.1).param("rng_offset", 0).param("cp_dim", 1);
  EXPECT_THAT(checkMessage(odd),
              HasSubstr("input 0 (dy) has shape [2, 5, 6]; with cp_dim = 1 "
                        "that dimension must be even"));
  // With tp_dim too, the local length is a TP part of the CP part: odd is
  // fine.
  odd.param("tp_dim", 1);
  EXPECT_TRUE(odd.check().ok()) << odd.check();

  Launch bda("fused_bias_dropout_add");
  bda.inDesc({2, 4, 6}, DType::kF32).inDesc({6}, DType::kF32);
  bda.inDesc({2, 4, 6}, DType::kF32).outDesc({2, 4, 6}, DType::kF32);
  bda.paramF("p", 0.1).param("rng_offset", 1).param("cp_dim", 1);
  EXPECT_TRUE(bda.check().ok()) << bda.check();
  bda.param("cp_dim", 2);
  EXPECT_THAT(checkMessage(bda),
              HasSubstr("parameter 'cp_dim' is 2, expected -1 or a dimension "
                        "of input 0 (h) (rank 3) below 2: the kernel draws "
                        "each row of the last dimension as one run"));
}

} // namespace
} // namespace braid::test
