// The schedule generators (GPipe, 1F1B, interleaved, ZB-H1, DualPipeV):
// every schedule is complete and ordered, runs without a deadlock, some
// small orders checked by hand, the ZB-H1 bubble and memory claims,
// makeSchedule's errors, and scheduleJson.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/pipeline/Generators.h"
#include "passes/pipeline/Simulate.h"
#include "test/unit/pipeline/ScheduleTestUtil.h"

namespace braid::pipeline {
namespace {

using test_util::make;

// "F0.1" is the forward of micro-batch 0 through chunk 1; "FB3.0/1.1" the
// forward of micro-batch 3, chunk 0, overlapped with the backward of
// micro-batch 1, chunk 1.
std::string orderString(const std::vector<Entry> &order) {
  std::vector<std::string> words;
  for (const Entry &e : order) {
    std::string word = absl::StrCat(kindName(e.kind), e.mb, ".", e.chunk);
    if (e.kind == Kind::kFB)
      absl::StrAppend(&word, "/", e.bMb, ".", e.bChunk);
    words.push_back(word);
  }
  return absl::StrJoin(words, " ");
}

// Every (micro-batch, chunk) of every rank has one forward and one
// backward: a BW, the backward half of an FB, or a B and a later W. A
// chunk's forwards, and its backwards, come in micro-batch order, and each
// backward comes after its own forward.
void expectComplete(const Schedule &s) {
  const int64_t chunks = s.placement.chunks, mbs = s.microBatches;
  ASSERT_EQ(static_cast<int64_t>(s.ranks.size()), s.placement.ranks);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    SCOPED_TRACE(absl::StrCat(familyName(s.family), " rank ", r, ": ",
                              orderString(s.ranks[r])));
    // Position in the order of each (mb, chunk)'s F, backward and W.
    std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> fwd, bwd, w;
    std::vector<int64_t> lastF(chunks, -1), lastB(chunks, -1);
    auto valid = [&](int64_t mb, int64_t chunk) {
      return mb >= 0 && mb < mbs && chunk >= 0 && chunk < chunks;
    };
    auto forward = [&](size_t at, int64_t mb, int64_t chunk) {
      ASSERT_TRUE(valid(mb, chunk)) << "entry " << at;
      EXPECT_EQ(mb, lastF[chunk] + 1) << "forward out of order at " << at;
      lastF[chunk] = mb;
      fwd[{mb, chunk}].push_back(at);
    };
    auto backward = [&](size_t at, int64_t mb, int64_t chunk) {
      ASSERT_TRUE(valid(mb, chunk)) << "entry " << at;
      EXPECT_EQ(mb, lastB[chunk] + 1) << "backward out of order at " << at;
      lastB[chunk] = mb;
      bwd[{mb, chunk}].push_back(at);
    };
    std::map<std::pair<int64_t, int64_t>, bool> split;
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Entry &e = s.ranks[r][i];
      switch (e.kind) {
      case Kind::kF:
        forward(i, e.mb, e.chunk);
        break;
      case Kind::kB:
        split[{e.mb, e.chunk}] = true;
        [[fallthrough]];
      case Kind::kBW:
        backward(i, e.mb, e.chunk);
        break;
      case Kind::kW:
        ASSERT_TRUE(valid(e.mb, e.chunk)) << "entry " << i;
        w[{e.mb, e.chunk}].push_back(i);
        break;
      case Kind::kFB:
        forward(i, e.mb, e.chunk);
        backward(i, e.bMb, e.bChunk);
        break;
      }
    }
    for (int64_t c = 0; c < chunks; ++c) {
      for (int64_t mb = 0; mb < mbs; ++mb) {
        SCOPED_TRACE(absl::StrCat("micro-batch ", mb, " chunk ", c));
        const auto &f = fwd[{mb, c}], &b = bwd[{mb, c}], &ws = w[{mb, c}];
        ASSERT_EQ(f.size(), 1u);
        ASSERT_EQ(b.size(), 1u);
        EXPECT_LT(f[0], b[0]) << "backward before its forward";
        if (!split[{mb, c}]) {
          EXPECT_TRUE(ws.empty()) << "W of a whole backward";
          continue;
        }
        ASSERT_EQ(ws.size(), 1u);
        EXPECT_LT(b[0], ws[0]) << "W before its B";
      }
    }
  }
}

