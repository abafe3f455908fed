// Events as counters. A plan's `record e` increments e's counter; its
// `wait e` blocks until the counter reaches the number of records of e that
// precede the wait in program order (computed by the plan loader). Counting
// instead of flagging lets one event be recorded many times in a program.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace braid {

class EventCounters {
public:
  explicit EventCounters(uint32_t numEvents) : counts_(numEvents, 0) {}

  // Sets every counter to 0. Only call when no stream is running.
  void reset();
  // Increments `event`'s counter and wakes the streams waiting on it.
  void record(uint32_t event);
  // Blocks until `event`'s counter is at least `target`.
  void wait(uint32_t event, int64_t target);

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int64_t> counts_;
};

} // namespace braid
