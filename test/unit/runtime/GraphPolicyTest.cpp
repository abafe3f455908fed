// When a CUDA program runs eagerly, is captured or replays its graph
// (GraphPolicy), tested without a GPU.
#include <string>

#include "runtime/device/cuda/GraphPolicy.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

TEST(GraphPolicy, EagerFirstThenCaptureThenReplay) {
  GraphPolicy g(true);
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

TEST(GraphPolicy, OffStaysEager) {
  GraphPolicy off(false);
  off.ran(GraphPolicy::Action::kEager, 0, true);
  EXPECT_EQ(off.next(0, false), GraphPolicy::Action::kEager);
  EXPECT_FALSE(off.refusal().has_value());
  EXPECT_FALSE(off.capturable());
}

TEST(GraphPolicy, AFailedCaptureIsRefusedForGood) {
  GraphPolicy g(true);
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
