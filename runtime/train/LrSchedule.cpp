#include "runtime/train/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace braid {

LrSchedule::LrSchedule(const plan::TrainConfig &train, int64_t totalSteps)
    : lr_(train.lr()), minLr_(train.min_lr()), warmup_(train.warmup_steps()),
      totalSteps_(totalSteps), cosine_(train.decay() == plan::TrainConfig::COSINE) {}

double LrSchedule::at(int64_t step) const {
  if (step <= warmup_)
    return lr_ * static_cast<double>(step) / static_cast<double>(warmup_);
  if (!cosine_)
    return lr_;
  // A run no longer than its warmup has no decay phase to span: it is over.
  double progress =
      totalSteps_ > warmup_
          ? std::min(1.0, static_cast<double>(step - warmup_) /
                              static_cast<double>(totalSteps_ - warmup_))
          : 1.0;
  const double kPi = 3.14159265358979323846;
  return minLr_ + 0.5 * (lr_ - minLr_) * (1.0 + std::cos(kPi * progress));
}

} // namespace braid
