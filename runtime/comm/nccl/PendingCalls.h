// The watchdog's book of a device communicator (DeviceCommunicator::poll):
// the calls enqueued and not yet seen complete, each between two markers on
// its stream (CUDA events: one before the call, one after). Pure logic over
// what the device reports of the markers, so that it is tested without a
// GPU.
//
// A call's clock starts when the watchdog first sees its start marker
// passed, not when it was enqueued: the backward's compute queued ahead of a
// gradient's all-reduce does not count against the limit, however long it
// runs. The watchdog looks only while the device waits for its streams, so
// a call's clock may start late, never early: the limit is a lower bound on
// the time a call was given.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace braid::nccl {

class PendingCalls {
public:
  using Clock = std::chrono::steady_clock;

  struct Call {
    // "all-reduce of 4096 f32", and where it came from: "step 12, program
    // \"step\"" (empty when not known).
    std::string what;
    std::string origin;
    // Opaque markers before and after the call on its stream.
    void *start = nullptr;
    void *done = nullptr;
    // When the watchdog first saw `start` passed.
    std::optional<Clock::time_point> startedAt;
  };

  explicit PendingCalls(std::chrono::milliseconds timeout)
      : timeout_(timeout) {}

  std::chrono::milliseconds timeout() const { return timeout_; }
  bool empty() const { return calls_.empty(); }
  size_t size() const { return calls_.size(); }
  // The oldest call still pending; the book must not be empty.
  const Call &oldest() const { return calls_.front(); }

  void add(Call call) { calls_.push_back(std::move(call)); }

  // Asks `passed` whether the stream has run past a marker, at time `now`.
  // Calls whose `done` marker is passed leave the book, their markers
  // handed to `release` for reuse. Returns the first call, in enqueue
  // order, that has run longer than the timeout, or null; an error of
  // `passed` is returned as it is.
  absl::StatusOr<const Call *>
  update(absl::FunctionRef<absl::StatusOr<bool>(void *marker)> passed,
         Clock::time_point now,
         absl::FunctionRef<void(void *marker)> release);

  // Every marker of the calls still pending, handed to `release`, and the
  // book emptied (after the communicator was aborted).
  void clear(absl::FunctionRef<void(void *marker)> release);

  // DeadlineExceeded: "step 12, program \"step\": the all-reduce of 4096
  // f32 in dp group 0 (ranks 0, 1) did not complete within 2 s ...".
  absl::Status timeoutError(const Call &call, const std::string &group) const;

private:
  std::chrono::milliseconds timeout_;
  std::deque<Call> calls_;
};

// "step 12, program \"step\": the all-reduce of 4096 f32 in GROUP" (the
// origin and its colon left out when empty): how errors name a call.
std::string describeCall(const PendingCalls::Call &call,
                         const std::string &group);

} // namespace braid::nccl
