// The executor: program order within a stream, event ordering across
// streams, counters that reset per run, and the single-stream fast path.
#include <chrono>
#include <string>
#include <vector>

#include "runtime/device/cpu/CpuArena.h"
#include "runtime/executor/Executor.h"
#include "runtime/plan/PlanLoader.h"
#include "test/unit/runtime/PlanBuilder.h"
#include "test/unit/runtime/TestKernels.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

using test::intAttr;
using test::PlanBuilder;

// A plan whose STEP program the test fills in; bind() completes it with the
// staging and readbacks a step needs.
PlanBuilder skeleton() {
  PlanBuilder b;
  b.parameter("w", {4}, plan::ZEROS);
  b.standardInputsAndScalars();
  return b;
}

void log(PlanBuilder &b, uint32_t stream, int64_t id, int64_t sleepMs = 0) {
  std::vector<plan::Attr> attrs = {intAttr("id", id)};
  if (sleepMs > 0)
    attrs.push_back(intAttr("sleep_ms", sleepMs));
  b.launch("step", stream, "test.log", {}, {}, attrs);
}

struct Bound {
  LoadedPlan plan;
  CpuArena arena;
  std::unique_ptr<StagingLayout> layout;
  std::vector<uint8_t> staging;
  std::unique_ptr<Executor> executor;
};

std::unique_ptr<Bound> bind(PlanBuilder &b) {
  b.minimalStep();
  auto bound = std::make_unique<Bound>();
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(b.bytes(), test::testKernelRegistry(), Device::kCPU);
  EXPECT_TRUE(plan.ok()) << plan.status();
  bound->plan = std::move(*plan);
  absl::StatusOr<CpuArena> arena =
      CpuArena::create(bound->plan.proto.memory().arena_bytes());
  EXPECT_TRUE(arena.ok()) << arena.status();
  bound->arena = std::move(*arena);
  bound->layout = std::make_unique<StagingLayout>(bound->plan);
  bound->staging.resize(bound->layout->bytes());
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::create(
      bound->plan, bound->arena.data(), bound->arena.size(),
      bound->staging.data(), *bound->layout);
  EXPECT_TRUE(ex.ok()) << ex.status();
  bound->executor = std::move(*ex);
  return bound;
}

std::vector<int64_t> runLogged(Bound &bound) {
  test::clearEventLog();
  KernelContext ctx;
  absl::Status s = bound.executor->run(plan::STEP, ctx);
  EXPECT_TRUE(s.ok()) << s;
  return test::eventLog();
}

TEST(Executor, OneStreamRunsInProgramOrder) {
  PlanBuilder b = skeleton();
  for (int i = 1; i <= 5; ++i)
    log(b, 0, i);
  auto bound = bind(b);
  EXPECT_EQ(bound->executor->numStreams(), 1);
  EXPECT_EQ(runLogged(*bound),
            (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

TEST(Executor, StreamsRunConcurrentlyWithoutEvents) {
  // Control for the ordering tests: stream 1 sleeps, so without an event
  // stream 0 logs first. If streams were serialised this would be 1, 2.
  PlanBuilder b = skeleton();
  log(b, 1, 1, /*sleepMs=*/100);
  log(b, 0, 2);
  auto bound = bind(b);
  EXPECT_EQ(bound->executor->numStreams(), 2);
  EXPECT_EQ(runLogged(*bound), (std::vector<int64_t>{2, 1}));
}

TEST(Executor, WaitOrdersAcrossStreams) {
  PlanBuilder b = skeleton();
  log(b, 1, 1, /*sleepMs=*/50);
  b.record("step", 1, 0);
  b.wait("step", 0, 0);
  log(b, 0, 2);
  auto bound = bind(b);
  EXPECT_EQ(runLogged(*bound), (std::vector<int64_t>{1, 2}));
}

TEST(Executor, EventsCountRecordsAndResetEachRun) {
  // Event 0 is recorded twice by stream 1: the first wait on it needs one
  // record, the second two. Event 1 hands control back to stream 1, so with
  // counting semantics the order is fixed whatever the timing; stream 1's
  // sleep makes a wait that passed on any earlier record show up as 1 2 4 3.
  PlanBuilder b = skeleton();
  log(b, 1, 1);
  b.record("step", 1, 0);
  b.wait("step", 0, 0);
  log(b, 0, 2);
  b.record("step", 0, 1);
  b.wait("step", 1, 1);
  log(b, 1, 3, /*sleepMs=*/50);
  b.record("step", 1, 0);
  b.wait("step", 0, 0);
  log(b, 0, 4);
  auto bound = bind(b);
  // A counter left over from a previous run would let the waits of the next
  // run pass early.
  for (int run = 0; run < 3; ++run)
    EXPECT_EQ(runLogged(*bound),
              (std::vector<int64_t>{1, 2, 3, 4}))
        << "run " << run;
}

TEST(Executor, ThreeStreamsJoinOnTwoEvents) {
  PlanBuilder b = skeleton();
  log(b, 1, 1, 40);
  b.record("step", 1, 0);
  log(b, 2, 2, 60);
  b.record("step", 2, 1);
  b.wait("step", 0, 0);
  b.wait("step", 0, 1);
  log(b, 0, 3);
  auto bound = bind(b);
  std::vector<int64_t> order = runLogged(*bound);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[2], 3); // after both streams, in whatever order they ran
  EXPECT_EQ(order[0] + order[1], 3);
}

TEST(Executor, RefusesUnknownProgramsAndSmallArenas) {
  PlanBuilder b = skeleton();
  log(b, 0, 1);
  auto bound = bind(b);
  KernelContext ctx;
  absl::Status s = bound->executor->run(plan::INIT, ctx);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "the plan has no INIT program");

  absl::StatusOr<std::unique_ptr<Executor>> small =
      Executor::create(bound->plan, bound->arena.data(), 64,
                       bound->staging.data(), *bound->layout);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(std::string(small.status().message())
                .find("the arena has 64 "
                      "bytes but the plan "
                      "needs"),
            std::string::npos);
}

TEST(Executor, OneStreamAddsLittleOverheadPerLaunch) {
  // Ten thousand no-op launches: the dispatch cost per launch must stay far
  // below any real kernel's (a loose bound, to stay robust on busy machines).
  PlanBuilder b = skeleton();
  for (int i = 0; i < 10000; ++i)
    b.launch("step", 0, "test.touch", {}, {});
  auto bound = bind(b);
  KernelContext ctx;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(bound->executor->run(plan::STEP, ctx).ok());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(seconds / 10000, 5e-6) << seconds << " s for 10000 launches";
}

} // namespace
} // namespace braid
