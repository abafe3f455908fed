// Hot-expert replication (docs/moe.md, docs/kernels.md): the choice of the
// hot experts, the split of a rank's rows into cold and hot ones and their
// merge, and the grouped weight gradient's order, which lets a replica's
// per-block products, summed in block order, give the owner's bits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/registry/Kernel.h"
#include "test/unit/kernels/KernelHarness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::test {
namespace {

using ::testing::HasSubstr;

// --- raw launches with guarded buffers ------------------------------------------

// An operand in its own bytes, with guard bytes on both sides that a kernel
// writing out of bounds would change.
struct Guarded {
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kByte = 0xAB;
  TensorDesc desc;
  std::vector<uint8_t> bytes;

  Guarded(std::vector<int64_t> shape, DType dtype) {
    desc = TensorDesc{std::move(shape), dtype};
    bytes.assign(2 * kGuard + desc.numel() * dtypeSize(dtype), kByte);
  }
  void *data() { return bytes.data() + kGuard; }
  float *f32() { return static_cast<float *>(data()); }
  uint16_t *bf16() { return static_cast<uint16_t *>(data()); }
  int32_t *i32() { return static_cast<int32_t *>(data()); }
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (bytes[i] != kByte || bytes[bytes.size() - 1 - i] != kByte)
        return false;
    return true;
  }
};

Guarded floats(std::vector<int64_t> shape, DType dtype,
               const std::vector<float> &values) {
  Guarded g(std::move(shape), dtype);
  for (int64_t i = 0; i < g.desc.numel(); ++i) {
    if (dtype == DType::kBF16)
      g.bf16()[i] = roundBf16(values[i]);
    else
      g.f32()[i] = values[i];
  }
  return g;
}

Guarded ids(std::vector<int64_t> shape, const std::vector<int32_t> &values) {
  Guarded g(std::move(shape), DType::kI32);
  std::memcpy(g.data(), values.data(), values.size() * sizeof(int32_t));
  return g;
}

// Checks, then runs the CPU kernel on the operands.
void runGuarded(const std::string &kernel, std::vector<Guarded *> ins,
                std::vector<Guarded *> outs, const KernelParams &params,
                ThreadPool *pool = nullptr) {
  const KernelDef *def = defaultKernelRegistry().find(kernel, Device::kCPU);
  ASSERT_NE(def, nullptr) << kernel;
  std::vector<TensorDesc> inDescs, outDescs;
  std::vector<TensorView> inViews, outViews;
  for (Guarded *g : ins) {
    inDescs.push_back(g->desc);
    inViews.push_back({g->data(), &g->desc});
  }
  for (Guarded *g : outs) {
    outDescs.push_back(g->desc);
    outViews.push_back({g->data(), &g->desc});
  }
  const absl::Status s = def->check(KernelSignature{inDescs, outDescs, &params});
  ASSERT_TRUE(s.ok()) << s;
  KernelContext ctx;
  ctx.pool = pool;
  def->run(KernelArgs{inViews, outViews, &params, &ctx});
}

// --- grouped weight gradient ------------------------------------------------------

// Three senders' blocks of three experts (block g is expert g mod 3's):
// expert 0 has 530, 517 and 700 rows, expert 1 600, 3 and none, expert 2
// none; blocks above 512 rows make OpenBLAS split its reduction. 6 rows
// are spare.
constexpr int kExperts = 3, kSenders = 3, kOut = 4, kIn = 6;
const std::vector<int32_t> kBlockRows = {530, 600, 0, 517, 3, 0, 700, 0, 0};

std::vector<int32_t> blockOffsets() {
  std::vector<int32_t> o = {0};
  for (int32_t n : kBlockRows)
    o.push_back(o.back() + n);
  return o;
}

// P_g of every block, each from a launch of that block alone (one expert,
// accumulate off); empty for an empty block.
std::vector<std::vector<float>> blockProducts(const std::vector<float> &dy,
                                              const std::vector<float> &x) {
  const std::vector<int32_t> o = blockOffsets();
  std::vector<std::vector<float>> p(kBlockRows.size());
  for (size_t g = 0; g < kBlockRows.size(); ++g) {
    const int32_t n = kBlockRows[g];
    if (n == 0)
      continue;
    Launch one("moe_grouped_linear_grad_weight");
    one.in({n, kOut}, std::vector<float>(dy.begin() + o[g] * kOut,
                                         dy.begin() + o[g + 1] * kOut))
        .in({n, kIn}, std::vector<float>(x.begin() + o[g] * kIn,
                                         x.begin() + o[g + 1] * kIn))
        .inIds({2}, {0, n})
        .out({1, kOut, kIn});
    one.run(&testPool(2));
    p[g] = one.output(0);
  }
  return p;
}

