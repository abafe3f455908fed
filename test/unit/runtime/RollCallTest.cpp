// The watchdog's roll call (runtime/comm/RollCall.h): who keeps a stalled
// collective from completing, from two readings of every other member's
// arrival record.
#include "runtime/comm/RollCall.h"

#include <vector>

#include "gtest/gtest.h"

namespace braid {
namespace {

ArrivalRecord record(uint64_t entered, uint64_t left, uint64_t beats) {
  return ArrivalRecord{entered, left, beats};
}

MemberReadings member(int64_t rank, ArrivalRecord first, ArrivalRecord second) {
  return MemberReadings{rank, first, second};
}

TEST(RollCall, AttendanceFromTwoReadings) {
  // Collective 5 stalls on the caller.
  EXPECT_EQ(attendance(5, member(1, record(4, 4, 10), record(4, 4, 10))),
            Attendance::kNotReached);
  // Still computing between collectives: its heartbeat does not matter.
  EXPECT_EQ(attendance(5, member(1, record(4, 4, 10), record(4, 4, 99))),
            Attendance::kNotReached);
  EXPECT_EQ(attendance(5, member(1, record(5, 4, 10), record(5, 4, 11))),
            Attendance::kWaiting);
  EXPECT_EQ(attendance(5, member(1, record(5, 4, 10), record(5, 4, 10))),
            Attendance::kStopped);
  // A broadcast's root may complete before the others.
  EXPECT_EQ(attendance(5, member(1, record(5, 5, 10), record(6, 5, 10))),
            Attendance::kDone);
  // The second reading decides: it arrived in between.
  EXPECT_EQ(attendance(5, member(1, record(4, 4, 10), record(5, 4, 12))),
            Attendance::kWaiting);
  MemberReadings unread{1, record(5, 4, 10), std::nullopt};
  EXPECT_EQ(attendance(5, unread), Attendance::kUnanswered);
  unread.first.reset();
  EXPECT_EQ(attendance(5, unread), Attendance::kUnanswered);
}

TEST(RollCall, NamesARankThatHasNotReachedTheCall) {
  std::vector<MemberReadings> group = {
      member(1, record(41, 41, 7), record(41, 41, 7))};
  EXPECT_EQ(rollCall(42, group),
            "rank 1 has not reached it (it has entered 41 of the group's "
            "collectives, this is the 42nd)");
  group[0] = member(3, record(0, 0, 0), record(0, 0, 0));
  EXPECT_EQ(rollCall(1, group),
            "rank 3 has not reached it (it has entered 0 of the group's "
            "collectives, this is the 1st)");
}

TEST(RollCall, GroupsRanksByWhatKeepsThem) {
  // Ranks 0 and 2 are waiting with the caller, 4 and 6 are behind, 8 is
  // stopped in the call, 10 does not answer.
  std::vector<MemberReadings> group = {
      member(0, record(13, 12, 1), record(13, 12, 5)),
      member(2, record(13, 12, 3), record(13, 12, 4)),
      member(4, record(12, 12, 0), record(12, 12, 0)),
      member(6, record(11, 11, 0), record(11, 11, 0)),
      member(8, record(13, 12, 9), record(13, 12, 9)),
      MemberReadings{10, std::nullopt, std::nullopt},
  };
  EXPECT_EQ(rollCall(13, group),
            "ranks 4, 6 have not reached it (they have entered 11 to 12 of "
            "the group's collectives, this is the 13th); rank 8 entered it "
            "but stopped responding (stopped, or its thread is blocked); "
            "rank 10 did not answer the watchdog's query");
  group[3] = member(6, record(12, 12, 0), record(12, 12, 0));
  EXPECT_EQ(rollCall(13, group).rfind("ranks 4, 6 have not reached it (each "
                                      "has entered 12 of the group's",
                                      0),
            0u);
}

TEST(RollCall, NamesAtMostEightRanksOfAKind) {
  std::vector<MemberReadings> group;
  for (int64_t r = 1; r <= 20; ++r)
    group.push_back(member(r, record(2, 2, 0), record(2, 2, 0)));
  EXPECT_EQ(rollCall(3, group),
            "ranks 1, 2, 3, 4, 5, 6, 7, 8 and 12 more have not reached it "
            "(each has entered 2 of the group's collectives, this is the "
            "3rd)");
}

TEST(RollCall, EveryoneInTheCallPointsAtTheCallsThemselves) {
  std::vector<MemberReadings> group = {
      member(1, record(9, 8, 100), record(9, 8, 140)),
      member(2, record(9, 9, 0), record(9, 9, 0))};
  EXPECT_EQ(rollCall(9, group),
            "every other rank of the group is in it too: the ranks are "
            "making different calls, or MPI failed");
}

TEST(RollCall, Ordinals) {
  auto said = [](uint64_t seq) {
    std::vector<MemberReadings> group = {
        member(1, record(0, 0, 0), record(0, 0, 0))};
    const std::string s = rollCall(seq, group);
    return s.substr(s.rfind(' ') + 1);
  };
  EXPECT_EQ(said(2), "2nd)");
  EXPECT_EQ(said(3), "3rd)");
  EXPECT_EQ(said(4), "4th)");
  EXPECT_EQ(said(11), "11th)");
  EXPECT_EQ(said(12), "12th)");
  EXPECT_EQ(said(13), "13th)");
  EXPECT_EQ(said(21), "21st)");
  EXPECT_EQ(said(112), "112th)");
  EXPECT_EQ(said(1001), "1001st)");
}

// A send or recv that stalls: the peer is named with what its readings
// say.
TEST(RollCall, PeerOfASendOrRecv) {
  EXPECT_EQ(peerCall(3, "recv", std::nullopt),
            "world rank 3, the peer, has not made the matching recv (it died, "
            "hangs or is making a different call)");
  EXPECT_EQ(peerCall(3, "send", member(3, record(2, 2, 7), record(2, 2, 7))),
            "world rank 3, the peer, has not made the matching send and is in "
            "no call (it is still computing, stopped, or died)");
  EXPECT_EQ(peerCall(3, "send", member(3, record(2, 2, 7), record(2, 2, 9))),
            "world rank 3, the peer, is waiting in another call: the ranks' "
            "programs disagree on the order of their transfers");
  EXPECT_EQ(peerCall(3, "recv",
                     MemberReadings{3, record(2, 2, 7), std::nullopt}),
            "world rank 3, the peer, did not answer the watchdog's query (it "
            "died or is unreachable)");
}

} // namespace
} // namespace braid
