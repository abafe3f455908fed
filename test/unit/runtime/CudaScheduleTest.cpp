// The CUDA backend's pure logic, tested without a GPU: how plan streams and
// counter events map onto CUDA events (StreamSchedule), and when a program
// runs eagerly, is captured or replays its graph (GraphPolicy).
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/device/cuda/GraphPolicy.h"
#include "runtime/device/cuda/StreamSchedule.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using Kind = LoadedInstruction::Kind;

LoadedInstruction inst(Kind kind, uint32_t stream, uint32_t event = 0,
                       int64_t target = 0) {
  LoadedInstruction i;
  i.kind = kind;
  i.stream = stream;
  i.event = event;
  i.waitTarget = target;
  return i;
}

TEST(StreamSchedule, OneStreamNeedsNoEvents) {
  LoadedProgram p;
  p.name = "micro_batch";
  p.instructions = {inst(Kind::kLaunch, 0), inst(Kind::kLaunch, 0)};
  StreamSchedule s = scheduleProgram(p, 0, 1);
  EXPECT_TRUE(s.eventOps.empty());
  EXPECT_EQ(s.numSlots, 0u);
  EXPECT_EQ(s.streams, std::vector<uint32_t>({0}));
  EXPECT_FALSE(s.graphRefusal.has_value());
}

TEST(StreamSchedule, AWaitWaitsForTheLastPrecedingRecordOfTheOtherStream) {
  LoadedProgram p;
  p.name = "micro_batch";
  p.instructions = {inst(Kind::kLaunch, 0), inst(Kind::kRecord, 0, 0),
                    inst(Kind::kLaunch, 0), inst(Kind::kRecord, 0, 0),
                    inst(Kind::kWait, 1, 0, 2), inst(Kind::kLaunch, 1),
                    inst(Kind::kRecord, 1, 1)};
  StreamSchedule s = scheduleProgram(p, 0, 2);
  EXPECT_EQ(s.streams, std::vector<uint32_t>({0, 1}));
  // Only the second record is waited for; the record of event 1 has no wait.
  ASSERT_EQ(s.eventOps.size(), 2u);
  EXPECT_EQ(s.eventOps[0].kind, EventOp::Kind::kRecord);
  EXPECT_EQ(s.eventOps[0].instruction, 3u);
  EXPECT_EQ(s.eventOps[1].kind, EventOp::Kind::kWait);
  EXPECT_EQ(s.eventOps[1].waitSlots,
            std::vector<uint32_t>({s.eventOps[0].slot}));
  EXPECT_EQ(s.numSlots, 1u);
  EXPECT_FALSE(s.graphRefusal.has_value());
}

TEST(StreamSchedule, RefusesAGraphWhenTimingDecidesWhichRecordsRelease) {
  LoadedProgram p;
  p.name = "optimizer";
  p.instructions = {inst(Kind::kRecord, 0, 0), inst(Kind::kRecord, 1, 0),
                    inst(Kind::kWait, 2, 0, 1)};
  StreamSchedule s = scheduleProgram(p, 1, 3);
  ASSERT_TRUE(s.graphRefusal.has_value());
  EXPECT_NE(s.graphRefusal->find("plan.programs[1] (optimizer) instruction "
                                 "2: stream 2 waits for event 0, which "
                                 "streams 0 and 1 record"),
            std::string::npos)
      << *s.graphRefusal;
}

TEST(StreamSchedule, RecordsOnlyAfterTheWaitNeedNoCudaWait) {
  // Stream 1's own record satisfies the wait (target 1); the records of
  // streams 0 and 2 come later in program order and are not waited for.
  LoadedProgram p;
  p.name = "micro_batch";
  p.instructions = {inst(Kind::kRecord, 1, 0), inst(Kind::kWait, 1, 0, 1),
                    inst(Kind::kRecord, 0, 0), inst(Kind::kRecord, 2, 0)};
  StreamSchedule s = scheduleProgram(p, 0, 3);
  EXPECT_TRUE(s.eventOps.empty());
  EXPECT_EQ(s.numSlots, 0u);
  EXPECT_FALSE(s.graphRefusal.has_value());
  EXPECT_EQ(s.streams, std::vector<uint32_t>({0, 1, 2}));
}