// dw[e] = prior[e] + (P_first + P_g + ...) in block order, in f32; an
// expert without rows keeps prior (zeros without accumulate).
std::vector<float> summedInBlockOrder(const std::vector<std::vector<float>> &p,
                                      const std::vector<float> &prior,
                                      bool accumulate) {
  const int size = kOut * kIn;
  std::vector<float> dw(kExperts * size);
  for (int e = 0; e < kExperts; ++e) {
    std::vector<float> q;
    for (size_t g = e; g < p.size(); g += kExperts) {
      if (p[g].empty())
        continue;
      if (q.empty()) {
        q = p[g];
        continue;
      }
      for (int i = 0; i < size; ++i)
        q[i] += p[g][i];
    }
    for (int i = 0; i < size; ++i) {
      const float old = accumulate ? prior[e * size + i] : 0.0f;
      dw[e * size + i] = q.empty() ? old : (accumulate ? old + q[i] : q[i]);
    }
  }
  return dw;
}

void expectSameBits(const std::vector<float> &got,
                    const std::vector<float> &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)),
            0)
      << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << what << " element " << i;
}

TEST(MoeReplicateGradWeight, SumsSingleBlockProductsInBlockOrder) {
  const std::vector<int32_t> o = blockOffsets();
  const int rows = o.back() + 6;
  const auto dy = randomVector(int64_t{rows} * kOut, 11);
  const auto x = randomVector(int64_t{rows} * kIn, 12);
  const auto prior = randomVector(kExperts * kOut * kIn, 13);
  const auto products = blockProducts(dy, x);
  for (const bool accumulate : {true, false}) {
    Launch all("moe_grouped_linear_grad_weight");
    all.in({rows, kOut}, dy).in({rows, kIn}, x)
        .inIds({int64_t(o.size())}, o)
        .out({kExperts, kOut, kIn}, prior)
        .param("accumulate", accumulate ? 1 : 0);
    all.run(&testPool(3));
    expectSameBits(all.output(0), summedInBlockOrder(products, prior, accumulate),
                   accumulate ? "accumulate" : "overwrite");
    expectThreadInvariant(all);
  }
  // The sum is dy^T x up to f32 rounding.
  std::vector<double> want(kExperts * kOut * kIn, 0.0);
  for (size_t g = 0; g < kBlockRows.size(); ++g)
    for (int r = o[g]; r < o[g + 1]; ++r)
      for (int j = 0; j < kOut; ++j)
        for (int c = 0; c < kIn; ++c)
          want[(g % kExperts * kOut + j) * kIn + c] +=
              double{dy[r * kOut + j]} * x[r * kIn + c];
  Launch all("moe_grouped_linear_grad_weight");
  all.in({rows, kOut}, dy).in({rows, kIn}, x).inIds({int64_t(o.size())}, o)
      .out({kExperts, kOut, kIn});
  all.run();
  expectNear(all.output(0), want, 1e-5, 1e-3, "dw");
}

