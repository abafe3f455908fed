// The simulator against the schedule families' closed forms (bubble, peak
// in-flight micro-batches), transfer times worked out by hand, activation
// memory, a slow sweep of the same model on perturbed orders, and the
// errors a broken order gives: an incomplete schedule, or a deadlock naming
// the rank, micro-batch and entry that cannot proceed.
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/pipeline/Generators.h"
#include "passes/pipeline/Simulate.h"
#include "test/unit/pipeline/ScheduleTestUtil.h"

namespace braid::pipeline {
namespace {

using test_util::make;
using test_util::run;

constexpr double kEps = 1e-9;

// Every stage costs the same: f, b, w per chunk.
CostModel uniform(const Schedule &s, double f, double b, double w) {
  CostModel c;
  c.stages.assign(s.placement.stages(), StageCosts{f, b, w, 0});
  return c;
}

// Whether `text` holds each of `parts`, saying which one it lacks.
testing::AssertionResult has(const std::string &text,
                             std::initializer_list<const char *> parts) {
  for (const char *part : parts)
    if (text.find(part) == std::string::npos)
      return testing::AssertionFailure() << "\"" << part << "\" is not in\n"
                                         << text;
  return testing::AssertionSuccess();
}

std::string error(const Schedule &s) {
  absl::Status status = checkSchedule(s);
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

// The pipeline sizes of the closed forms: P in {2, 4, 8}, M in {P, 2P, 4P,
// 8P}.
struct Size {
  int64_t p, m;
};
std::vector<Size> sizes() {
  std::vector<Size> out;
  for (int64_t p : {2, 4, 8})
    for (int64_t k : {1, 2, 4, 8})
      out.push_back({p, k * p});
  return out;
}

// 1F1B: with F = B = W = 1 (BW = 2), every rank idles (P - 1)(F + BW) =
// 3 (P - 1) of a step of 3 (M + P - 1), whatever M.
TEST(SimulateTest, OneFOneBBubbleIsPMinusOneRounds) {
  for (Size z : sizes()) {
    Schedule s = make(Family::kOneFOneB, z.p, 1, z.m);
    Simulation sim = run(s, CostModel{});
    SCOPED_TRACE(testing::Message() << "P=" << z.p << " M=" << z.m);
    EXPECT_NEAR(sim.stepTime, 3.0 * (z.m + z.p - 1), kEps);
    for (const RankResult &r : sim.ranks) {
      EXPECT_NEAR(r.busy, 3.0 * z.m, kEps);
      EXPECT_NEAR(r.bubble, 3.0 * (z.p - 1), kEps);
      EXPECT_NEAR(r.bubbleRatio, double(z.p - 1) / (z.m + z.p - 1), kEps);
    }
  }
}

// 1F1B holds at most P - r micro-batches on rank r (its warm-up plus the
// one in its steady state), and never more than there are: min(P, M) on
// rank 0.
TEST(SimulateTest, OneFOneBPeakInFlight) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {int64_t{1}, int64_t{2}, p, 2 * p, 8 * p}) {
      Simulation sim = run(make(Family::kOneFOneB, p, 1, m), CostModel{});
      SCOPED_TRACE(testing::Message() << "P=" << p << " M=" << m);
      EXPECT_EQ(sim.ranks[0].peakInFlight, std::min(p, m));
      for (int64_t r = 0; r < p; ++r)
        EXPECT_EQ(sim.ranks[r].peakInFlight, std::min(p - r, m));
      EXPECT_NEAR(sim.ranks[0].bubble, 3.0 * (p - 1), kEps);
    }
}

// GPipe fills and drains like 1F1B: the same bubble, but all M
// micro-batches in flight at once.
TEST(SimulateTest, GPipeBubbleEqualsOneFOneB) {
  for (Size z : sizes()) {
    Simulation sim = run(make(Family::kGPipe, z.p, 1, z.m), CostModel{});
    SCOPED_TRACE(testing::Message() << "P=" << z.p << " M=" << z.m);
    for (const RankResult &r : sim.ranks) {
      EXPECT_NEAR(r.bubble, 3.0 * (z.p - 1), kEps);
      EXPECT_NEAR(r.bubbleRatio, double(z.p - 1) / (z.m + z.p - 1), kEps);
      EXPECT_EQ(r.peakInFlight, z.m);
    }
  }
}

// Interleaved with V = 2: the same model cut finer, each chunk costing
// F = B = W = 1/V. The bubble shrinks V-fold, to (P - 1)(F + B + W) / V of
// the whole model's costs, for every M including M = P (where
// Megatron-Core's order runs all forwards first). Rank 0 holds its
// warm-up, 2 (P - 1) + (V - 1) P forwards, plus one: all M V where M = P.
TEST(SimulateTest, InterleavedBubbleShrinksByV) {
  const int64_t v = 2;
  for (Size z : sizes()) {
    Schedule s = make(Family::kInterleaved, z.p, v, z.m);
    Simulation sim = run(s, uniform(s, 1.0 / v, 1.0 / v, 1.0 / v));
    SCOPED_TRACE(testing::Message() << "P=" << z.p << " M=" << z.m);
    EXPECT_NEAR(sim.stepTime, 3.0 * z.m + 3.0 * (z.p - 1) / v, kEps);
    for (const RankResult &r : sim.ranks)
      EXPECT_NEAR(r.bubble, 3.0 * (z.p - 1) / v, kEps);
    const int64_t warmup = 2 * (z.p - 1) + (v - 1) * z.p;
    EXPECT_EQ(sim.ranks[0].peakInFlight, z.m == z.p ? z.m * v : warmup + 1);
  }
}

// ZB-H1 splits the backward into B = 1 and W = 1 and moves W off the
// critical path: the bubble is (P - 1)(F + B - W), that is (P - 1)(F +
// Bfull - 2W) with Bfull = B + W, a third of 1F1B's here; stage 0 holds P
// micro-batches, as in 1F1B.
TEST(SimulateTest, ZbH1Bubble) {
  for (Size z : sizes()) {
    Schedule s = make(Family::kZbH1, z.p, 1, z.m);
    Simulation sim = run(s, CostModel{});
    SCOPED_TRACE(testing::Message() << "P=" << z.p << " M=" << z.m);
    for (const RankResult &r : sim.ranks)
      EXPECT_NEAR(r.bubble, (z.p - 1) * (1.0 + 1.0 - 1.0), kEps);
    EXPECT_EQ(sim.ranks[0].peakInFlight, z.p);
  }
}

// DualPipeV over P ranks is DualPipe over 2P stages cut in half. Its
// bubble is (P - 1)(F&B + Bfull - 3W), F&B being one overlapped FB pair,
// on the ranks with the fewest FB pairs (the last two; the others run
// more pairs and so idle less where a pair costs less than its halves),
// and each rank holds 2P + 1 micro-batch chunks at most: DualPipe's PP + 1
// with PP = 2P stages. (P/2 - 1)(F&B + B - 3W) is DualPipe's own bubble
// over P ranks with two copies of the model; it does not apply here.
TEST(SimulateTest, DualPipeVBubble) {
  for (Size z : sizes()) {
    if (z.m < 2 * z.p)
      continue; // DualPipeV needs 2P micro-batches
    Schedule s = make(Family::kDualPipeV, z.p, 1, z.m);
    SCOPED_TRACE(testing::Message() << "P=" << z.p << " M=" << z.m);
    for (double share : {-1.0, 0.8}) {
      CostModel costs;
      costs.fbShare = share;
      const double fAndB = costs.fbCost(1, 2), bFull = 2, w = 1;
      absl::StatusOr<Simulation> sim = simulate(s, costs);
      ASSERT_TRUE(sim.ok()) << sim.status();
      double worst = 0;
      for (const RankResult &r : sim->ranks) {
        worst = std::max(worst, r.bubble);
        EXPECT_EQ(r.peakInFlight, 2 * z.p + 1);
      }
      EXPECT_NEAR(worst, (z.p - 1) * (fAndB + bFull - 3 * w), kEps)
          << "fbShare " << share;
      if (share < 0) { // no overlap gain: every rank idles the same
        for (const RankResult &r : sim->ranks)
          EXPECT_NEAR(r.bubble, worst, kEps);
      }
    }
  }
}

// Transfers, worked out by hand for P = 2, M = 1 with transfer time t:
// rank 0's F [0, 1], its activations reach rank 1 at 1 + t; rank 1's F and
// BW run [1 + t, 4 + t]; the gradient is back at 4 + 2t and rank 0's BW ends
// at 6 + 2t.
TEST(SimulateTest, TransferTimeByHand) {
  CostModel costs;
  costs.transfer = 0.25;
  Simulation sim = run(make(Family::kOneFOneB, 2, 1, 1), costs);
  EXPECT_NEAR(sim.stepTime, 6.5, kEps);
  ASSERT_EQ(sim.ranks[1].spans.size(), 2u);
  EXPECT_NEAR(sim.ranks[1].spans[0].start, 1.25, kEps);
  EXPECT_NEAR(sim.ranks[0].spans[1].start, 4.5, kEps);
}

// GPipe streams its forwards and its backwards, so transfers shorter than
// an entry cost only the fill and the drain: 2 (P - 1) t. 1F1B pays more:
// rank 0 holds only P micro-batches, so each further P micro-batches wait
// for one round trip over the 2 (P - 1) links, and for M = P the step is
// (4P - 6) t longer (for P = 2, M = 2: rank 1's F of mb 1 starts after its
// BW of mb 0 at 4 + t, and the last gradient crosses at 7 + 2t).
TEST(SimulateTest, TransferTimeLengthensTheStep) {
  const double t = 0.1;
  CostModel costs;
  costs.transfer = t;
  for (int64_t p : {2, 4, 8}) {
    for (int64_t m : {p, 2 * p, 4 * p}) {
      SCOPED_TRACE(testing::Message() << "P=" << p << " M=" << m);
      const double base = 3.0 * (m + p - 1);
      EXPECT_NEAR(run(make(Family::kGPipe, p, 1, m), costs).stepTime,
                  base + 2 * (p - 1) * t, kEps);
      const double oneFOneB =
          run(make(Family::kOneFOneB, p, 1, m), costs).stepTime;
      EXPECT_NEAR(oneFOneB,
                  base + ((4 * p - 6) + 2 * (p - 1) * (m / p - 1)) * t, kEps);
    }
  }
}

// Activation bytes are held from a forward's start to the end of its W or
// BW (a B keeps them: its W still needs them), and add up per stage.
TEST(SimulateTest, ActivationBytes) {
  // 1F1B: rank r holds P - r micro-batches of its stage.
  Schedule s = make(Family::kOneFOneB, 4, 1, 8);
  CostModel costs;
  for (int64_t stage = 0; stage < 4; ++stage)
    costs.stages.push_back({1, 1, 1, 100.0 * (stage + 1)});
  Simulation sim = run(s, costs);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_NEAR(sim.ranks[r].peakActivationBytes, (4 - r) * 100.0 * (r + 1),
                kEps);

  // One rank with two chunks (stage 0: 1 byte, stage 1: 10): the peak is
  // after F 1.0 (1 + 10 + 1) and again after F 1.1, once B 0.1's W has freed
  // mb 0's stage 1 (1 + 1 + 10).
  Schedule one;
  one.family = Family::kInterleaved;
  one.placement = {1, 2, false};
  one.microBatches = 2;
  one.ranks = {{Entry::f(0, 0), Entry::f(0, 1), Entry::b(0, 1), Entry::f(1, 0),
                Entry::w(0, 1), Entry::f(1, 1), Entry::bw(0, 0),
                Entry::bw(1, 1), Entry::bw(1, 0)}};
  CostModel bytes;
  bytes.stages = {{1, 1, 1, 1}, {1, 1, 1, 10}};
  Simulation mem = run(one, bytes);
  EXPECT_EQ(mem.ranks[0].peakInFlight, 3);
  EXPECT_NEAR(mem.ranks[0].peakActivationBytes, 12, kEps);
  EXPECT_NEAR(mem.ranks[0].bubble, 0, kEps);
}

// An FB pair costs fbCost(f, b + w) and hands its forward over in memory
// to the next stage on the same rank (the V's turn), which a later F uses.
TEST(SimulateTest, OverlappedPairOnOneRank) {
  Schedule v;
  v.family = Family::kDualPipeV;
  v.placement = {1, 2, true};
  v.microBatches = 2;
  v.ranks = {{Entry::f(0, 0), Entry::f(0, 1), Entry::fb(1, 0, 0, 1),
              Entry::f(1, 1), Entry::bw(0, 0), Entry::bw(1, 1),
              Entry::bw(1, 0)}};
  CostModel costs;
  costs.fbShare = 0.5;
  Simulation sim = run(v, costs);
  ASSERT_EQ(sim.ranks[0].spans.size(), 7u);
  EXPECT_NEAR(sim.ranks[0].spans[2].end - sim.ranks[0].spans[2].start, 1.5,
              kEps);
  EXPECT_NEAR(sim.stepTime, 1 + 1 + 1.5 + 1 + 2 + 2 + 2, kEps);
  // F 0.0, F 0.1, then the FB adds mb 1 chunk 0 and frees mb 0 chunk 1.
  EXPECT_EQ(sim.ranks[0].peakInFlight, 3);
}

// Swapping rank 1's backwards of mb 0 and mb 1 in 1F1B: it waits for the
// gradient of mb 1, queued behind rank 2's send of mb 0's, which rank 1
// takes only later.
TEST(SimulateTest, SwappedBackwardsDeadlock) {
  Schedule s = make(Family::kOneFOneB, 4, 1, 8);
  std::vector<Entry> &order = s.ranks[1];
  auto bw0 = std::find(order.begin(), order.end(), Entry::bw(0, 0));
  auto bw1 = std::find(order.begin(), order.end(), Entry::bw(1, 0));
  std::iter_swap(bw0, bw1);
  EXPECT_TRUE(has(error(s), {"deadlock: ",
                             "rank 1 cannot run BW mb 1 chunk 0 (entry 3): "
                             "its receive of the gradient of mb 1 from rank "
                             "2 waits behind rank 2's send of the gradient "
                             "of mb 0",
                             "which rank 1 receives only later, at BW mb 0 "
                             "chunk 0 at entry 5",
                             "rank 2 cannot run F mb 3 chunk 0"}));
  EXPECT_EQ(checkSchedule(s).code(), absl::StatusCode::kFailedPrecondition);
}

// A cycle across ranks: rank 0 runs mb 0's backward before mb 1's forward,
// while rank 1 (the last stage) wants mb 1's forward first.
TEST(SimulateTest, CrossRankCycleDeadlock) {
  Schedule s = make(Family::kGPipe, 2, 1, 2);
  s.ranks[0] = {Entry::f(0, 0), Entry::bw(0, 0), Entry::f(1, 0),
                Entry::bw(1, 0)};
  EXPECT_TRUE(has(error(s), {"rank 0 cannot run BW mb 0 chunk 0 (entry 1): "
                             "its receive of the gradient of mb 0 from rank "
                             "1 waits for rank 1 to run BW mb 0 chunk 0",
                             "rank 1 cannot run F mb 1 chunk 0 (entry 1): "
                             "its receive of the activations of mb 1 from "
                             "rank 0 waits for rank 0 to run F mb 1 chunk 0"}));
}

// On the V's turn the second stage's forward needs the first's output in
// memory; running it first can never proceed.
TEST(SimulateTest, HandOverInMemoryOutOfOrder) {
  Schedule v;
  v.family = Family::kDualPipeV;
  v.placement = {1, 2, true};
  v.microBatches = 1;
  v.ranks = {
      {Entry::f(0, 1), Entry::f(0, 0), Entry::bw(0, 1), Entry::bw(0, 0)}};
  EXPECT_TRUE(
      has(error(v), {"deadlock: rank 0 cannot run F mb 0 chunk 1 (entry "
                     "0): its input, the activations of mb 0, comes in "
                     "memory from its own F mb 0 chunk 0, which it runs "
                     "later, at entry 1"}));
}

TEST(SimulateTest, MissingForward) {
  Schedule s = make(Family::kOneFOneB, 4, 1, 8);
  std::vector<Entry> &order = s.ranks[2];
  order.erase(std::find(order.begin(), order.end(), Entry::f(3, 0)));
  EXPECT_TRUE(has(error(s), {"incomplete schedule: rank 2 runs no "
                             "forward of mb 3 chunk 0, yet runs its "
                             "backward, BW mb 3 chunk 0 at entry"}));
}

TEST(SimulateTest, MissingBackward) {
  Schedule s = make(Family::kOneFOneB, 2, 1, 2);
  s.ranks[0].pop_back();
  EXPECT_TRUE(has(error(s), {"rank 0 runs no backward of mb 1 chunk 0 "
                             "after its forward, F mb 1 chunk 0"}));
}

// The last stage's backward of mb 0 before any forward.
TEST(SimulateTest, BackwardBeforeForward) {
  Schedule s = make(Family::kOneFOneB, 4, 1, 8);
  std::vector<Entry> &order = s.ranks[3];
  order.erase(std::find(order.begin(), order.end(), Entry::bw(0, 0)));
  order.insert(order.begin(), Entry::bw(0, 0));
  EXPECT_TRUE(
      has(error(s), {"rank 3 runs BW mb 0 chunk 0 at entry 0, the backward "
                     "of mb 0 chunk 0, before its forward, F mb 0 chunk 0 "
                     "at entry 1"}));
}

TEST(SimulateTest, DuplicatedBackward) {
  Schedule s = make(Family::kOneFOneB, 2, 1, 2);
  s.ranks[1].push_back(Entry::bw(1, 0));
  EXPECT_TRUE(has(error(s), {"rank 1 runs the backward of mb 1 chunk 0 "
                             "twice: BW mb 1 chunk 0 at entry 3 and BW "
                             "mb 1 chunk 0 at entry 4"}));
}

TEST(SimulateTest, SplitBackwardErrors) {
  Schedule s = make(Family::kOneFOneB, 1, 1, 1);
  s.ranks[0] = {Entry::f(0, 0), Entry::w(0, 0), Entry::b(0, 0)};
  EXPECT_TRUE(has(error(s), {"rank 0 runs W mb 0 chunk 0 at entry 1 "
                             "before its B, B mb 0 chunk 0 at entry 2"}));
  s.ranks[0] = {Entry::f(0, 0), Entry::b(0, 0)};
  EXPECT_TRUE(has(error(s), {"rank 0 runs B mb 0 chunk 0 at entry 1 but "
                             "no W mb 0 chunk 0"}));
  s.ranks[0] = {Entry::f(0, 0), Entry::bw(0, 0), Entry::w(0, 0)};
  EXPECT_TRUE(has(error(s), {"rank 0 runs W mb 0 chunk 0 at entry 2 "
                             "without a B mb 0 chunk 0: its backward, BW "
                             "mb 0 chunk 0 at entry 1, computes the "
                             "weight gradient already"}));
}

TEST(SimulateTest, OutOfRangeEntries) {
  Schedule s = make(Family::kOneFOneB, 2, 1, 2);
  s.ranks[1][0] = Entry::f(5, 0);
  EXPECT_TRUE(has(error(s), {"rank 1 entry 0, F mb 5 chunk 0, is "
                             "outside the 2 micro-batches"}));
  Schedule missingRank = make(Family::kOneFOneB, 2, 1, 2);
  missingRank.ranks.pop_back();
  EXPECT_TRUE(has(error(missingRank), {"orders for 1 ranks"}));
  EXPECT_EQ(checkSchedule(missingRank).code(),
            absl::StatusCode::kInvalidArgument);

  CostModel negative;
  negative.transfer = -1;
  EXPECT_EQ(simulate(make(Family::kGPipe, 2, 1, 2), negative).status().code(),
            absl::StatusCode::kInvalidArgument);
  CostModel tooFew;
  tooFew.stages.resize(1);
  EXPECT_EQ(simulate(make(Family::kGPipe, 2, 1, 2), tooFew).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The same model, computed the slow way, for schedules without FB pairs:
// every cross-rank tensor is a transfer that ends `transfer` after the
// latest of its send (the producer's end), its receive's posting (the start
// of the entry before the consumer) and the transfers before it on the same
// rank pair and kind, in the sender's order and in the receiver's. Times are
// filled in sweep after sweep until nothing changes; what is left unknown
// sits on a cycle: a deadlock.
struct Naive {
  bool deadlock = false;
  std::vector<std::vector<double>> start; // [rank][entry]
};

Naive naiveRun(const Schedule &s, const CostModel &c) {
  const Placement &pl = s.placement;
  const int64_t stages = pl.stages(), last = stages - 1;
  struct Where {
    int64_t rank = -1, pos = -1;
  };
  // Where the forward and the backward of (stage, mb) run.
  std::vector<Where> fwd(stages * s.microBatches), bwd(stages * s.microBatches);
  for (int64_t r = 0; r < pl.ranks; ++r)
    for (int64_t i = 0; i < int64_t(s.ranks[r].size()); ++i) {
      const Entry &e = s.ranks[r][i];
      const int64_t k = pl.stageOf(r, e.chunk) * s.microBatches + e.mb;
      if (e.kind == Kind::kF)
        fwd[k] = {r, i};
      else if (e.kind != Kind::kW)
        bwd[k] = {r, i};
    }
  // A transfer: who sends, who receives, its place in both queues.
  struct Transfer {
    Where from, to;
    bool gradient = false;
    int64_t prevSend = -1, prevRecv = -1;
    double ready = -1;
  };
  std::vector<Transfer> transfers;
  // Per consumer entry, the transfer it waits for (-1: none or in memory).
  std::vector<std::vector<int64_t>> input(pl.ranks);
  for (int64_t r = 0; r < pl.ranks; ++r)
    input[r].assign(s.ranks[r].size(), -1);
  for (int64_t r = 0; r < pl.ranks; ++r)
    for (int64_t i = 0; i < int64_t(s.ranks[r].size()); ++i) {
      const Entry &e = s.ranks[r][i];
      const int64_t stage = pl.stageOf(r, e.chunk);
      Where from;
      const bool gradient = e.kind != Kind::kF;
      if (e.kind == Kind::kF && stage > 0)
        from = fwd[(stage - 1) * s.microBatches + e.mb];
      else if ((e.kind == Kind::kB || e.kind == Kind::kBW) && stage < last)
        from = bwd[(stage + 1) * s.microBatches + e.mb];
      if (from.rank < 0 || from.rank == r)
        continue;
      input[r][i] = transfers.size();
      transfers.push_back({from, {r, i}, gradient});
    }
  // Queue order: per rank pair and kind, by the sender's and the
  // receiver's order.
  for (size_t a = 0; a < transfers.size(); ++a)
    for (size_t b = 0; b < transfers.size(); ++b) {
      Transfer &x = transfers[a];
      const Transfer &y = transfers[b];
      if (a == b || x.from.rank != y.from.rank || x.to.rank != y.to.rank ||
          x.gradient != y.gradient)
        continue;
      if (y.from.pos < x.from.pos &&
          (x.prevSend < 0 || transfers[x.prevSend].from.pos < y.from.pos))
        x.prevSend = b;
      if (y.to.pos < x.to.pos &&
          (x.prevRecv < 0 || transfers[x.prevRecv].to.pos < y.to.pos))
        x.prevRecv = b;
    }
  Naive out;
  std::vector<std::vector<double>> end(pl.ranks);
  for (int64_t r = 0; r < pl.ranks; ++r) {
    out.start.emplace_back(s.ranks[r].size(), -1);
    end[r].assign(s.ranks[r].size(), -1);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (Transfer &t : transfers) {
      const double sent = end[t.from.rank][t.from.pos];
      const double posted =
          t.to.pos == 0 ? 0 : out.start[t.to.rank][t.to.pos - 1];
      const double q1 = t.prevSend < 0 ? 0 : transfers[t.prevSend].ready;
      const double q2 = t.prevRecv < 0 ? 0 : transfers[t.prevRecv].ready;
      if (t.ready >= 0 || sent < 0 || posted < 0 || q1 < 0 || q2 < 0)
        continue;
      t.ready = std::max({sent, posted, q1, q2}) + c.transfer;
      changed = true;
    }
    for (int64_t r = 0; r < pl.ranks; ++r)
      for (int64_t i = 0; i < int64_t(s.ranks[r].size()); ++i) {
        const double prev = i == 0 ? 0 : end[r][i - 1];
        const double in = input[r][i] < 0 ? 0 : transfers[input[r][i]].ready;
        if (out.start[r][i] >= 0 || prev < 0 || in < 0)
          continue;
        const Entry &e = s.ranks[r][i];
        const StageCosts &k = c.stage(pl.stageOf(r, e.chunk));
        const double cost = e.kind == Kind::kF   ? k.f
                            : e.kind == Kind::kB ? k.b
                            : e.kind == Kind::kW ? k.w
                                                 : k.b + k.w;
        out.start[r][i] = std::max(prev, in);
        end[r][i] = out.start[r][i] + cost;
        changed = true;
      }
  }
  for (const std::vector<double> &rank : out.start)
    for (double t : rank)
      out.deadlock |= t < 0;
  return out;
}

// The engine against the naive sweep, on the families' orders with random
// costs and on orders with random swaps of neighbouring entries (those
// that keep every backward after its forward), deadlocked or not.
TEST(SimulateTest, MatchesNaiveSweep) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.2, 2.0);
  int runs = 0, deadlocks = 0;
  for (Family family :
       {Family::kGPipe, Family::kOneFOneB, Family::kInterleaved})
    for (int64_t p : {2, 3, 4})
      for (int64_t m : {p, 2 * p + (family == Family::kInterleaved ? 0 : 1)})
        for (int trial = 0; trial < 16; ++trial) {
          const int64_t v = family == Family::kInterleaved ? 2 : 1;
          Schedule s = make(family, p, v, m);
          CostModel c;
          c.transfer = trial % 3 == 0 ? 0 : cost(rng) / 2;
          for (int64_t stage = 0; stage < p * v; ++stage)
            c.stages.push_back({cost(rng), cost(rng), cost(rng), 0});
          for (int swaps = trial / 4; swaps > 0; --swaps) {
            std::vector<Entry> &order = s.ranks[rng() % p];
            const size_t i = rng() % (order.size() - 1);
            std::swap(order[i], order[i + 1]);
          }
          absl::StatusOr<Simulation> sim = simulate(s, c);
          if (!sim.ok() &&
              !has(std::string(sim.status().message()), {"deadlock: "}))
            continue; // a backward moved before its forward
          SCOPED_TRACE(testing::Message() << familyName(family) << " P=" << p
                                          << " M=" << m << " trial " << trial);
          const Naive naive = naiveRun(s, c);
          ++runs;
          ASSERT_EQ(!sim.ok(), naive.deadlock) << sim.status();
          if (!sim.ok()) {
            ++deadlocks;
            continue;
          }
          for (int64_t r = 0; r < p; ++r)
            for (size_t i = 0; i < s.ranks[r].size(); ++i)
              ASSERT_NEAR(sim->ranks[r].spans[i].start, naive.start[r][i], 1e-9)
                  << "rank " << r << " entry " << i;
        }
  // Both outcomes were exercised.
  EXPECT_GT(deadlocks, 50);
  EXPECT_GT(runs - deadlocks, 50);
}

// The check of a large plan runs the simulator on every candidate, so it
// must stay linear: P = 16, V = 2, M = 256 (16384 entries) in well under a
// second.
TEST(SimulateTest, LargeScheduleIsFast) {
  Schedule s = make(Family::kInterleaved, 16, 2, 256);
  const auto begin = std::chrono::steady_clock::now();
  Simulation sim = run(s, uniform(s, 0.5, 0.5, 0.5));
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - begin)
                        .count();
  EXPECT_NEAR(sim.ranks[0].bubble, 3.0 * 15 / 2, kEps);
  EXPECT_LT(ms, 500.0);
}

} // namespace
} // namespace braid::pipeline