// The order run in the pipeline's model of execution with unit costs (F =
// B = W = 1; passes/pipeline/Simulate.h); a deadlock or an incomplete
// order fails the test.
Simulation unitRun(const Schedule &s) {
  absl::StatusOr<Simulation> sim = simulate(s, CostModel{});
  EXPECT_TRUE(sim.ok()) << familyName(s.family) << ": " << sim.status();
  return sim.ok() ? *sim : Simulation{};
}

struct Case {
  Family family;
  int64_t chunks;
  int64_t ranks, mbs;
};

std::vector<Case> validCases() {
  std::vector<Case> cases;
  for (int64_t p : {1, 2, 3, 4, 5, 8}) {
    for (int64_t m : {1, 2, 3, 4, 7, 8, 12, 16, 17}) {
      cases.push_back({Family::kGPipe, 1, p, m});
      cases.push_back({Family::kOneFOneB, 1, p, m});
      cases.push_back({Family::kZbH1, 1, p, m});
      if (m >= 2 * p)
        cases.push_back({Family::kDualPipeV, 1, p, m});
    }
    for (int64_t v : {2, 3})
      for (int64_t groups : {1, 2, 3})
        cases.push_back({Family::kInterleaved, v, p, groups * p});
  }
  return cases;
}

TEST(Generators, EveryFamilyIsCompleteAndReplays) {
  for (const Case &c : validCases()) {
    SCOPED_TRACE(absl::StrCat(familyName(c.family), " P=", c.ranks,
                              " V=", c.chunks, " M=", c.mbs));
    const Schedule s = make(c.family, c.ranks, c.chunks, c.mbs);
    expectComplete(s);
    EXPECT_EQ(unitRun(s).ranks.size(), static_cast<size_t>(c.ranks));
  }
}

TEST(Generators, GPipeRunsAllForwardsThenAllBackwards) {
  const Schedule s = make(Family::kGPipe, 2, 1, 3);
  for (const auto &order : s.ranks)
    EXPECT_EQ(orderString(order), "F0.0 F1.0 F2.0 BW0.0 BW1.0 BW2.0");
}

TEST(Generators, OneFOneBWarmsUpByDistanceToTheLastRank) {
  const Schedule s = make(Family::kOneFOneB, 2, 1, 3);
  EXPECT_EQ(orderString(s.ranks[0]), "F0.0 F1.0 BW0.0 F2.0 BW1.0 BW2.0");
  EXPECT_EQ(orderString(s.ranks[1]), "F0.0 BW0.0 F1.0 BW1.0 F2.0 BW2.0");
  // More ranks than micro-batches: all forwards, then all backwards.
  const Schedule few = make(Family::kOneFOneB, 4, 1, 2);
  EXPECT_EQ(orderString(few.ranks[0]), "F0.0 F1.0 BW0.0 BW1.0");
}

// Megatron-Core's order for P = 2, V = 2, M = 4: virtual micro-batch k is
// micro-batch (k / 4) * 2 + k % 2 of chunk (k % 4) / 2, the backwards
// visiting the chunks in reverse; rank 0 warms up with 2 (P - 1) + (V - 1)P
// = 4 forwards, rank 1 with 2.
TEST(Generators, InterleavedFollowsMegatronCore) {
  const Schedule s = make(Family::kInterleaved, 2, 2, 4);
  EXPECT_EQ(s.placement.chunks, 2);
  EXPECT_EQ(orderString(s.ranks[0]),
            "F0.0 F1.0 F0.1 F1.1 F2.0 BW0.1 F3.0 BW1.1 F2.1 BW0.0 F3.1 "
            "BW1.0 BW2.1 BW3.1 BW2.0 BW3.0");
  EXPECT_EQ(orderString(s.ranks[1]),
            "F0.0 F1.0 F0.1 BW0.1 F1.1 BW1.1 F2.0 BW0.0 F3.0 BW1.0 F2.1 "
            "BW2.1 F3.1 BW3.1 BW2.0 BW3.0");
  // M = P: every forward first, as Megatron-Core does.
  const Schedule full = make(Family::kInterleaved, 2, 2, 2);
  EXPECT_EQ(orderString(full.ranks[1]),
            "F0.0 F1.0 F0.1 F1.1 BW0.1 BW1.1 BW0.0 BW1.0");
}

