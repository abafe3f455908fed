// The tensor-parallel parameters of docs/kernels.md, "Tensor parallel": each
// sharded kernel runs once per simulated TP rank (ctx.tpRank, ctx.tpSize),
// and the ranks' results, put together as the whole tensor is split
// (concatenated along the sharded dimension, or summed for partial
// results), must equal the unsharded kernel's on the whole tensors: bit for
// bit where the arithmetic is the same, else within 1e-6 relative.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "test/unit/kernels/KernelHarness.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

// x viewed as [outer, whole, inner]: the part [outer, count, inner] from
// index `begin` of the middle dimension.
template <typename T>
std::vector<T> slice(const std::vector<T> &x, int64_t outer, int64_t whole,
                     int64_t inner, int64_t begin, int64_t count) {
  std::vector<T> out;
  out.reserve(outer * count * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t m = begin; m < begin + count; ++m)
      for (int64_t i = 0; i < inner; ++i)
        out.push_back(x[(o * whole + m) * inner + i]);
  return out;
}

void setRank(Launch &l, int64_t rank, int64_t size) {
  l.context().tpRank = rank;
  l.context().tpSize = size;
}

std::string rankName(int64_t rank, int64_t size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

// --- embedding ---------------------------------------------------------------

constexpr int kVocab = 12, kDim = 5;

struct EmbeddingShard : ::testing::TestWithParam<int> {
  int ranks = GetParam();
  int local = kVocab / ranks;
  std::vector<float> table = randomVector(kVocab * kDim, 1);
  // Every id of the vocabulary, repeats, and ids outside it.
  std::vector<int32_t> ids = {3, 0, 11, 3, 7, -1, 12, 5, 6, 2, 9, 30,
                              1, 4, 8, 10, 3, 11, 6, 0};
  std::vector<float> dy = randomVector(ids.size() * kDim, 2);
  std::vector<float> old = randomVector(kVocab * kDim, 3);
  const int64_t n = static_cast<int64_t>(ids.size());
};

TEST_P(EmbeddingShard, RanksSumToTheWholeLookup) {
  Launch whole("embedding");
  whole.in({kVocab, kDim}, table).inIds({4, 5}, ids).out({4, 5, kDim});
  whole.run();
  std::vector<float> sum(n * kDim, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    Launch l("embedding");
    l.in({local, kDim}, slice(table, 1, kVocab, kDim, r * local, local));
    l.inIds({4, 5}, ids).out({4, 5, kDim}).param("vocab_shard", 1);
    setRank(l, r, ranks);
    l.run(&testPool(2));
    for (int64_t i = 0; i < n * kDim; ++i)
      sum[i] += l.output(0)[i];
  }
  // Each row is one rank's copy plus zeros: exact.
  EXPECT_EQ(sum, whole.output(0));
}

TEST_P(EmbeddingShard, GradTablesStackToTheWholeGradient) {
  for (int accumulate : {0, 1}) {
    Launch whole("embedding_grad_weight");
    whole.in({n, kDim}, dy).inIds({n}, ids);
    whole.out({kVocab, kDim}, old).param("accumulate", accumulate);
    whole.run();
    for (int r = 0; r < ranks; ++r) {
      Launch l("embedding_grad_weight");
      l.in({n, kDim}, dy).inIds({n}, ids);
      l.out({local, kDim}, slice(old, 1, kVocab, kDim, r * local, local));
      l.param("accumulate", accumulate).param("vocab_shard", 1);
      setRank(l, r, ranks);
      l.run(&testPool(3));
      EXPECT_EQ(l.output(0),
                slice(whole.output(0), 1, kVocab, kDim, r * local, local))
          << rankName(r, ranks) << ", accumulate " << accumulate;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EmbeddingShard, ::testing::Values(2, 4));

TEST(EmbeddingShard, ChecksTheParameter) {
  Launch l("embedding");
  l.inDesc({6, 4}, DType::kF32).inDesc({3}, DType::kI32);
  l.outDesc({3, 4}, DType::kF32).param("vocab_shard", 2);
  EXPECT_FALSE(l.check().ok());
  l.param("vocab_shard", 1);
  EXPECT_TRUE(l.check().ok()) << l.check();
  Launch g("embedding_grad_weight");
  g.inDesc({3, 4}, DType::kF32).inDesc({3}, DType::kI32);
  g.outDesc({6, 4}, DType::kF32).param("vocab_shard", -1);
  EXPECT_FALSE(g.check().ok());
}

// --- attention ---------------------------------------------------------------

// The whole tensors: B = 2, S = 7, H = 8 query heads over Hkv = 4 kv heads,
// Dh = 5, causal, dropout 0.3 (so that the draws' element index matters).
constexpr int kB = 2, kS = 7, kH = 8, kHkv = 4, kDh = 5;
constexpr double kDropout = 0.3;

struct HeadCase {
  bool flash;
  int ranks;
};

void PrintTo(const HeadCase &c, std::ostream *os) {
  *os << (c.flash ? "flash_attention" : "attention") << ", " << c.ranks
      << " ranks";
}

class HeadShard : public ::testing::TestWithParam<HeadCase> {
protected:
  HeadCase c = GetParam();
  int h = kH / c.ranks, hkv = kHkv / c.ranks;
  std::vector<float> q = randomVector(kB * kS * kH * kDh, 11, -2, 2);
  std::vector<float> k = randomVector(kB * kS * kHkv * kDh, 12, -2, 2);
  std::vector<float> v = randomVector(kB * kS * kHkv * kDh, 13);
  std::vector<float> dO = randomVector(kB * kS * kH * kDh, 14);

  std::string kernel(bool grad) const {
    return std::string(c.flash ? "flash_attention" : "attention") +
           (grad ? "_grad_input" : "");
  }
  // The launch over `heads` query heads and `kvHeads` kv heads; rank < 0:
  // the whole, unsharded launch.
  void setParams(Launch &l, int heads, int kvHeads, int rank) const {
    l.param("num_heads", heads).param("num_kv_heads", kvHeads);
    l.param("causal", 1).paramF("scale", 0.45);
    l.paramF("dropout", kDropout).param("rng_offset", 5);
    l.context().seed = 77;
    l.context().step = 4;
    l.microBatch() = 2;
    if (rank >= 0) {
      l.param("head_shard", 1);
      setRank(l, rank, c.ranks);
    }
  }
  // Rank r's slice of the heads of x [B, S, n*Dh] (n = heads * ranks).
  std::vector<float> heads(const std::vector<float> &x, int n, int r) const {
    const int part = n / c.ranks;
    return slice(x, kB * kS, n, kDh, r * part, part);
  }
  // Rank r's slice of per-head rows [B, H, rowSize] (probs, lse).
  std::vector<float> headRows(const std::vector<float> &x, int rowSize,
                              int r) const {
    return slice(x, kB, kH, rowSize, r * h, h);
  }
  // The second output: probs [B, H, S, S] or lse [B, H, S].
  int statRow() const { return c.flash ? kS : kS * kS; }
  std::vector<int64_t> statShape(int heads) const {
    if (c.flash)
      return {kB, heads, kS};
    return {kB, heads, kS, kS};
  }

  Launch forward(int heads, int kvHeads, int rank, const std::vector<float> &qq,
                 const std::vector<float> &kk,
                 const std::vector<float> &vv) const {
    Launch l(kernel(false));
    l.in({kB, kS, heads * kDh}, qq).in({kB, kS, kvHeads * kDh}, kk);
    l.in({kB, kS, kvHeads * kDh}, vv);
    l.out({kB, kS, heads * kDh}).out(statShape(heads));
    setParams(l, heads, kvHeads, rank);
    return l;
  }
  // Gradient inputs: do, q, k, v, then o and lse (flash) or probs.
  Launch backward(int heads, int kvHeads, int rank,
                  const std::vector<std::vector<float>> &ins) const {
    Launch l(kernel(true));
    const std::vector<int64_t> qShape = {kB, kS, heads * kDh},
                               kvShape = {kB, kS, kvHeads * kDh};
    l.in(qShape, ins[0]).in(qShape, ins[1]).in(kvShape, ins[2]);
    l.in(kvShape, ins[3]);
    if (c.flash)
      l.in(qShape, ins[4]).in(statShape(heads), ins[5]);
    else
      l.in(statShape(heads), ins[4]);
    l.out(qShape).out(kvShape).out(kvShape);
    setParams(l, heads, kvHeads, rank);
    return l;
  }
};

TEST_P(HeadShard, EachRankComputesItsSliceOfTheHeads) {
  Launch whole = forward(kH, kHkv, -1, q, k, v);
  whole.run(&testPool(2));
  std::vector<std::vector<float>> wholeGradIns = {dO, q, k, v};
  if (c.flash)
    wholeGradIns.push_back(whole.output(0));
  wholeGradIns.push_back(whole.output(1));
  Launch wholeGrad = backward(kH, kHkv, -1, wholeGradIns);
  wholeGrad.run(&testPool(2));

  for (int r = 0; r < c.ranks; ++r) {
    const std::string name = rankName(r, c.ranks);
    Launch fwd = forward(h, hkv, r, heads(q, kH, r), heads(k, kHkv, r),
                         heads(v, kHkv, r));
    fwd.run(&testPool(3));
    // The same arithmetic per head, the same draws: the same bits.
    EXPECT_EQ(fwd.output(0), heads(whole.output(0), kH, r)) << name << ": o";
    EXPECT_EQ(fwd.output(1), headRows(whole.output(1), statRow(), r))
        << name << (c.flash ? ": lse" : ": probs");

    std::vector<std::vector<float>> ins = {heads(dO, kH, r), heads(q, kH, r),
                                           heads(k, kHkv, r),
                                           heads(v, kHkv, r)};
    if (c.flash)
      ins.push_back(heads(whole.output(0), kH, r));
    ins.push_back(headRows(whole.output(1), statRow(), r));
    Launch grad = backward(h, hkv, r, ins);
    grad.run(&testPool(3));
    EXPECT_EQ(grad.output(0), heads(wholeGrad.output(0), kH, r))
        << name << ": dq";
    EXPECT_EQ(grad.output(1), heads(wholeGrad.output(1), kHkv, r))
        << name << ": dk";
    EXPECT_EQ(grad.output(2), heads(wholeGrad.output(2), kHkv, r))
        << name << ": dv";
  }
}

// Without head_shard a rank's slice draws the masks of heads 0 .. h-1: the
// test above would catch a kernel that ignored the parameter.
TEST_P(HeadShard, WithoutTheParameterTheDrawsDiffer) {
  Launch whole = forward(kH, kHkv, -1, q, k, v);
  whole.run();
  const int last = c.ranks - 1;
  Launch unsharded =
      forward(h, hkv, -1, heads(q, kH, last), heads(k, kHkv, last),
              heads(v, kHkv, last));
  unsharded.run();
  EXPECT_NE(unsharded.output(0), heads(whole.output(0), kH, last));
}

INSTANTIATE_TEST_SUITE_P(Ranks, HeadShard,
                         ::testing::Values(HeadCase{false, 2},
                                           HeadCase{false, 4},
                                           HeadCase{true, 2},
                                           HeadCase{true, 4}));

TEST(HeadShard, ChecksTheParameter) {
  for (const char *kernel : {"attention", "flash_attention"}) {
    Launch l(kernel);
    l.inDesc({1, 4, 8}, DType::kF32).inDesc({1, 4, 8}, DType::kF32);
    l.inDesc({1, 4, 8}, DType::kF32).outDesc({1, 4, 8}, DType::kF32);
    if (std::string(kernel) == "attention")
      l.outDesc({1, 2, 4, 4}, DType::kF32);
    else
      l.outDesc({1, 2, 4}, DType::kF32);
    l.param("num_heads", 2).param("num_kv_heads", 2).param("causal", 0);
    l.paramF("scale", 1.0).param("head_shard", 2);
    EXPECT_FALSE(l.check().ok()) << kernel;
    l.param("head_shard", 1);
    EXPECT_TRUE(l.check().ok()) << kernel << ": " << l.check();
  }
}

// --- repeat_kv ---------------------------------------------------------------

// A model of 8 query heads over 2 kv heads (group 4) split over 2, 4 or 8
// ranks: with 4 and 8 a kv head is read by several ranks (replicated kv
// heads, fewer than the ranks).
constexpr int kRkRows = 2 * 3, kRkH = 8, kRkHkv = 2, kRkDh = 3;
constexpr int kGroup = kRkH / kRkHkv;

struct RepeatKvSlice : ::testing::TestWithParam<int> {
  int ranks = GetParam();
  int h = kRkH / ranks;
  std::vector<float> x = randomVector(kRkRows * kRkHkv * kRkDh, 21);
  std::vector<float> dy = randomVector(kRkRows * kRkH * kRkDh, 22);

  void setParams(Launch &l, int r) const {
    l.param("num_heads", h).param("num_kv_heads", kRkHkv);
    l.param("tp_slice", 1).param("group", kGroup);
    setRank(l, r, ranks);
  }
};

TEST_P(RepeatKvSlice, EachRankCopiesItsQueryHeads) {
  Launch whole("repeat_kv");
  whole.in({2, 3, kRkHkv * kRkDh}, x).out({2, 3, kRkH * kRkDh});
  whole.param("num_heads", kRkH).param("num_kv_heads", kRkHkv);
  whole.run();
  for (int r = 0; r < ranks; ++r) {
    Launch l("repeat_kv");
    l.in({2, 3, kRkHkv * kRkDh}, x).out({2, 3, h * kRkDh});
    setParams(l, r);
    l.run(&testPool(2));
    EXPECT_EQ(l.output(0), slice(whole.output(0), kRkRows, kRkH, kRkDh,
                                 r * h, h))
        << rankName(r, ranks);
  }
}

TEST_P(RepeatKvSlice, RanksGradientsSumToTheWholeGradient) {
  Launch whole("repeat_kv_grad_input");
  whole.in({2, 3, kRkH * kRkDh}, dy).out({2, 3, kRkHkv * kRkDh});
  whole.param("num_heads", kRkH).param("num_kv_heads", kRkHkv);
  whole.run();
  std::vector<float> sum(x.size(), 0.0f);
  for (int r = 0; r < ranks; ++r) {
    Launch l("repeat_kv_grad_input");
    l.in({2, 3, h * kRkDh}, slice(dy, kRkRows, kRkH, kRkDh, r * h, h));
    l.out({2, 3, kRkHkv * kRkDh});
    setParams(l, r);
    l.run(&testPool(2));
    // The kv heads this rank's query heads do not read are zero.
    for (int64_t row = 0; row < kRkRows; ++row)
      for (int hk = 0; hk < kRkHkv; ++hk) {
        const bool read =
            hk >= r * h / kGroup && hk <= (r * h + h - 1) / kGroup;
        for (int d = 0; d < kRkDh; ++d)
          if (!read)
            EXPECT_EQ(l.output(0)[(row * kRkHkv + hk) * kRkDh + d], 0.0f)
                << rankName(r, ranks) << ", kv head " << hk;
      }
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += l.output(0)[i];
  }
  if (h >= kGroup) {
    // Every kv head is summed on one rank, in the whole kernel's order.
    EXPECT_EQ(sum, whole.output(0));
  } else {
    std::vector<double> want(whole.output(0).begin(), whole.output(0).end());
    expectNear(sum, want, 1e-6, 1e-6, "sum of the ranks' dx");
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RepeatKvSlice, ::testing::Values(2, 4, 8));

TEST(RepeatKvSlice, ChecksTheParameters) {
  auto launch = [](int h, int hkv) {
    Launch l("repeat_kv");
    l.inDesc({1, 2, hkv * 4}, DType::kF32).outDesc({1, 2, h * 4}, DType::kF32);
    l.param("num_heads", h).param("num_kv_heads", hkv);
    return l;
  };
  Launch sliced = launch(1, 2);
  sliced.param("tp_slice", 1);
  EXPECT_FALSE(sliced.check().ok()) << "group is required with tp_slice";
  sliced.param("group", 4);
  EXPECT_TRUE(sliced.check().ok()) << sliced.check();
  Launch uneven = launch(3, 2);
  uneven.param("tp_slice", 1).param("group", 4);
  EXPECT_FALSE(uneven.check().ok()) << "8 query heads do not split into 3s";
  Launch whole = launch(4, 2);
  EXPECT_TRUE(whole.check().ok()) << whole.check();
  whole.param("group", 3);
  EXPECT_FALSE(whole.check().ok()) << "group must be 4 / 2 without tp_slice";
  whole.param("group", 2);
  EXPECT_TRUE(whole.check().ok()) << whole.check();
  whole.param("tp_slice", 2);
  EXPECT_FALSE(whole.check().ok());
}

// --- cross-entropy -----------------------------------------------------------

constexpr int kCeD0 = 3, kCeD1 = 5, kCeRows = kCeD0 * kCeD1, kCeV = 24;
constexpr double kCeScale = 1.5;

struct VocabParallelCrossEntropy : ::testing::TestWithParam<int> {
  int ranks = GetParam();
  int local = kCeV / ranks;
  // Wide enough that the shards' maxima differ: the combine rescales.
  std::vector<float> logits = randomVector(kCeRows * kCeV, 31, -8, 8);
  std::vector<int32_t> labels = withOutOfRange(randomIds(kCeRows, 32, kCeV));

  // Rows whose label lies in no shard: cross_entropy counts their lse.
  static std::vector<int32_t> withOutOfRange(std::vector<int32_t> l) {
    l[2] = -1;
    l[7] = kCeV;
    l[11] = kCeV + 5;
    return l;
  }
  std::vector<float> shard(const std::vector<float> &x, int r) const {
    return slice(x, kCeRows, kCeV, 1, r * local, local);
  }
  Launch grad(const std::vector<float> &lg, int v,
              const std::vector<float> &lse) const {
    Launch l("cross_entropy_grad_input");
    l.in({kCeD0, kCeD1, v}, lg).inIds({kCeD0, kCeD1}, labels);
    l.in({kCeD0, kCeD1}, lse).out({kCeD0, kCeD1, v});
    l.paramF("scale", kCeScale);
    return l;
  }
  // The ranks' stats stacked along dimension 0, then their combine.
  Launch combine() const {
    std::vector<float> all;
    for (int r = 0; r < ranks; ++r) {
      Launch s("cross_entropy_stats");
      s.in({kCeD0, kCeD1, local}, shard(logits, r));
      s.inIds({kCeD0, kCeD1}, labels).out({kCeD0, kCeD1, 3});
      setRank(s, r, ranks);
      s.run(&testPool(2));
      expectThreadInvariant(s);
      all.insert(all.end(), s.output(0).begin(), s.output(0).end());
    }
    Launch c("cross_entropy_combine");
    c.in({ranks * kCeD0, kCeD1, 3}, all).inIds({kCeD0, kCeD1}, labels);
    c.out({}).out({kCeD0, kCeD1});
    c.run(&testPool(2));
    return c;
  }
};

TEST_P(VocabParallelCrossEntropy, StatsDescribeTheShard) {
  for (int r = 0; r < ranks; ++r) {
    Launch s("cross_entropy_stats");
    s.in({kCeRows, local}, shard(logits, r)).inIds({kCeRows}, labels);
    s.out({kCeRows, 3});
    setRank(s, r, ranks);
    s.run();
    for (int row = 0; row < kCeRows; ++row) {
      const float *x = logits.data() + row * kCeV + r * local;
      float m = x[0];
      for (int j = 1; j < local; ++j)
        m = std::max(m, x[j]);
      double sum = 0;
      for (int j = 0; j < local; ++j)
        sum += std::exp(static_cast<double>(x[j]) - m);
      const int32_t label = labels[row] - r * local;
      const float t = label >= 0 && label < local ? x[label] : 0.0f;
      const float *st = s.output(0).data() + 3 * row;
      EXPECT_EQ(st[0], m) << rankName(r, ranks) << ", row " << row;
      EXPECT_NEAR(st[1], sum, 1e-6 * sum) << rankName(r, ranks);
      EXPECT_EQ(st[2], t) << rankName(r, ranks) << ", row " << row;
    }
  }
}

TEST_P(VocabParallelCrossEntropy, CombineMatchesTheWholeLoss) {
  Launch whole("cross_entropy");
  whole.in({kCeD0, kCeD1, kCeV}, logits).inIds({kCeD0, kCeD1}, labels);
  whole.out({}).out({kCeD0, kCeD1});
  whole.run();
  Launch c = combine();
  expectThreadInvariant(c);
  const std::vector<float> &wantLse = whole.output(1);
  expectNear(c.output(1), std::vector<double>(wantLse.begin(), wantLse.end()),
             1e-6, 0, "lse");
  expectNear(c.output(0), {whole.output(0)[0]}, 1e-6, 0, "loss");
}

TEST_P(VocabParallelCrossEntropy, ShardGradientsConcatenateToTheWhole) {
  const std::vector<float> lse = combine().output(1);
  // From the same lse the arithmetic per element is the same: exact.
  Launch whole = grad(logits, kCeV, lse);
  whole.run();
  std::vector<float> stacked(logits.size());
  for (int r = 0; r < ranks; ++r) {
    Launch l = grad(shard(logits, r), local, lse);
    l.param("vocab_shard", 1);
    setRank(l, r, ranks);
    l.run(&testPool(3));
    for (int row = 0; row < kCeRows; ++row)
      for (int j = 0; j < local; ++j)
        stacked[row * kCeV + r * local + j] = l.output(0)[row * local + j];
  }
  EXPECT_EQ(stacked, whole.output(0));

  // And close to the gradient from cross_entropy's own lse.
  Launch fwd("cross_entropy");
  fwd.in({kCeD0, kCeD1, kCeV}, logits).inIds({kCeD0, kCeD1}, labels);
  fwd.out({}).out({kCeD0, kCeD1});
  fwd.run();
  Launch ref = grad(logits, kCeV, fwd.output(1));
  ref.run();
  expectNear(stacked,
             std::vector<double>(ref.output(0).begin(), ref.output(0).end()),
             1e-5, 1e-8, "dlogits");
}

INSTANTIATE_TEST_SUITE_P(Ranks, VocabParallelCrossEntropy,
                         ::testing::Values(2, 4));

TEST(VocabParallelCrossEntropy, ChecksShapes) {
  Launch stats("cross_entropy_stats");
  stats.inDesc({3, 5, 6}, DType::kF32).inDesc({3, 5}, DType::kI32);
  stats.outDesc({3, 5, 3}, DType::kF32);
  EXPECT_TRUE(stats.check().ok()) << stats.check();
  Launch badStats("cross_entropy_stats");
  badStats.inDesc({3, 5, 6}, DType::kF32).inDesc({3, 5}, DType::kI32);
  badStats.outDesc({3, 5, 2}, DType::kF32);
  EXPECT_FALSE(badStats.check().ok());

  auto combine = [](std::vector<int64_t> stats, std::vector<int64_t> labels,
                    std::vector<int64_t> lse) {
    Launch l("cross_entropy_combine");
    l.inDesc(stats, DType::kF32).inDesc(labels, DType::kI32);
    l.outDesc({}, DType::kF32).outDesc(lse, DType::kF32);
    return l.check();
  };
  EXPECT_TRUE(combine({12, 5, 3}, {3, 5}, {3, 5}).ok());
  EXPECT_TRUE(combine({3, 5, 3}, {3, 5}, {3, 5}).ok()) << "P = 1";
  EXPECT_FALSE(combine({10, 5, 3}, {3, 5}, {3, 5}).ok()) << "P not whole";
  EXPECT_FALSE(combine({12, 4, 3}, {3, 5}, {3, 5}).ok());
  EXPECT_FALSE(combine({12, 5, 2}, {3, 5}, {3, 5}).ok());
  EXPECT_FALSE(combine({12, 5, 3}, {3, 5}, {3, 4}).ok());
  EXPECT_FALSE(combine({3}, {}, {}).ok()) << "labels need a dimension 0";

  Launch g("cross_entropy_grad_input");
  g.inDesc({3, 6}, DType::kF32).inDesc({3}, DType::kI32);
  g.inDesc({3}, DType::kF32).outDesc({3, 6}, DType::kF32);
  g.paramF("scale", 1.0).param("vocab_shard", 2);
  EXPECT_FALSE(g.check().ok());
  g.param("vocab_shard", 1);
  EXPECT_TRUE(g.check().ok()) << g.check();
}

} // namespace
} // namespace braid::test
