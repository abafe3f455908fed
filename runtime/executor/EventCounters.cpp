#include "runtime/executor/EventCounters.h"

#include <algorithm>

namespace braid {

void EventCounters::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fill(counts_.begin(), counts_.end(), 0);
}

void EventCounters::record(uint32_t event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[event];
  }
  changed_.notify_all();
}

void EventCounters::wait(uint32_t event, int64_t target) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return counts_[event] >= target; });
}

} // namespace braid