TEST(StreamSchedule, AJoinOfTwoStreamsWaitsForBoth) {
  // Streams 1 and 2 each record their own event; stream 0 waits for both.
  LoadedProgram p;
  p.name = "micro_batch";
  p.instructions = {inst(Kind::kLaunch, 1), inst(Kind::kRecord, 1, 0),
                    inst(Kind::kLaunch, 2), inst(Kind::kRecord, 2, 1),
                    inst(Kind::kWait, 0, 0, 1), inst(Kind::kWait, 0, 1, 1),
                    inst(Kind::kLaunch, 0)};
  StreamSchedule s = scheduleProgram(p, 0, 3);
  EXPECT_FALSE(s.graphRefusal.has_value());
  EXPECT_EQ(s.numSlots, 2u);
  ASSERT_EQ(s.eventOps.size(), 4u);
  EXPECT_EQ(s.eventOps[2].kind, EventOp::Kind::kWait);
  EXPECT_EQ(s.eventOps[2].waitSlots,
            std::vector<uint32_t>({s.eventOps[0].slot}));
  EXPECT_EQ(s.eventOps[3].waitSlots,
            std::vector<uint32_t>({s.eventOps[1].slot}));
  EXPECT_NE(s.eventOps[0].slot, s.eventOps[1].slot);
}

TEST(StreamSchedule, RecordsOfSeveralStreamsAreAllWaitedFor) {
  // Streams 0 and 1 both record event 0 before stream 2 waits for two
  // records: the CUDA wait covers both, and no graph is made.
  LoadedProgram p;
  p.name = "optimizer";
  p.instructions = {inst(Kind::kRecord, 0, 0), inst(Kind::kRecord, 1, 0),
                    inst(Kind::kWait, 2, 0, 2)};
  StreamSchedule s = scheduleProgram(p, 0, 3);
  EXPECT_TRUE(s.graphRefusal.has_value());
  ASSERT_EQ(s.eventOps.size(), 3u);
  EXPECT_EQ(s.eventOps[2].waitSlots,
            std::vector<uint32_t>({s.eventOps[0].slot, s.eventOps[1].slot}));
}

// The property the CUDA mapping rests on, over many random programs: when
// every CUDA wait of a plan wait is released, at least waitTarget records of
// its event have run (the counter rule holds), and every CUDA wait names a
// record enqueued before it (so it cannot wait on a stale or future record).
TEST(StreamSchedule, RandomProgramsKeepTheCounterRule) {
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 2000; ++trial) {
    const uint32_t numStreams = 1 + rng() % 4;
    const uint32_t numEvents = 1 + rng() % 3;
    const int length = 1 + static_cast<int>(rng() % 24);
    LoadedProgram p;
    p.name = "random";
    std::vector<int64_t> recorded(numEvents, 0);
    for (int i = 0; i < length; ++i) {
      const uint32_t stream = rng() % numStreams;
      const uint32_t event = rng() % numEvents;
      switch (rng() % 3) {
      case 0:
        p.instructions.push_back(inst(Kind::kLaunch, stream));
        break;
      case 1:
        p.instructions.push_back(inst(Kind::kRecord, stream, event));
        ++recorded[event];
        break;
      default:
        if (recorded[event] > 0)
          p.instructions.push_back(
              inst(Kind::kWait, stream, event, recorded[event]));
        break;
      }
    }
    StreamSchedule s = scheduleProgram(p, 0, numStreams);
    std::vector<int64_t> recordOfSlot(s.numSlots, -1);
    std::vector<const EventOp *> opOf(p.instructions.size(), nullptr);
    for (const EventOp &e : s.eventOps) {
      opOf[e.instruction] = &e;
      if (e.kind == EventOp::Kind::kRecord) {
        ASSERT_LT(e.slot, s.numSlots);
        ASSERT_EQ(recordOfSlot[e.slot], -1) << "a slot recorded twice";
        recordOfSlot[e.slot] = e.instruction;
        EXPECT_EQ(p.instructions[e.instruction].kind, Kind::kRecord);
      }
    }
    for (uint32_t i = 0; i < p.instructions.size(); ++i) {
      const LoadedInstruction &w = p.instructions[i];
      if (w.kind != Kind::kWait)
        continue;
      // Records known to have run once the wait is released: those of its
      // own stream before it, and on every stream it waits for, those up to
      // the waited record (a stream runs in order).
      std::vector<int64_t> doneUpTo(numStreams, -1);
      doneUpTo[w.stream] = i;
      if (const EventOp *e = opOf[i]) {
        ASSERT_EQ(e->kind, EventOp::Kind::kWait);
        for (uint32_t slot : e->waitSlots) {
          ASSERT_LT(slot, s.numSlots);
          const int64_t r = recordOfSlot[slot];
          ASSERT_GE(r, 0);
          ASSERT_LT(r, static_cast<int64_t>(i)) << "waits for a later record";
          const uint32_t t = p.instructions[r].stream;
          EXPECT_NE(t, w.stream);
          doneUpTo[t] = std::max(doneUpTo[t], r);
        }
      }
      int64_t done = 0;
      for (uint32_t j = 0; j < i; ++j) {
        const LoadedInstruction &r = p.instructions[j];
        if (r.kind == Kind::kRecord && r.event == w.event &&
            static_cast<int64_t>(j) <= doneUpTo[r.stream])
          ++done;
      }
      EXPECT_GE(done, w.waitTarget) << "trial " << trial << " instruction "
                                    << i;
    }
    for (uint32_t t : s.streams)
      EXPECT_LT(t, numStreams);
  }
}