// bf16 rows with an f32 dw (a BF16 plan's): the same order; with a bf16 dw,
// the f32 sum rounded once.
TEST(MoeReplicateGradWeight, Bf16RowsSumInBlockOrderAndRoundOnce) {
  const std::vector<int32_t> o = blockOffsets();
  const int rows = o.back() + 6;
  const auto dyValues = randomVector(int64_t{rows} * kOut, 21);
  const auto xValues = randomVector(int64_t{rows} * kIn, 22);
  const auto prior = randomVector(kExperts * kOut * kIn, 23);
  const int size = kOut * kIn;
  std::vector<std::vector<float>> p(kBlockRows.size());
  for (size_t g = 0; g < kBlockRows.size(); ++g) {
    const int32_t n = kBlockRows[g];
    if (n == 0)
      continue;
    Guarded dy = floats({n, kOut}, DType::kBF16,
                        std::vector<float>(dyValues.begin() + o[g] * kOut,
                                           dyValues.end()));
    Guarded x = floats({n, kIn}, DType::kBF16,
                       std::vector<float>(xValues.begin() + o[g] * kIn,
                                          xValues.end()));
    Guarded offsets = ids({2}, {0, n});
    Guarded dw({1, kOut, kIn}, DType::kF32);
    runGuarded("moe_grouped_linear_grad_weight", {&dy, &x, &offsets}, {&dw},
               KernelParams(), &testPool(2));
    p[g].assign(dw.f32(), dw.f32() + size);
  }
  Guarded dy = floats({rows, kOut}, DType::kBF16, dyValues);
  Guarded x = floats({rows, kIn}, DType::kBF16, xValues);
  Guarded offsets = ids({int64_t(o.size())}, o);
  KernelParams acc;
  acc.setInt("accumulate", 1);

  Guarded dw = floats({kExperts, kOut, kIn}, DType::kF32, prior);
  runGuarded("moe_grouped_linear_grad_weight", {&dy, &x, &offsets}, {&dw}, acc,
             &testPool(3));
  expectSameBits(std::vector<float>(dw.f32(), dw.f32() + kExperts * size),
                 summedInBlockOrder(p, prior, true), "f32 dw");

  // A bf16 dw: widen, add the f32 sum, round once.
  Guarded dwB = floats({kExperts, kOut, kIn}, DType::kBF16, prior);
  std::vector<float> priorB(kExperts * size);
  for (int i = 0; i < kExperts * size; ++i)
    priorB[i] = widenBf16(dwB.bf16()[i]);
  runGuarded("moe_grouped_linear_grad_weight", {&dy, &x, &offsets}, {&dwB},
             acc, &testPool(3));
  const std::vector<float> want = summedInBlockOrder(p, priorB, true);
  for (int i = 0; i < kExperts * size; ++i)
    ASSERT_EQ(dwB.bf16()[i], roundBf16(want[i])) << "element " << i;
  EXPECT_TRUE(dwB.guardsIntact());
}

// The batched gradient (E equal blocks) is the grouped one over those
// blocks.
TEST(MoeReplicateGradWeight, BatchedIsGroupedOverEqualBlocks) {
  constexpr int kSlots = 600;
  const auto dy = randomVector(2 * kSlots * kOut, 31);
  const auto x = randomVector(2 * kSlots * kIn, 32);
  const auto prior = randomVector(2 * kOut * kIn, 33);
  Launch batched("moe_batched_linear_grad_weight");
  batched.in({2 * kSlots, kOut}, dy).in({2 * kSlots, kIn}, x)
      .out({2, kOut, kIn}, prior).param("accumulate", 1);
  batched.run(&testPool(2));
  Launch grouped("moe_grouped_linear_grad_weight");
  grouped.in({2 * kSlots, kOut}, dy).in({2 * kSlots, kIn}, x)
      .inIds({3}, {0, kSlots, 2 * kSlots})
      .out({2, kOut, kIn}, prior).param("accumulate", 1);
  grouped.run(&testPool(3));
  expectSameBits(batched.output(0), grouped.output(0), "batched");
}

// --- moe_hot_experts ---------------------------------------------------------------

struct Choice {
  std::vector<int32_t> hot, cold;
};

Choice choose(const std::vector<int32_t> &counts, int64_t ranks, int64_t slots,
              double threshold, KernelCounters *counters = nullptr) {
  Launch l("moe_hot_experts");
  l.inIds({int64_t(counts.size())}, counts)
      .outIds({slots})
      .outIds({int64_t(counts.size())})
      .param("ranks", ranks)
      .paramF("threshold", threshold);
  l.context().counters = counters;
  l.run();
  return {l.outputIds(0), l.outputIds(1)};
}

// Two ranks of two experts each. Rank 0 sends {5, 1, 0, 0}, rank 1
// {4, 2, 0, 1}: the experts' counts are {9, 3, 0, 1}, rank 0 receives 12
// of 13 rows: 24 > 1.5 * 13, but not > 2 * 13.
const std::vector<int32_t> kSkewed = {5, 1, 0, 0, 4, 2, 0, 1};

TEST(MoeHotExperts, ReplicatesTheHottestAboveTheThreshold) {
  const Choice on = choose(kSkewed, 2, 2, 1.5);
  EXPECT_EQ(on.hot, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(on.cold, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 1}));
  const Choice off = choose(kSkewed, 2, 2, 2.0);
  EXPECT_EQ(off.hot, (std::vector<int32_t>{-1, -1}));
  EXPECT_EQ(off.cold, kSkewed);
}

