// The CUDA backend's pure logic, tested without a GPU: how plan streams and
// counter events map onto CUDA events (StreamSchedule), and when a program
// runs eagerly, is captured or replays its graph (GraphPolicy).
#include <string>

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

} // namespace
} // namespace braid
