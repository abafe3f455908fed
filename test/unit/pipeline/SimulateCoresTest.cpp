// The simulator with the ranks sharing cores (CostModel::cores > 0): the
// same times as a core per rank wherever the cores are never
// oversubscribed, step times and spans worked out by hand where they are
// (the ranks overlapping at a fraction of a core each, an FB's halves
// sharing with each other and with the other ranks, transfers taking no
// core), the work-conserving bound of one core, and the same errors in
// both modes.
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

CostModel onCores(int64_t cores) {
  CostModel c;
  c.cores = cores;
  return c;
}

// The sum of every entry's cost: an FB's two halves, f + b + w.
double totalWork(const Schedule &s, const CostModel &c) {
  double work = 0;
  for (int64_t r = 0; r < s.placement.ranks; ++r)
    for (const Entry &e : s.ranks[r]) {
      const StageCosts &k = c.stage(s.placement.stageOf(r, e.chunk));
      switch (e.kind) {
      case Kind::kF:
        work += k.f;
        break;
      case Kind::kB:
        work += k.b;
        break;
      case Kind::kW:
        work += k.w;
        break;
      case Kind::kBW:
        work += k.b + k.w;
        break;
      case Kind::kFB: {
        const StageCosts &b = c.stage(s.placement.stageOf(r, e.bChunk));
        work += k.f + b.b + b.w;
        break;
      }
      }
    }
  return work;
}

void expectSpan(const Simulation &sim, int64_t rank, size_t entry, double start,
                double end) {
  ASSERT_LT(entry, sim.ranks[rank].spans.size());
  const Span &span = sim.ranks[rank].spans[entry];
  EXPECT_NEAR(span.start, start, kEps) << "rank " << rank << " entry " << entry;
  EXPECT_NEAR(span.end, end, kEps) << "rank " << rank << " entry " << entry;
}

// With a core for every rank and no FB, at most P activities run, each at
// full speed: the times are those of a core per rank, exactly, transfers
// and random costs included.
TEST(SimulateCoresTest, EnoughCoresChangeNothing) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> cost(0.2, 2.0);
  for (Family family :
       {Family::kGPipe, Family::kOneFOneB, Family::kZbH1, Family::kInterleaved})
    for (int64_t p : {2, 3, 4, 8})
      for (int64_t m : {p, 2 * p, 4 * p}) {
        const int64_t v = family == Family::kInterleaved ? 2 : 1;
        Schedule s = make(family, p, v, m);
        CostModel own;
        own.transfer = m == p ? 0 : cost(rng) / 4;
        for (int64_t stage = 0; stage < p * v; ++stage)
          own.stages.push_back({cost(rng), cost(rng), cost(rng), 1});
        const Simulation base = run(s, own);
        for (int64_t cores : {p, p + 3}) {
          SCOPED_TRACE(testing::Message() << familyName(family) << " P=" << p
                                          << " M=" << m << " cores " << cores);
          CostModel shared = own;
          shared.cores = cores;
          const Simulation sim = run(s, shared);
          ASSERT_EQ(sim.ranks.size(), base.ranks.size());
          EXPECT_EQ(sim.stepTime, base.stepTime);
          for (size_t r = 0; r < sim.ranks.size(); ++r) {
            const RankResult &a = sim.ranks[r], &b = base.ranks[r];
            ASSERT_EQ(a.spans.size(), b.spans.size());
            for (size_t i = 0; i < a.spans.size(); ++i) {
              EXPECT_EQ(a.spans[i].entry, b.spans[i].entry);
              EXPECT_EQ(a.spans[i].start, b.spans[i].start) << r << " " << i;
              EXPECT_EQ(a.spans[i].end, b.spans[i].end) << r << " " << i;
            }
            EXPECT_NEAR(a.busy, b.busy, kEps);
            EXPECT_NEAR(a.bubble, b.bubble, kEps);
            EXPECT_EQ(a.peakInFlight, b.peakInFlight);
            EXPECT_EQ(a.peakActivationBytes, b.peakActivationBytes);
          }
        }
      }
}