TEST(MoeHotExperts, TiesGoToTheLowerExpertAndEmptyExpertsAreNeverHot) {
  // Counts {4, 4, 0, 1}: loads 8 and 1 of 9, 16 > 9. More slots than
  // experts with rows on the busy rank: the rest are -1.
  const std::vector<int32_t> tie = {4, 4, 0, 0, 0, 0, 0, 1};
  const Choice c = choose(tie, 2, 5, 1.0);
  EXPECT_EQ(c.hot, (std::vector<int32_t>{0, 1, -1, -1, -1}));
  EXPECT_EQ(c.cold, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 1}));
}

TEST(MoeHotExperts, OnlyTheBusyRanksExpertsAreHot) {
  // Counts {3, 5, 5, 0}: loads 8 and 5 of 13, 16 > 13. Expert 2 has as
  // many rows as expert 1, but its rank receives less than the mean:
  // replicating it would move rows onto rank 0.
  const std::vector<int32_t> counts = {3, 5, 0, 0, 0, 0, 5, 0};
  const Choice c = choose(counts, 2, 5, 1.0);
  EXPECT_EQ(c.hot, (std::vector<int32_t>{1, 0, -1, -1, -1}));
  EXPECT_EQ(c.cold, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 5, 0}));
  // Equal to the threshold is not above it: loads 3 and 1, 6 = 1.5 * 4.
  const Choice equal = choose({2, 1, 1, 0}, 2, 1, 1.5);
  EXPECT_EQ(equal.hot, (std::vector<int32_t>{-1}));
  // No rows at all: off.
  const Choice none = choose(std::vector<int32_t>(8, 0), 2, 2, 1.0);
  EXPECT_EQ(none.hot, (std::vector<int32_t>{-1, -1}));
  // One rank: its load is the mean, never above it.
  EXPECT_EQ(choose({4, 1, 7}, 1, 1, 1.0).hot, (std::vector<int32_t>{-1}));
}

TEST(MoeHotExperts, CountsEachLaunchsChoice) {
  KernelCounters counters;
  choose(kSkewed, 2, 2, 1.5, &counters);
  choose(kSkewed, 2, 2, 2.0, &counters);
  choose(kSkewed, 2, 1, 1.2, &counters);
  EXPECT_EQ(counters.replicationOn.load(), 2);
  EXPECT_EQ(counters.replicationOff.load(), 1);
  EXPECT_EQ(counters.activationsKept.load(), 0);
}

TEST(MoeHotExperts, ChecksRefuseBadGroupsAndThresholds) {
  auto launch = [](int64_t n, int64_t ranks, double threshold,
                   int64_t coldSize) {
    Launch l("moe_hot_experts");
    l.inIds({n}, std::vector<int32_t>(n, 1))
        .outIds({2})
        .outIds({coldSize})
        .param("ranks", ranks)
        .paramF("threshold", threshold);
    return l.check();
  };
  EXPECT_TRUE(launch(8, 2, 1.0, 8).ok());
  EXPECT_THAT(std::string(launch(6, 2, 1.0, 6).message()),
              HasSubstr("E a multiple of G = 2"));
  EXPECT_THAT(std::string(launch(9, 2, 1.0, 9).message()),
              HasSubstr("holds 9 counts"));
  EXPECT_THAT(std::string(launch(8, 2, 0.5, 8).message()),
              HasSubstr("parameter 'threshold' is 0.5"));
  EXPECT_THAT(std::string(launch(8, 2, 1.0, 4).message()),
              HasSubstr("output 1 (cold)"));
  Launch noThreshold("moe_hot_experts");
  noThreshold.inIds({4}, {1, 1, 1, 1}).outIds({1}).outIds({4})
      .param("ranks", 2);
  EXPECT_THAT(std::string(noThreshold.check().message()),
              HasSubstr("missing float parameter 'threshold'"));
}

// --- moe_split_rows and moe_merge_rows -----------------------------------------------

// 12 rows of 3 over 4 experts: expert 0 rows 0-2, expert 1 none, expert 2
// rows 3-6, expert 3 rows 7-8; rows 9-11 spare. Slot 0 takes expert 2,
// slot 1 is unused, slot 2 takes expert 0.
constexpr int kRows = 12, kWidth = 3, kHotRows = 8;
const std::vector<int32_t> kOffsets = {0, 3, 3, 7, 9};
const std::vector<int32_t> kHot = {2, -1, 0};

