// The text form of a rank's order that the IR carries
// (passes/pipeline/Schedule.h: formatOrder, parseOrder).
#include <vector>

#include "passes/pipeline/Schedule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(ScheduleText, RoundTrip) {
  const std::vector<Entry> order = {Entry::f(0, 0),        Entry::f(0, 1),
                                    Entry::fb(3, 0, 0, 1), Entry::b(1, 1),
                                    Entry::w(1, 1),        Entry::bw(12, 0)};
  const std::string text = formatOrder(order, true);
  EXPECT_EQ(text, "F0.0 F0.1 F3.0+BW0.1 B1.1 W1.1 BW12.0");
  absl::StatusOr<std::vector<Entry>> back = parseOrder(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, order);
}

TEST(ScheduleText, OneChunkLeavesChunksOut) {
  const std::vector<Entry> order = {Entry::f(0, 0), Entry::f(1, 0),
                                    Entry::bw(0, 0)};
  EXPECT_EQ(formatOrder(order, false), "F0 F1 BW0");
  absl::StatusOr<std::vector<Entry>> back = parseOrder("  F0  F1 BW0 ");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, order);
}

TEST(ScheduleText, BadTokensAreNamed) {
  for (const char *bad : {"X1", "F", "F-1", "F1.x", "B1+BW2", "F1+W2", "F1."}) {
    absl::StatusOr<std::vector<Entry>> order = parseOrder(bad);
    ASSERT_FALSE(order.ok()) << bad;
    EXPECT_THAT(order.status().message(),
                HasSubstr(std::string("'") + bad + "' is not an entry"));
  }
}

TEST(ScheduleText, Json) {
  Schedule s;
  s.ranks = {{Entry::f(0, 0), Entry::bw(0, 0)}, {Entry::fb(1, 0, 0, 1)}};
  EXPECT_EQ(scheduleJson(s),
            "{\n"
            "  \"0\": [\n"
            "    {\"kind\": \"F\", \"mb\": 0, \"chunk\": 0},\n"
            "    {\"kind\": \"BW\", \"mb\": 0, \"chunk\": 0}\n"
            "  ],\n"
            "  \"1\": [\n"
            "    {\"kind\": \"FB\", \"mb\": 1, \"chunk\": 0, \"b_mb\": 0, "
            "\"b_chunk\": 1}\n"
            "  ]\n"
            "}\n");
}

} // namespace
} // namespace braid::pipeline
