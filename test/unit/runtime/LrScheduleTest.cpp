#include <cmath>

#include "runtime/train/LrSchedule.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

plan::TrainConfig config(plan::TrainConfig::LrDecay decay, int64_t warmup) {
  plan::TrainConfig t;
  t.set_lr(3e-3);
  t.set_min_lr(3e-4);
  t.set_warmup_steps(warmup);
  t.set_decay(decay);
  return t;
}

TEST(LrSchedule, WarmsUpLinearlyThenFollowsTheCosine) {
  LrSchedule s(config(plan::TrainConfig::COSINE, 20), 300);
  EXPECT_DOUBLE_EQ(s.at(1), 3e-3 / 20);
  EXPECT_DOUBLE_EQ(s.at(10), 1.5e-3);
  EXPECT_DOUBLE_EQ(s.at(20), 3e-3);
  // Half way through the decay: the mean of lr and min_lr.
  EXPECT_NEAR(s.at(160), 1.65e-3, 1e-15);
  EXPECT_NEAR(s.at(90), 3e-4 + 0.5 * 2.7e-3 * (1 + std::cos(M_PI * 0.25)),
              1e-15);
  EXPECT_DOUBLE_EQ(s.at(300), 3e-4);
  // Past the end the progress is clamped.
  EXPECT_DOUBLE_EQ(s.at(400), 3e-4);
}

TEST(LrSchedule, ConstantDecayHoldsTheRate) {
  LrSchedule s(config(plan::TrainConfig::CONSTANT, 4), 100);
  EXPECT_DOUBLE_EQ(s.at(2), 1.5e-3);
  EXPECT_DOUBLE_EQ(s.at(5), 3e-3);
  EXPECT_DOUBLE_EQ(s.at(100), 3e-3);
}

TEST(LrSchedule, NoWarmupAndRunsNoLongerThanTheWarmup) {
  LrSchedule none(config(plan::TrainConfig::COSINE, 0), 10);
  EXPECT_NEAR(none.at(1), 3e-4 + 0.5 * 2.7e-3 * (1 + std::cos(M_PI * 0.1)),
              1e-15);
  EXPECT_DOUBLE_EQ(none.at(10), 3e-4);
  // The whole run is warmup; nothing divides by zero.
  LrSchedule shortRun(config(plan::TrainConfig::COSINE, 20), 20);
  EXPECT_DOUBLE_EQ(shortRun.at(20), 3e-3);
  EXPECT_DOUBLE_EQ(shortRun.at(21), 3e-4);
}

} // namespace
} // namespace braid