Launch split(const std::vector<float> &x, const std::vector<int32_t> &offsets,
             const std::vector<int32_t> &hot, int hotRows = kHotRows) {
  Launch l("moe_split_rows");
  l.in({kRows, kWidth}, x)
      .inIds({int64_t(offsets.size())}, offsets)
      .inIds({int64_t(hot.size())}, hot)
      .out({kRows, kWidth})
      .out({hotRows, kWidth})
      .outIds({int64_t(hot.size()) + 1});
  return l;
}

Launch merge(const std::vector<float> &cold, const std::vector<float> &hotRows,
             const std::vector<int32_t> &offsets,
             const std::vector<int32_t> &hot) {
  Launch l("moe_merge_rows");
  l.in({kRows, kWidth}, cold)
      .in({int64_t(hotRows.size()) / kWidth, kWidth}, hotRows)
      .inIds({int64_t(offsets.size())}, offsets)
      .inIds({int64_t(hot.size())}, hot)
      .out({kRows, kWidth});
  return l;
}

// Rows [from, from + n) of x, or zeros for from < 0.
std::vector<float> rowsOf(const std::vector<float> &x, int from, int n) {
  if (from < 0)
    return std::vector<float>(n * kWidth, 0.0f);
  return std::vector<float>(x.begin() + from * kWidth,
                            x.begin() + (from + n) * kWidth);
}

void append(std::vector<float> &to, const std::vector<float> &rows) {
  to.insert(to.end(), rows.begin(), rows.end());
}

TEST(MoeSplitRows, PacksColdAndHotRowsAndMergesThemBack) {
  const auto x = randomVector(kRows * kWidth, 41);
  Launch s = split(x, kOffsets, kHot);
  s.run(&testPool(2));
  expectThreadInvariant(s);
  // Cold: expert 3's rows 7-8, then zeros.
  std::vector<float> cold = rowsOf(x, 7, 2);
  append(cold, rowsOf(x, -1, kRows - 2));
  EXPECT_EQ(s.output(0), cold);
  // Hot: slot 0's expert 2 (rows 3-6), slot 2's expert 0 (rows 0-2), zero.
  std::vector<float> hot = rowsOf(x, 3, 4);
  append(hot, rowsOf(x, 0, 3));
  append(hot, rowsOf(x, -1, 1));
  EXPECT_EQ(s.output(1), hot);
  EXPECT_EQ(s.outputIds(2), (std::vector<int32_t>{0, 4, 4, 7}));

  Launch m = merge(s.output(0), s.output(1), kOffsets, kHot);
  m.run(&testPool(3));
  expectThreadInvariant(m);
  std::vector<float> y = rowsOf(x, 0, 9);
  append(y, rowsOf(x, -1, 3));
  EXPECT_EQ(m.output(0), y);
}

TEST(MoeSplitRows, NoHotExpertLeavesEveryRowCold) {
  const auto x = randomVector(kRows * kWidth, 42);
  Launch s = split(x, kOffsets, {-1, -1});
  s.run();
  std::vector<float> cold = rowsOf(x, 0, 9);
  append(cold, rowsOf(x, -1, 3));
  EXPECT_EQ(s.output(0), cold);
  EXPECT_EQ(s.output(1), rowsOf(x, -1, kHotRows));
  EXPECT_EQ(s.outputIds(2), (std::vector<int32_t>{0, 0, 0}));
}

// <split(x), (a, b)> = <x, merge(a, b)>: each is the other's gradient.
TEST(MoeSplitRows, SplitAndMergeAreAdjoint) {
  const auto x = randomVector(kRows * kWidth, 43);
  const auto a = randomVector(kRows * kWidth, 44);
  const auto b = randomVector(kHotRows * kWidth, 45);
  for (const auto &hot : {kHot, std::vector<int32_t>{3, 0, 0},
                          std::vector<int32_t>{-1, 1}}) {
    Launch s = split(x, kOffsets, hot);
    s.run();
    Launch m = merge(a, b, kOffsets, hot);
    m.run();
    const double lhs = project(a, s.output(0)) + project(b, s.output(1));
    const double rhs = project(x, m.output(0));
    EXPECT_NEAR(lhs, rhs, 1e-12 * (1 + std::abs(rhs)));
  }
}

