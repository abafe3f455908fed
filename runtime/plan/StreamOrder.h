// Happens-before between the instructions of one program, shared by the
// compiler's memory planner and the plan loader's arena check
// (docs/plan-format.md, "Streams, events and memory").
//
// Each stream runs its instructions in program order, one after another.
// Events are timelines: a record sets its event to its value, and a wait
// for value v returns once the record of value v has run. One stream
// records each event, with rising values, so that record is the only one
// that can release the wait: the wait knows what that record knew, and
// nothing else. Program position alone orders nothing across streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braid {

// One instruction as ordering sees it.
struct OrderStep {
  enum class Kind { kOther, kRecord, kWait };
  uint32_t stream = 0;
  Kind kind = Kind::kOther;
  // kRecord: the value it sets; kWait: the value it waits for.
  uint32_t event = 0;
  uint64_t value = 0;
};

// Why the events of `steps` (in program order) break the timeline rules,
// or nullopt when they keep them: every value is at least 1; one stream
// records each event, with values that rise in program order; every wait
// names a value its event's records set, recorded earlier in program order.
// Then program order itself is one way to run the program, so no stream
// can wait forever, and no wait depends on which stream finishes first.
// `*bad` is the index of the offending step. Messages read as the end of
// a sentence that starts with the step ("instruction 7: ...").
std::optional<std::string> checkEvents(const std::vector<OrderStep> &steps,
                                       int64_t *bad);

// The uses of a buffer in one program: per stream, the 1-based position
// (within that stream) of the last use, 0 when the stream does not use it,
// and the program index of the first use on that stream, -1 when none.
struct StreamUses {
  std::vector<int64_t> lastPosition;
  std::vector<int64_t> firstIndex;
  // Program indices of the first and last use on any stream.
  int64_t first = -1;
  int64_t last = -1;

  explicit StreamUses(uint32_t numStreams)
      : lastPosition(numStreams, 0), firstIndex(numStreams, -1) {}
};

class StreamOrder {
public:
  // `steps` in program order; every stream is below `numStreams`.
  StreamOrder(const std::vector<OrderStep> &steps, uint32_t numStreams);

  uint32_t numStreams() const { return numStreams_; }
  // Adds instruction `index` to `uses`.
  void addUse(StreamUses &uses, int64_t index) const;

  // Whether every use in `earlier` has finished before instruction
  // `index` starts.
  bool startsAfter(int64_t index, const StreamUses &earlier) const;
  // Whether every use in `later` starts after every use in `earlier` has
  // finished: the two may then share memory.
  bool allAfter(const StreamUses &later, const StreamUses &earlier) const;
  // The first program index from which every instruction starts after all
  // of `uses` have finished (the number of steps when some never does).
  // With one stream it is `uses.last + 1`.
  int64_t freeFrom(const StreamUses &uses) const;

private:
  // known_[i * S + t]: instructions of stream t finished before i starts.
  int64_t known(int64_t index, uint32_t stream) const {
    return known_[static_cast<size_t>(index) * numStreams_ + stream];
  }

  uint32_t numStreams_;
  std::vector<uint32_t> streamOf_;
  std::vector<int64_t> position_; // 1-based, within the stream
  std::vector<std::vector<int64_t>> byStream_;
  std::vector<int64_t> known_;
};

} // namespace braid