TEST(GraphPolicy, EagerFirstThenCaptureThenReplay) {
  GraphPolicy g(true, std::nullopt);
  EXPECT_EQ(g.next(0, false), GraphPolicy::Action::kEager);
  g.ran(GraphPolicy::Action::kEager, 0, true);
  EXPECT_EQ(g.next(0, false), GraphPolicy::Action::kCapture);
  // A failed capture is tried again.
  g.ran(GraphPolicy::Action::kCapture, 0, false);
  EXPECT_EQ(g.next(0, false), GraphPolicy::Action::kCapture);
  g.ran(GraphPolicy::Action::kCapture, 0, true);
  EXPECT_EQ(g.next(0, false), GraphPolicy::Action::kReplay);
  // Profiling runs eagerly; a new arena epoch captures again.
  EXPECT_EQ(g.next(0, true), GraphPolicy::Action::kEager);
  EXPECT_EQ(g.next(1, false), GraphPolicy::Action::kCapture);
}

TEST(GraphPolicy, OffOrRefusedStaysEager) {
  GraphPolicy off(false, std::nullopt);
  off.ran(GraphPolicy::Action::kEager, 0, true);
  EXPECT_EQ(off.next(0, false), GraphPolicy::Action::kEager);
  EXPECT_FALSE(off.refusal().has_value());
  GraphPolicy refused(true, std::string("timing"));
  refused.ran(GraphPolicy::Action::kEager, 0, true);
  EXPECT_EQ(refused.next(0, false), GraphPolicy::Action::kEager);
  EXPECT_FALSE(refused.capturable());
}

TEST(GraphPolicy, AFailedCaptureIsRefusedForGood) {
  GraphPolicy g(true, std::nullopt);
  g.ran(GraphPolicy::Action::kEager, 0, true);
  ASSERT_EQ(g.next(0, false), GraphPolicy::Action::kCapture);
  g.refuse("capturing program \"optimizer\" failed");
  // The device ran it eagerly instead.
  g.ran(GraphPolicy::Action::kEager, 0, true);
  EXPECT_EQ(g.next(0, false), GraphPolicy::Action::kEager);
  EXPECT_EQ(g.next(1, false), GraphPolicy::Action::kEager);
  EXPECT_FALSE(g.capturable());
  EXPECT_FALSE(g.hasGraph());
  ASSERT_TRUE(g.refusal().has_value());
  EXPECT_EQ(*g.refusal(), "capturing program \"optimizer\" failed");
}

} // namespace
} // namespace braid
