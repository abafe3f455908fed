#include "runtime/device/cpu/EventTimeline.h"

#include <algorithm>

namespace braid {

void EventTimeline::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fill(values_.begin(), values_.end(), 0);
}

void EventTimeline::record(uint32_t event, uint64_t value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[event] = value;
  }
  changed_.notify_all();
}

void EventTimeline::wait(uint32_t event, uint64_t value) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return values_[event] >= value; });
}

} // namespace braid