// GPipe on 2 ranks and 1 core, F = 1, BW = 2, no transfer time. Rank 0
// runs F 0 alone over [0, 1]; then its F i and rank 1's F i - 1 share the
// core, 2 apiece, up to 2M - 1; rank 1's F M-1 and BW 0 run alone to
// 2M + 2; then rank 1's BW j and rank 0's BW j - 1 share it, 4 apiece, up to
// 6M - 2; and rank 0's BW M-1 runs alone to 6M. Each rank is busy
// 1 + 2 (M - 1) + 4 (M - 1) + 2 = 6M - 3 of the step: the core never idles,
// yet each rank idles 3 (its entries stretched where they share).
TEST(SimulateCoresTest, GPipeTwoRanksOneCore) {
  for (int64_t m : {1, 2, 3, 8}) {
    SCOPED_TRACE(testing::Message() << "M=" << m);
    const Simulation sim = run(make(Family::kGPipe, 2, 1, m), onCores(1));
    EXPECT_NEAR(sim.stepTime, 6.0 * m, kEps);
    for (const RankResult &r : sim.ranks) {
      EXPECT_NEAR(r.busy, 6.0 * m - 3, kEps);
      EXPECT_NEAR(r.bubble, 3, kEps);
      EXPECT_NEAR(r.bubbleRatio, 3 / (6.0 * m), kEps);
    }
    if (m == 2) {
      // Rank 0: F 0, F 1, BW 0, BW 1; rank 1 the same.
      expectSpan(sim, 0, 0, 0, 1);
      expectSpan(sim, 0, 1, 1, 3);
      expectSpan(sim, 1, 0, 1, 3);
      expectSpan(sim, 1, 1, 3, 4);
      expectSpan(sim, 1, 2, 4, 6);
      expectSpan(sim, 0, 2, 6, 10);
      expectSpan(sim, 1, 3, 6, 10);
      expectSpan(sim, 0, 3, 10, 12);
    }
  }
}

// The same with transfer time 0.5: transfers take no core, so rank 0's
// F 1 runs alone while the activations of mb 0 cross ([1, 1.5]), then at
// half speed beside rank 1's F 0 to 2.5; F 0 ends alone at 3, when the
// activations of mb 1 (sent at 2.5) arrive. Rank 1's F 1 and BW 0 run
// alone to 6; its BW 1 runs alone until the gradient of mb 0 reaches rank
// 0 at 6.5, then beside rank 0's BW 0, ending at 9.5 (1.5 left at half
// speed); BW 0 ends alone at 10, with the gradient of mb 1, and rank 0's
// BW 1 at 12. The core never idles, so the step is still the total work,
// 12.
TEST(SimulateCoresTest, TransfersTakeNoCore) {
  CostModel costs = onCores(1);
  costs.transfer = 0.5;
  const Simulation sim = run(make(Family::kGPipe, 2, 1, 2), costs);
  EXPECT_NEAR(sim.stepTime, 12, kEps);
  expectSpan(sim, 0, 0, 0, 1);
  expectSpan(sim, 0, 1, 1, 2.5);
  expectSpan(sim, 1, 0, 1.5, 3);
  expectSpan(sim, 1, 1, 3, 4);
  expectSpan(sim, 1, 2, 4, 6);
  expectSpan(sim, 1, 3, 6, 9.5);
  expectSpan(sim, 0, 2, 6.5, 10);
  expectSpan(sim, 0, 3, 10, 12);
}

// Gradients may take longer than activations (a measured profile): GPipe
// on 2 ranks, M = 1, unit costs: F 0 [0, 1], 0.5 to rank 1, F [1.5, 2.5],
// BW [2.5, 4.5], 2 back to rank 0, BW [6.5, 8.5]; a core per rank or one
// shared, the step is the same (never two entries at once).
TEST(SimulateCoresTest, GradientsHaveTheirOwnTransferTime) {
  for (int64_t cores : {0, 1}) {
    CostModel costs = onCores(cores);
    costs.transfer = 0.5;
    costs.gradientTransfer = 2;
    const Simulation sim = run(make(Family::kGPipe, 2, 1, 1), costs);
    EXPECT_NEAR(sim.stepTime, 8.5, kEps) << cores << " cores";
    expectSpan(sim, 1, 0, 1.5, 2.5);
    expectSpan(sim, 0, 1, 6.5, 8.5);
    costs.gradientTransfer = -1; // the activations' time
    EXPECT_NEAR(run(make(Family::kGPipe, 2, 1, 1), costs).stepTime, 7, kEps);
  }
}