// Rank r > 0 splits its first r steady-state backwards and its last ones,
// queueing their W, and runs the oldest W after each late B when that
// leaves r queued; rank 0 never splits and is 1F1B.
//   P = 2, M = 3, rank 1: no warm-up; B0 (W0 queued), BW1, then the last
//   steady backward B2 with the oldest W (W0) after it; W2 at the end.
//   P = 4, M = 8, rank 3: B0, B1, B2 queue their W, BW3 to BW6 are whole,
//   B7 is followed by W0, and W1, W2, W7 end the step.
TEST(Generators, ZbH1DelaysWeightGradientsByRank) {
  const Schedule small = make(Family::kZbH1, 2, 1, 3);
  EXPECT_EQ(orderString(small.ranks[0]), "F0.0 F1.0 BW0.0 F2.0 BW1.0 BW2.0");
  EXPECT_EQ(orderString(small.ranks[1]),
            "F0.0 B0.0 F1.0 BW1.0 F2.0 B2.0 W0.0 W2.0");
  const Schedule s = make(Family::kZbH1, 4, 1, 8);
  EXPECT_EQ(orderString(s.ranks[3]),
            "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 BW3.0 F4.0 BW4.0 F5.0 BW5.0 "
            "F6.0 BW6.0 F7.0 B7.0 W0.0 W1.0 W2.0 W7.0");
  EXPECT_EQ(orderString(s.ranks[1]),
            "F0.0 F1.0 F2.0 B0.0 F3.0 BW1.0 F4.0 BW2.0 F5.0 BW3.0 F6.0 BW4.0 "
            "F7.0 B5.0 W0.0 B6.0 W5.0 B7.0 W6.0 W7.0");
}

// With F = B = W the bubble of every rank is (P - 1)(F + B - W) = P - 1,
// against 1F1B's (P - 1)(F + B + W), once M >= P.
TEST(Generators, ZbH1BubbleIsPMinusOneAtUnitCosts) {
  for (int64_t p : {2, 3, 4, 8}) {
    for (int64_t m : {p, p + 1, 2 * p, 3 * p + 2}) {
      SCOPED_TRACE(absl::StrCat("P=", p, " M=", m));
      const Simulation zb = unitRun(make(Family::kZbH1, p, 1, m));
      const Simulation f1b1 = unitRun(make(Family::kOneFOneB, p, 1, m));
      ASSERT_EQ(zb.ranks.size(), static_cast<size_t>(p));
      ASSERT_EQ(f1b1.ranks.size(), static_cast<size_t>(p));
      for (int64_t r = 0; r < p; ++r) {
        EXPECT_EQ(zb.ranks[r].bubble, p - 1) << "rank " << r;
        EXPECT_EQ(f1b1.ranks[r].bubble, 3 * (p - 1)) << "rank " << r;
      }
    }
  }
}

// The queued W keep their micro-batches alive, but never past 1F1B's peak:
// P on rank 0, and no more than P anywhere.
TEST(Generators, ZbH1HoldsNoMoreMicroBatchesThanOneFOneB) {
  for (int64_t p : {1, 2, 4, 8}) {
    for (int64_t m : {int64_t{1}, int64_t{3}, p, 2 * p + 1}) {
      SCOPED_TRACE(absl::StrCat("P=", p, " M=", m));
      const Simulation sim = unitRun(make(Family::kZbH1, p, 1, m));
      ASSERT_EQ(sim.ranks.size(), static_cast<size_t>(p));
      EXPECT_EQ(sim.ranks[0].peakInFlight, std::min(p, m));
      for (int64_t r = 0; r < p; ++r)
        EXPECT_LE(sim.ranks[r].peakInFlight, p) << "rank " << r;
    }
  }
}

