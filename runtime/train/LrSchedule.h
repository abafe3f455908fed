// The learning rate of each optimizer step (docs/numerics.md): linear warmup
// then constant or cosine decay to min_lr, in double precision.
#pragma once

#include <cstdint>

#include "runtime/plan/plan.pb.h"

namespace braid {

class LrSchedule {
public:
  // `totalSteps` (> 0) is the length of the run the cosine spans; it may
  // differ from train.steps when the user overrides it.
  LrSchedule(const plan::TrainConfig &train, int64_t totalSteps);

  // The rate of step `step` (1-based).
  double at(int64_t step) const;

private:
  double lr_;
  double minLr_;
  int64_t warmup_;
  int64_t totalSteps_;
  bool cosine_;
};

} // namespace braid
