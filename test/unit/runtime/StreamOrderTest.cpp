// Happens-before across streams (runtime/plan/StreamOrder.h): program order
// within a stream, event timelines across them, and nothing else; and the
// timeline rules every program keeps (checkEvents).
#include "runtime/plan/StreamOrder.h"

#include "gtest/gtest.h"

namespace braid {
namespace {

using Kind = OrderStep::Kind;

OrderStep run(uint32_t stream) { return {stream, Kind::kOther, 0, 0}; }
OrderStep record(uint32_t stream, uint32_t event, uint64_t value) {
  return {stream, Kind::kRecord, event, value};
}
OrderStep wait(uint32_t stream, uint32_t event, uint64_t value) {
  return {stream, Kind::kWait, event, value};
}

StreamUses usesOf(const StreamOrder &order, std::vector<int64_t> indices) {
  StreamUses u(order.numStreams());
  for (int64_t i : indices)
    order.addUse(u, i);
  return u;
}

TEST(StreamOrder, OneStreamIsProgramOrder) {
  StreamOrder order({run(0), run(0), run(0), run(0)}, 1);
  StreamUses a = usesOf(order, {0, 1}), b = usesOf(order, {2, 3});
  EXPECT_TRUE(order.allAfter(b, a));
  EXPECT_FALSE(order.allAfter(a, b));
  EXPECT_EQ(order.freeFrom(a), 2);
  EXPECT_FALSE(order.allAfter(usesOf(order, {1, 2}), a));
}

TEST(StreamOrder, StreamsAreUnorderedWithoutEvents) {
  // 0: s0 uses A; 1: s1 runs; 2: s0 uses B. B follows A on s0; a use of C
  // on s1 is ordered with neither.
  StreamOrder order({run(0), run(1), run(0), run(1)}, 2);
  EXPECT_TRUE(order.allAfter(usesOf(order, {2}), usesOf(order, {0})));
  EXPECT_FALSE(order.allAfter(usesOf(order, {3}), usesOf(order, {0})));
  EXPECT_FALSE(order.allAfter(usesOf(order, {2}), usesOf(order, {1})));
  // A use on s1 is never known to stream 0: free only past s0's last
  // instruction (2); stream 1's own 3 follows it.
  EXPECT_EQ(order.freeFrom(usesOf(order, {1})), 3);
}

TEST(StreamOrder, AnEventOrdersWhatCameBeforeItsRecord) {
  // s1 uses A, records e; s0 waits for e, then uses B.
  StreamOrder order({run(1), record(1, 0, 1), wait(0, 0, 1), run(0), run(1)}, 2);
  StreamUses a = usesOf(order, {0});
  EXPECT_TRUE(order.allAfter(usesOf(order, {3}), a));
  // Everything after A is ordered after it: the record on its own stream,
  // and the wait and what follows on s0. A is free from index 1.
  EXPECT_EQ(order.freeFrom(a), 1);
  // A use after the record on s1 is not covered by the wait.
  EXPECT_FALSE(order.allAfter(usesOf(order, {3}), usesOf(order, {4})));
}

TEST(StreamOrder, AWaitKnowsWhatItsOwnRecordKnew) {
  // s1 uses A, raises e to 1, uses B, raises e to 2. A wait for 1 orders A
  // but not B, even though the record of 2 may well have run by then; a
  // wait for 2 orders both.
  StreamOrder order({run(1), record(1, 0, 1), run(1), record(1, 0, 2),
                     wait(0, 0, 1), run(0), wait(0, 0, 2), run(0)},
                    2);
  EXPECT_TRUE(order.allAfter(usesOf(order, {5}), usesOf(order, {0})));
  EXPECT_FALSE(order.allAfter(usesOf(order, {5}), usesOf(order, {2})));
  EXPECT_TRUE(order.allAfter(usesOf(order, {7}), usesOf(order, {2})));
}

TEST(StreamOrder, KnowledgeTravelsThroughSeveralEvents) {
  // s2 uses A and records e0; s1 waits e0, records e1; s0 waits e1.
  StreamOrder order({run(2), record(2, 0, 1), wait(1, 0, 1), record(1, 1, 1),
                     wait(0, 1, 1), run(0)},
                    3);
  EXPECT_TRUE(order.allAfter(usesOf(order, {5}), usesOf(order, {0})));
}

std::optional<std::string> check(const std::vector<OrderStep> &steps,
                                 int64_t *bad) {
  return checkEvents(steps, bad);
}

TEST(CheckEvents, AcceptsRisingValuesOnOneStreamAndEarlierWaits) {
  int64_t bad = -1;
  EXPECT_EQ(check({record(1, 0, 1), run(0), wait(0, 0, 1), record(1, 0, 5),
                   wait(2, 0, 5), wait(0, 0, 1), record(0, 1, 1),
                   wait(1, 1, 1)},
                  &bad),
            std::nullopt);
}

TEST(CheckEvents, RefusesWhatTimingOrAHangCouldDecide) {
  int64_t bad = -1;
  // A wait before its record: program order cannot run it.
  EXPECT_NE(check({wait(0, 0, 1), record(1, 0, 1)}, &bad), std::nullopt);
  EXPECT_EQ(bad, 0);
  // Two recording streams: which one released the wait depends on timing.
  EXPECT_NE(check({record(1, 0, 1), record(2, 0, 2), wait(0, 0, 2)}, &bad),
            std::nullopt);
  EXPECT_EQ(bad, 1);
  // A value no record sets, values that do not rise, and value 0.
  EXPECT_NE(check({record(1, 0, 2), wait(0, 0, 1)}, &bad), std::nullopt);
  EXPECT_EQ(bad, 1);
  EXPECT_NE(check({record(1, 0, 2), record(1, 0, 2)}, &bad), std::nullopt);
  EXPECT_EQ(bad, 1);
  EXPECT_NE(check({run(0), record(1, 0, 0)}, &bad), std::nullopt);
  EXPECT_EQ(bad, 1);
}

} // namespace
} // namespace braid