// 1F1B on 4 ranks and 2 cores, M = 4, F = 1, BW = 2, no transfer time.
// The fill runs 1, 2, 3 then 4 forwards at once: F 0 of rank 0 over
// [0, 1], the next wave over [1, 2], three at 2/3 over [2, 3.5], four at
// 1/2 over [3.5, 5.5]. Rank 3's BW 0 then runs alone to 7.5, and from
// there the backwards climb the pipeline with two to four entries at a
// time: rank 1's BW 0 over [9.5, 12.5] (three at 2/3, then 1 left), rank
// 0's BW 0 over [12.5, 16.5] (four at 1/2, then three), and the drain:
// rank 2's BW 3 over [21, 23], rank 1's over [23, 25], rank 0's over
// [25, 27]. The step, 27, is more than a core per rank's 3 (M + P - 1) =
// 21 and than the work over the cores, 48 / 2 = 24.
TEST(SimulateCoresTest, OneFOneBFourRanksTwoCores) {
  const Schedule s = make(Family::kOneFOneB, 4, 1, 4);
  const Simulation sim = run(s, onCores(2));
  EXPECT_NEAR(sim.stepTime, 27, kEps);
  expectSpan(sim, 0, 0, 0, 1);       // F 0
  expectSpan(sim, 1, 0, 1, 2);       // F 0
  expectSpan(sim, 2, 0, 2, 3.5);     // F 0
  expectSpan(sim, 3, 0, 3.5, 5.5);   // F 0
  expectSpan(sim, 3, 1, 5.5, 7.5);   // BW 0
  expectSpan(sim, 2, 2, 7.5, 9.5);   // BW 0
  expectSpan(sim, 1, 3, 9.5, 12.5);  // BW 0, after F 2
  expectSpan(sim, 0, 4, 12.5, 16.5); // BW 0, after F 3
  expectSpan(sim, 2, 7, 21, 23);     // BW 3
  expectSpan(sim, 1, 7, 23, 25);     // BW 3
  expectSpan(sim, 0, 7, 25, 27);     // BW 3

  // More micro-batches: never shorter than either bound.
  for (int64_t m : {4, 8, 16, 32}) {
    SCOPED_TRACE(testing::Message() << "M=" << m);
    const Schedule big = make(Family::kOneFOneB, 4, 1, m);
    const double shared = run(big, onCores(2)).stepTime;
    EXPECT_GE(shared, run(big, CostModel{}).stepTime - kEps);
    EXPECT_GE(shared, totalWork(big, CostModel{}) / 2 - kEps);
  }
}

// On one core and with no transfer time something always runs until the
// step is over (a stream that cannot run waits for one that can), at the
// core's full speed: the step is the total work, for every family, FB
// pairs counted as both halves.
TEST(SimulateCoresTest, OneCoreStepIsTheTotalWork) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> cost(0.2, 2.0);
  for (Family family : {Family::kGPipe, Family::kOneFOneB, Family::kZbH1,
                        Family::kInterleaved, Family::kDualPipeV})
    for (int64_t p : {2, 4}) {
      const int64_t v = family == Family::kInterleaved ? 2 : 1;
      const Schedule s = make(family, p, v, 2 * p);
      CostModel c = onCores(1);
      c.fbShare = 0.5; // ignored on shared cores
      for (int64_t stage = 0; stage < s.placement.stages(); ++stage)
        c.stages.push_back({cost(rng), cost(rng), cost(rng), 0});
      SCOPED_TRACE(testing::Message() << familyName(family) << " P=" << p);
      const Simulation sim = run(s, c);
      const double work = totalWork(s, c);
      EXPECT_NEAR(sim.stepTime, work, kEps * work);
      double busy = 0;
      for (const RankResult &r : sim.ranks) {
        EXPECT_NEAR(r.bubble, sim.stepTime - r.busy, kEps);
        busy += r.busy;
      }
      // Entries overlap, so the ranks are busy more than the step.
      EXPECT_GT(busy, sim.stepTime);
    }
}