// Offsets out of order or out of range, hot ids out of range or repeated,
// and too few hot rows: nothing is written outside the outputs, the hot
// offsets stay within the hot rows, and every output row is written.
TEST(MoeSplitRows, MalformedInputsStayInBounds) {
  const std::vector<std::vector<int32_t>> offsetCases = {
      {-5, 20, 2, 100, -1},
      {0, 2147483647, 3, -2147483647 - 1, 12},
      {11, 3, 9, 4, 12},
      {0, 12, 12, 12, 12}};
  const std::vector<std::vector<int32_t>> hotCases = {
      {7, -3, 1, 1, 0}, {2, 2}, {-1}, {0, 1, 2, 3}};
  const auto x = randomVector(kRows * kWidth, 51);
  for (const auto &offsetValues : offsetCases)
    for (const auto &hotValues : hotCases)
      for (const DType dtype : {DType::kF32, DType::kBF16}) {
        const int64_t slots = hotValues.size();
        Guarded xs = floats({kRows, kWidth}, dtype, x);
        Guarded offsets = ids({5}, offsetValues);
        Guarded hot = ids({slots}, hotValues);
        Guarded cold({kRows, kWidth}, dtype), hotRows({2, kWidth}, dtype);
        Guarded hotOffsets({slots + 1}, DType::kI32);
        runGuarded("moe_split_rows", {&xs, &offsets, &hot},
                   {&cold, &hotRows, &hotOffsets}, KernelParams(),
                   &testPool(2));
        for (Guarded *g : {&cold, &hotRows, &hotOffsets})
          EXPECT_TRUE(g->guardsIntact());
        EXPECT_EQ(hotOffsets.i32()[0], 0);
        for (int64_t h = 0; h < slots; ++h) {
          EXPECT_LE(hotOffsets.i32()[h], hotOffsets.i32()[h + 1]);
          EXPECT_LE(hotOffsets.i32()[h + 1], 2);
        }
        Guarded y({kRows, kWidth}, dtype);
        runGuarded("moe_merge_rows", {&cold, &hotRows, &offsets, &hot}, {&y},
                   KernelParams(), &testPool(3));
        EXPECT_TRUE(y.guardsIntact());
        // Every row of every output was written (no guard byte left).
        for (Guarded *g : {&cold, &hotRows, &y}) {
          const int64_t bytes = g->desc.numel() * dtypeSize(dtype);
          const uint8_t *p = static_cast<const uint8_t *>(g->data());
          int64_t untouched = 0;
          for (int64_t i = 0; i + 3 < bytes; i += 4)
            untouched += std::memcmp(p + i, "\xAB\xAB\xAB\xAB", 4) == 0;
          EXPECT_EQ(untouched, 0);
        }
      }
}

TEST(MoeSplitRows, ChecksRefuseMismatchedOperands) {
  const auto x = randomVector(kRows * kWidth, 61);
  Launch narrow("moe_split_rows");
  narrow.in({kRows, kWidth}, x).inIds({5}, kOffsets).inIds({3}, kHot)
      .out({kRows, kWidth}).out({kHotRows, kWidth + 1}).outIds({4});
  EXPECT_THAT(std::string(narrow.check().message()),
              HasSubstr("output 1 (hot_rows) has shape [8, 4]"));
  Launch offsets("moe_split_rows");
  offsets.in({kRows, kWidth}, x).inIds({5}, kOffsets).inIds({3}, kHot)
      .out({kRows, kWidth}).out({kHotRows, kWidth}).outIds({3});
  EXPECT_THAT(std::string(offsets.check().message()),
              HasSubstr("output 2 (hot_offsets) has shape [3], expected [4]"));
  Launch shortCold("moe_merge_rows");
  shortCold.in({kRows - 1, kWidth}, randomVector((kRows - 1) * kWidth, 62))
      .in({kHotRows, kWidth}, randomVector(kHotRows * kWidth, 63))
      .inIds({5}, kOffsets).inIds({3}, kHot).out({kRows, kWidth});
  EXPECT_THAT(std::string(shortCold.check().message()),
              HasSubstr("input 0 (cold)"));
  Launch noExpert("moe_merge_rows");
  noExpert.in({kRows, kWidth}, x)
      .in({kHotRows, kWidth}, randomVector(kHotRows * kWidth, 63))
      .inIds({1}, {0}).inIds({3}, kHot).out({kRows, kWidth});
  EXPECT_THAT(std::string(noExpert.check().message()),
              HasSubstr("input 2 (offsets) has no expert"));
}

} // namespace
} // namespace braid::test
