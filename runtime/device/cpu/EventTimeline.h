// The CPU's events: one timeline value per plan event (docs/plan-format.md,
// "Streams and events"). A record sets its event's value; a wait blocks
// until the value reaches its own. Every run starts all values at 0.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace braid {

class EventTimeline {
public:
  explicit EventTimeline(uint32_t numEvents) : values_(numEvents, 0) {}

  // Sets every value to 0. Only call when no stream is running.
  void reset();
  // Sets `event` to `value` and wakes the streams waiting on it.
  void record(uint32_t event, uint64_t value);
  // Blocks until `event` is at least `value`.
  void wait(uint32_t event, uint64_t value);

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<uint64_t> values_;
};

} // namespace braid