// Traced by hand through DualPipeV.step() for P = 2, M = 4 (each chunk's
// counters start at 0; "FBf/b" is its overlapped forward & backward).
// Rank 0 (first rank, holds stages 0 and 3):
//   1. 2(P - r - 1) = 2 forwards of chunk 0: F0.0 F1.0;
//   2. r + 1 = 1 pair: F2.0 F0.1;
//   3. P - r - 1 = 1 time B chunk 1 split, its W, F chunk 1:
//      B0.1 W0.1 F1.1;
//   4. M - 2P + r + 1 = 1 iteration, not the last rank, so overlapped:
//      FB3.0/1.1 FB2.1/0.0;
//   5. P - r - 1 = 1 time whole B chunk 1, FB(F chunk 1, B chunk 0):
//      BW2.1 FB3.1/1.0;
//   6. r + 1 = 1 pair, middle pair 0, even rank: the chunk 1 backward is
//      whole, the chunk 0 one split: BW3.1 B2.0;
//   7. P - r - 1 = 1 time oldest W, split B chunk 0: W2.0 B3.0;
//   8. r + 1 = 1 W: W3.0.
// Rank 1 (last rank, holds stages 1 and 2):
//   1. none; 2. two pairs: F0.0 F0.1 F1.0 F1.1; 3. none;
//   4. M - 2P + r + 1 = 2 iterations; the first one's chunk 0 forward and
//      chunk 1 backward run apart on the last rank: F2.0 BW0.1
//      FB2.1/0.0, then FB3.0/1.1 FB3.1/1.0;
//   5. none;
//   6. r + 1 = 2 pairs, middle pair 1, odd rank: pair 0 whole (BW2.1
//      BW2.0), pair 1 split from its chunk 1 backward on (B3.1 B3.0);
//   7. none; 8. r + 1 = 2 W, oldest first: W3.1 W3.0.
TEST(Generators, DualPipeVFollowsTheReferenceForTwoRanks) {
  const Schedule s = make(Family::kDualPipeV, 2, 1, 4);
  EXPECT_EQ(s.placement.chunks, 2);
  EXPECT_TRUE(s.placement.vShape);
  EXPECT_EQ(orderString(s.ranks[0]),
            "F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 FB3.0/1.1 FB2.1/0.0 BW2.1 "
            "FB3.1/1.0 BW3.1 B2.0 W2.0 B3.0 W3.0");
  EXPECT_EQ(orderString(s.ranks[1]),
            "F0.0 F0.1 F1.0 F1.1 F2.0 BW0.1 FB2.1/0.0 FB3.0/1.1 FB3.1/1.0 "
            "BW2.1 BW2.0 B3.1 B3.0 W3.1 W3.0");
}

// P = 4, M = 8, traced the same way. Rank 0: 6 forwards of chunk 0, one
// pair, three B-W-F of chunk 1, one main iteration, three BW-FB, one pair
// (chunk 0 split), three W-B, one W. Rank 3 (last): four pairs, five main
// iterations (the first apart), two pairs (the second split).
TEST(Generators, DualPipeVFollowsTheReferenceForFourRanks) {
  const Schedule s = make(Family::kDualPipeV, 4, 1, 8);
  EXPECT_EQ(orderString(s.ranks[0]),
            "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 F6.0 F0.1 B0.1 W0.1 F1.1 B1.1 "
            "W1.1 F2.1 B2.1 W2.1 F3.1 FB7.0/3.1 FB4.1/0.0 BW4.1 FB5.1/1.0 "
            "BW5.1 FB6.1/2.0 BW6.1 FB7.1/3.0 BW7.1 B4.0 W4.0 B5.0 W5.0 B6.0 "
            "W6.0 B7.0 W7.0");
  EXPECT_EQ(orderString(s.ranks[3]),
            "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1 F3.0 F3.1 F4.0 BW0.1 FB4.1/0.0 "
            "FB5.0/1.1 FB5.1/1.0 FB6.0/2.1 FB6.1/2.0 FB7.0/3.1 FB7.1/3.0 "
            "BW4.1 BW4.0 BW5.1 BW5.0 B6.1 B6.0 B7.1 B7.0 W6.1 W6.0 W7.1 W7.0");
}

