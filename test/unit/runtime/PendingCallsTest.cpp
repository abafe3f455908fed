// The NCCL watchdog's book (runtime/comm/nccl/PendingCalls.h), on fake
// markers: a call's clock starts when its start marker is first seen
// passed, completed calls leave and hand their markers back, the first late
// call in enqueue order is the one reported, and how it is named.
#include "runtime/comm/nccl/PendingCalls.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace braid::nccl {
namespace {

using Clock = PendingCalls::Clock;
using std::chrono::milliseconds;

// Markers are the addresses of these; `passed` holds those the stream ran
// past.
struct Stream {
  int markers[8] = {};
  std::set<void *> passed;
  std::vector<void *> released;

  void *marker(int i) { return &markers[i]; }
  absl::StatusOr<const PendingCalls::Call *> update(PendingCalls &calls,
                                                    Clock::time_point now) {
    return calls.update(
        [this](void *m) -> absl::StatusOr<bool> { return passed.count(m) > 0; },
        now, [this](void *m) { released.push_back(m); });
  }
};

TEST(PendingCalls, TheClockStartsWhenTheCallIsSeenStarting) {
  Stream s;
  PendingCalls calls(milliseconds(2000));
  calls.add({"all-reduce of 4096 f32", "step 3, program \"step\"",
             s.marker(0), s.marker(1), std::nullopt});
  const Clock::time_point t0 = Clock::now();
  // Queued behind compute for a minute: not late.
  auto late = s.update(calls, t0 + std::chrono::seconds(60));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(*late, nullptr);
  // Started at t0 + 60 s (first seen then); late 2 s after that.
  s.passed.insert(s.marker(0));
  EXPECT_EQ(*s.update(calls, t0 + std::chrono::seconds(60)), nullptr);
  EXPECT_EQ(*s.update(calls, t0 + std::chrono::seconds(61)), nullptr);
  late = s.update(calls, t0 + std::chrono::seconds(63));
  ASSERT_TRUE(late.ok());
  ASSERT_NE(*late, nullptr);
  EXPECT_EQ(calls.timeoutError(**late, "dp group 0 (ranks 0, 1)").message(),
            "step 3, program \"step\": the all-reduce of 4096 f32 in dp "
            "group 0 (ranks 0, 1) did not complete within 2 s of starting "
            "on its stream: a rank of the group died, hangs or is making a "
            "different call (set the limit with --comm-timeout); the NCCL "
            "communicator was aborted");
  EXPECT_EQ(calls.timeoutError(**late, "g").code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(PendingCalls, CompletedCallsLeaveAndHandBackTheirMarkers) {
  Stream s;
  PendingCalls calls(milliseconds(10));
  calls.add({"a", "", s.marker(0), s.marker(1), std::nullopt});
  calls.add({"b", "", s.marker(2), s.marker(3), std::nullopt});
  calls.add({"c", "", s.marker(4), s.marker(5), std::nullopt});
  // b (on another stream) finished before a.
  s.passed = {s.marker(0), s.marker(2), s.marker(3), s.marker(4)};
  const Clock::time_point t0 = Clock::now();
  ASSERT_EQ(*s.update(calls, t0), nullptr);
  EXPECT_EQ(calls.size(), 2u);
  EXPECT_EQ(s.released, (std::vector<void *>{s.marker(2), s.marker(3)}));
  // a and c both late: a, first enqueued, is named.
  const PendingCalls::Call *late = *s.update(calls, t0 + milliseconds(50));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->what, "a");
  EXPECT_EQ(describeCall(*late, "tp group 1 (rank 1)"),
            "the a in tp group 1 (rank 1)");
  s.released.clear();
  calls.clear([&](void *m) { s.released.push_back(m); });
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(s.released.size(), 4u);
}

TEST(PendingCalls, AnErrorReadingAMarkerIsReturned) {
  PendingCalls calls(milliseconds(10));
  int m = 0;
  calls.add({"a", "", &m, &m, std::nullopt});
  auto late = calls.update(
      [](void *) -> absl::StatusOr<bool> {
        return absl::InternalError("cudaEventQuery failed");
      },
      Clock::now(), [](void *) {});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().message(), "cudaEventQuery failed");
}

} // namespace
} // namespace braid::nccl