// With a core for each half of every FB (2P), each FB takes max(f, b + w):
// DualPipeV runs as with a core per rank and fbShare = 2/3 of f + bw = 3.
TEST(SimulateCoresTest, DualPipeVWithCoresToSpare) {
  for (int64_t p : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "P=" << p);
    const Schedule s = make(Family::kDualPipeV, p, 1, 2 * p + 2);
    CostModel own;
    own.fbShare = 2.0 / 3;
    const Simulation base = run(s, own);
    const Simulation sim = run(s, onCores(2 * p));
    EXPECT_NEAR(sim.stepTime, base.stepTime, kEps);
    int64_t pairs = 0;
    for (int64_t r = 0; r < p; ++r)
      for (size_t i = 0; i < sim.ranks[r].spans.size(); ++i) {
        const Span &span = sim.ranks[r].spans[i];
        EXPECT_NEAR(span.start, base.ranks[r].spans[i].start, kEps);
        EXPECT_NEAR(span.end, base.ranks[r].spans[i].end, kEps);
        if (span.entry.kind == Kind::kFB) {
          EXPECT_NEAR(span.end - span.start, 2, kEps);
          ++pairs;
        }
      }
    EXPECT_GT(pairs, 0);
  }
}

// One rank with the V's two stages: F 0.0, F 0.1, FB (F 1.0 with BW 0.1),
// F 1.1, BW 0.0, BW 1.1, BW 1.0, unit costs. On one core the FB's halves
// share it: both at half speed to 2, when F is done, then BW's last 1 at
// full speed: 3, no gain. On two cores they run side by side: max(1, 2) =
// 2. fbShare (0.5 here) plays no part.
TEST(SimulateCoresTest, FbHalvesShareTheCores) {
  Schedule v;
  v.family = Family::kDualPipeV;
  v.placement = {1, 2, true};
  v.microBatches = 2;
  v.ranks = {{Entry::f(0, 0), Entry::f(0, 1), Entry::fb(1, 0, 0, 1),
              Entry::f(1, 1), Entry::bw(0, 0), Entry::bw(1, 1),
              Entry::bw(1, 0)}};
  CostModel costs = onCores(1);
  costs.fbShare = 0.5;
  Simulation sim = run(v, costs);
  expectSpan(sim, 0, 2, 2, 5);
  EXPECT_NEAR(sim.stepTime, 1 + 1 + 3 + 1 + 2 + 2 + 2, kEps);
  EXPECT_NEAR(sim.ranks[0].busy, sim.stepTime, kEps);
  costs.cores = 2;
  sim = run(v, costs);
  expectSpan(sim, 0, 2, 2, 4);
  EXPECT_NEAR(sim.stepTime, 1 + 1 + 2 + 1 + 2 + 2 + 2, kEps);
}

// An FB shares the cores machine-wide, with the other ranks' entries too.
// 1F1B on 2 ranks, M = 3, rank 0's BW 0 and F 2 run as one FB (F 2 with
// BW 0); unit costs, 2 cores, no transfer time:
//   rank 0: F 0 [0, 1], F 1 [1, 2], FB waits for the gradient of mb 0;
//   rank 1: F 0 [1, 2], BW 0 [2, 4];
//   at 4 the FB's two halves and rank 1's F 1 share 2 cores, at 2/3 each:
//   F 2's half and F 1 end at 5.5, BW 0's half has 1 left, and beside rank
//   1's BW 1 (from 5.5, at full speed again) ends at 6.5: the FB takes
//   2.5, between max(1, 2) and 1 + 2;
//   rank 1's BW 1 ends at 7.5; then rank 1's F 2 [7.5, 8.5], BW 2
//   [8.5, 10.5], rank 0's BW 1 [7.5, 9.5], BW 2 [10.5, 12.5].
// With 4 cores the FB takes 2, [4, 6], and the step is 12, as with a core
// per rank and no overlap gain (FB = 3): rank 1's F 2 waits for its BW 1
// either way.
TEST(SimulateCoresTest, FbSharesWithOtherRanks) {
  Schedule s = make(Family::kOneFOneB, 2, 1, 3);
  s.ranks[0] = {Entry::f(0, 0), Entry::f(1, 0), Entry::fb(2, 0, 0, 0),
                Entry::bw(1, 0), Entry::bw(2, 0)};
  const Simulation sim = run(s, onCores(2));
  EXPECT_NEAR(sim.stepTime, 12.5, kEps);
  expectSpan(sim, 0, 0, 0, 1);
  expectSpan(sim, 0, 1, 1, 2);
  expectSpan(sim, 0, 2, 4, 6.5);
  expectSpan(sim, 0, 3, 7.5, 9.5);
  expectSpan(sim, 0, 4, 10.5, 12.5);
  expectSpan(sim, 1, 0, 1, 2);
  expectSpan(sim, 1, 1, 2, 4);
  expectSpan(sim, 1, 2, 4, 5.5);
  expectSpan(sim, 1, 3, 5.5, 7.5);
  expectSpan(sim, 1, 4, 7.5, 8.5);
  expectSpan(sim, 1, 5, 8.5, 10.5);
  EXPECT_NEAR(sim.ranks[0].busy, 1 + 1 + 2.5 + 2 + 2, kEps);
  EXPECT_NEAR(sim.ranks[0].bubble, 12.5 - 8.5, kEps);

  const Simulation spare = run(s, onCores(4));
  EXPECT_NEAR(spare.stepTime, 12, kEps);
  expectSpan(spare, 0, 2, 4, 6);
  EXPECT_NEAR(run(s, CostModel{}).stepTime, 12, kEps);
}