// Phase 6 starts splitting at its middle pair, so that r + 1 W are queued
// for phases 7 and 8 on every rank, whatever its parity.
TEST(Generators, DualPipeVSplitsAsManyBackwardsAsItRunsW) {
  for (int64_t p : {1, 2, 3, 4, 5, 6, 8}) {
    const Schedule s = make(Family::kDualPipeV, p, 1, 2 * p + 3);
    for (int64_t r = 0; r < p; ++r) {
      int64_t b = 0, w = 0;
      for (const Entry &e : s.ranks[r]) {
        b += e.kind == Kind::kB;
        w += e.kind == Kind::kW;
      }
      EXPECT_EQ(b, w) << "P=" << p << " rank " << r;
      EXPECT_EQ(b, 2 * (p - r - 1) + r + 1) << "P=" << p << " rank " << r;
    }
  }
}

void expectInvalid(Family family, int64_t ranks, int64_t chunks, int64_t mbs,
                   const std::string &says) {
  absl::StatusOr<Schedule> s = makeSchedule(family, ranks, chunks, mbs);
  ASSERT_FALSE(s.ok()) << familyName(family);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(says), std::string::npos)
      << s.status().message();
}

TEST(Generators, MakeScheduleSaysWhatToChange) {
  expectInvalid(Family::kOneFOneB, 0, 1, 4, "pipeline stages");
  expectInvalid(Family::kOneFOneB, 2, 1, 0, "micro-batches");
  expectInvalid(Family::kInterleaved, 4, 2, 6, "multiple of");
  expectInvalid(Family::kInterleaved, 4, 2, 6, "give 8 micro-batches");
  expectInvalid(Family::kInterleaved, 4, 1, 8, "virtual_stages of 2");
  expectInvalid(Family::kDualPipeV, 4, 2, 8, "remove virtual_stages");
  expectInvalid(Family::kDualPipeV, 4, 1, 7, "at least 2 x");
  expectInvalid(Family::kOneFOneB, 4, 2, 8, "INTERLEAVED only");
  expectInvalid(Family::kGPipe, 4, 2, 8, "INTERLEAVED only");
  expectInvalid(Family::kZbH1, 4, 2, 8, "INTERLEAVED only");
  EXPECT_TRUE(makeSchedule(Family::kDualPipeV, 4, 1, 8).ok());
  EXPECT_TRUE(makeSchedule(Family::kInterleaved, 4, 2, 8).ok());
}

TEST(Generators, ScheduleJsonListsEachRanksEntries) {
  EXPECT_EQ(scheduleJson(make(Family::kGPipe, 1, 1, 1)),
            "{\n"
            "  \"0\": [\n"
            "    {\"kind\": \"F\", \"mb\": 0, \"chunk\": 0},\n"
            "    {\"kind\": \"BW\", \"mb\": 0, \"chunk\": 0}\n"
            "  ]\n"
            "}\n");
  Schedule s;
  s.ranks = {{Entry::fb(1, 0, 0, 1), Entry::w(0, 1)}, {}};
  EXPECT_EQ(scheduleJson(s),
            "{\n"
            "  \"0\": [\n"
            "    {\"kind\": \"FB\", \"mb\": 1, \"chunk\": 0, \"b_mb\": 0, "
            "\"b_chunk\": 1},\n"
            "    {\"kind\": \"W\", \"mb\": 0, \"chunk\": 1}\n"
            "  ],\n"
            "  \"1\": []\n"
            "}\n");
}

} // namespace
} // namespace braid::pipeline