std::string failure(const Schedule &s, int64_t cores) {
  absl::StatusOr<Simulation> sim = simulate(s, onCores(cores));
  EXPECT_FALSE(sim.ok());
  return sim.ok() ? std::string() : std::string(sim.status().message());
}

// Which entries run, and which transfer meets which, do not depend on the
// times: a broken order fails the same way, word for word, on any number
// of cores.
TEST(SimulateCoresTest, SameErrorsOnSharedCores) {
  std::vector<Schedule> broken;
  {
    Schedule s = make(Family::kOneFOneB, 4, 1, 8);
    std::vector<Entry> &order = s.ranks[1];
    std::iter_swap(std::find(order.begin(), order.end(), Entry::bw(0, 0)),
                   std::find(order.begin(), order.end(), Entry::bw(1, 0)));
    broken.push_back(s);
  }
  {
    Schedule s = make(Family::kGPipe, 2, 1, 2);
    s.ranks[0] = {Entry::f(0, 0), Entry::bw(0, 0), Entry::f(1, 0),
                  Entry::bw(1, 0)};
    broken.push_back(s);
  }
  {
    Schedule s = make(Family::kOneFOneB, 2, 1, 2);
    s.ranks[0].pop_back(); // incomplete
    broken.push_back(s);
  }
  for (const Schedule &s : broken) {
    const std::string own = failure(s, 0);
    EXPECT_FALSE(own.empty());
    for (int64_t cores : {1, 2, 16})
      EXPECT_EQ(failure(s, cores), own) << "cores " << cores;
  }
  EXPECT_TRUE(failure(broken[0], 2).rfind("deadlock: ", 0) == 0);

  // Random swaps of neighbouring entries, deadlocked or not: the same
  // outcome and the same message in both modes.
  std::mt19937 rng(5);
  int deadlocks = 0;
  for (Family family : {Family::kOneFOneB, Family::kZbH1, Family::kDualPipeV})
    for (int trial = 0; trial < 40; ++trial) {
      const int64_t p = 2 + trial % 3;
      Schedule s = make(family, p, 1, 2 * p + 1);
      for (int swaps = 1 + trial % 4; swaps > 0; --swaps) {
        std::vector<Entry> &order = s.ranks[rng() % p];
        const size_t i = rng() % (order.size() - 1);
        std::swap(order[i], order[i + 1]);
      }
      CostModel own;
      own.transfer = 0.25;
      CostModel shared = own;
      shared.cores = 1 + trial % 3;
      const absl::Status a = simulate(s, own).status();
      const absl::Status b = simulate(s, shared).status();
      EXPECT_EQ(a, b) << familyName(family) << " trial " << trial;
      deadlocks += std::string(a.message()).rfind("deadlock: ", 0) == 0;
    }
  EXPECT_GT(deadlocks, 10);
}

TEST(SimulateCoresTest, NegativeCores) {
  EXPECT_EQ(
      simulate(make(Family::kGPipe, 2, 1, 2), onCores(-1)).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// Shared cores keep the simulator fast on the largest schedules: P = 16,
// V = 2, M = 128 (8192 entries) on 4 cores.
TEST(SimulateCoresTest, LargeScheduleIsFast) {
  const Schedule s = make(Family::kInterleaved, 16, 2, 128);
  CostModel c = onCores(4);
  c.stages.assign(s.placement.stages(), StageCosts{0.5, 0.5, 0.5, 0});
  const auto begin = std::chrono::steady_clock::now();
  const Simulation sim = run(s, c);
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - begin)
                        .count();
  EXPECT_GE(sim.stepTime, totalWork(s, c) / 4 - kEps);
  EXPECT_LT(ms, 500.0);
}

} // namespace
} // namespace braid::pipeline
