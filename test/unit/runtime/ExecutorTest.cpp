// The executor and the CPU's streams: program order within a stream, event
// timelines across streams that reset per run, how binding settles the
// event work, and the single-stream fast path.
#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/device/cpu/CpuArena.h"
#include "runtime/device/cpu/CpuStreams.h"
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
  std::unique_ptr<CpuStreams> streams;

  absl::Status run(plan::ProgramKind kind) {
    absl::StatusOr<const Executor::Program *> program =
        executor->program(kind);
    if (!program.ok())
      return program.status();
    streams->begin(KernelContext(), nullptr);
    absl::Status s = executor->issue(**program, *streams);
    absl::Status ran = streams->finish();
    return s.ok() ? ran : s;
  }
  const Executor::Program &step() const {
    return **executor->program(plan::STEP);
  }
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
      /*hostArena=*/nullptr, 0, bound->staging.data(), *bound->layout);
  EXPECT_TRUE(ex.ok()) << ex.status();
  bound->executor = std::move(*ex);
  bound->streams = std::make_unique<CpuStreams>(
      bound->plan.proto.num_streams(), bound->plan.proto.num_events(),
      /*ranks=*/nullptr);
  return bound;
}

std::vector<int64_t> runLogged(Bound &bound) {
  test::clearEventLog();
  absl::Status s = bound.run(plan::STEP);
  EXPECT_TRUE(s.ok()) << s;
  return test::eventLog();
}

TEST(Executor, OneStreamRunsInProgramOrder) {
  PlanBuilder b = skeleton();
  for (int i = 1; i <= 5; ++i)
    log(b, 0, i);
  auto bound = bind(b);
  EXPECT_EQ(bound->step().streams, std::vector<uint32_t>({0}));
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
  EXPECT_EQ(bound->step().streams, std::vector<uint32_t>({0, 1}));
  EXPECT_EQ(runLogged(*bound), (std::vector<int64_t>{2, 1}));
}

TEST(Executor, WaitOrdersAcrossStreams) {
  PlanBuilder b = skeleton();
  log(b, 1, 1, /*sleepMs=*/50);
  b.record("step", 1, 0, 1);
  b.wait("step", 0, 0, 1);
  log(b, 0, 2);
  auto bound = bind(b);
  EXPECT_EQ(runLogged(*bound), (std::vector<int64_t>{1, 2}));
}

TEST(Executor, EventsAreTimelinesThatResetEachRun) {
  // Stream 1 raises event 0 to 1, then (after sleeping) to 2; stream 0
  // waits for each value in turn. Event 1 hands control back to stream 1.
  // A wait released by an earlier value than its own would show up as
  // 1 2 4 3.
  PlanBuilder b = skeleton();
  log(b, 1, 1);
  b.record("step", 1, 0, 1);
  b.wait("step", 0, 0, 1);
  log(b, 0, 2);
  b.record("step", 0, 1, 1);
  b.wait("step", 1, 1, 1);
  log(b, 1, 3, /*sleepMs=*/50);
  b.record("step", 1, 0, 2);
  b.wait("step", 0, 0, 2);
  log(b, 0, 4);
  auto bound = bind(b);
  // A value left over from a previous run would let the waits of the next
  // run pass early.
  for (int run = 0; run < 3; ++run)
    EXPECT_EQ(runLogged(*bound),
              (std::vector<int64_t>{1, 2, 3, 4}))
        << "run " << run;
}

TEST(Executor, ThreeStreamsJoinOnTwoEvents) {
  PlanBuilder b = skeleton();
  log(b, 1, 1, 40);
  b.record("step", 1, 0, 1);
  log(b, 2, 2, 60);
  b.record("step", 2, 1, 1);
  b.wait("step", 0, 0, 1);
  b.wait("step", 0, 1, 1);
  log(b, 0, 3);
  auto bound = bind(b);
  std::vector<int64_t> order = runLogged(*bound);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[2], 3); // after both streams, in whatever order they ran
  EXPECT_EQ(order[0] + order[1], 3);
}

TEST(Executor, BindingKeepsOnlyTheEventWorkAnotherStreamNeeds) {
  // Event 0: stream 1 records 1 (stream 0 waits for it) and 2 (nobody
  // waits). Event 1: stream 0 records 1 and waits for it itself. Kept: the
  // record of 0=1 as slot 0 and its wait; everything else is dropped.
  PlanBuilder b = skeleton();
  log(b, 1, 1);
  b.record("step", 1, 0, 1);
  log(b, 1, 2);
  b.record("step", 1, 0, 2);
  b.wait("step", 0, 0, 1);
  b.record("step", 0, 1, 1);
  b.wait("step", 0, 1, 1);
  log(b, 0, 3);
  auto bound = bind(b);
  const Executor::Program &step = bound->step();
  EXPECT_EQ(step.numSignals, 1u);
  std::vector<std::pair<LoadedInstruction::Kind, uint32_t>> events;
  for (const Executor::Op &op : step.ops)
    if (op.kind == LoadedInstruction::Kind::kRecord ||
        op.kind == LoadedInstruction::Kind::kWait) {
      events.push_back({op.kind, op.stream});
      EXPECT_EQ(op.signal.event, 0u);
      EXPECT_EQ(op.signal.value, 1u);
      EXPECT_EQ(op.signal.slot, 0u);
    }
  EXPECT_EQ(events, (std::vector<std::pair<LoadedInstruction::Kind, uint32_t>>{
                        {LoadedInstruction::Kind::kRecord, 1},
                        {LoadedInstruction::Kind::kWait, 0}}));
  // 3 waits for 1 only; 2 runs in any order with 3.
  std::vector<int64_t> order = runLogged(*bound);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_LT(std::find(order.begin(), order.end(), 1),
            std::find(order.begin(), order.end(), 3));
}

TEST(Executor, EachWaitedRecordGetsItsOwnSlot) {
  // Two values of one event, each waited for by another stream: two slots,
  // in program order, and each wait shares its record's.
  PlanBuilder b = skeleton();
  b.record("step", 0, 0, 1);
  b.wait("step", 1, 0, 1);
  log(b, 1, 1);
  b.record("step", 0, 0, 2);
  b.wait("step", 2, 0, 2);
  b.wait("step", 1, 0, 2);
  log(b, 2, 2);
  auto bound = bind(b);
  const Executor::Program &step = bound->step();
  EXPECT_EQ(step.numSignals, 2u);
  EXPECT_EQ(step.streams, std::vector<uint32_t>({0, 1, 2}));
  std::vector<uint32_t> slots;
  for (const Executor::Op &op : step.ops)
    if (op.kind != LoadedInstruction::Kind::kLaunch &&
        op.kind != LoadedInstruction::Kind::kStage &&
        op.kind != LoadedInstruction::Kind::kReadback &&
        op.kind != LoadedInstruction::Kind::kRepeat)
      slots.push_back(op.signal.slot);
  EXPECT_EQ(slots, (std::vector<uint32_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(runLogged(*bound).size(), 2u);
}

TEST(Executor, RandomProgramsKeepEveryWaitsOrder) {
  // Random three-stream programs: stream s records event s with rising
  // values, and a wait names a value already recorded. Whatever the timing,
  // a launch after a wait logs after every launch that precedes the wait's
  // record on the recording stream, and no run hangs.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    PlanBuilder b = skeleton();
    constexpr uint32_t kStreams = 3;
    uint64_t value[kStreams] = {0, 0, 0};
    // Per stream: the launch ids before each of its records (by value).
    std::vector<std::vector<std::vector<int64_t>>> before(kStreams);
    std::vector<int64_t> launched[kStreams];
    // Per launch id: the launch ids it must follow.
    std::map<int64_t, std::vector<int64_t>> after;
    std::vector<int64_t> known[kStreams];
    int64_t id = 0;
    for (int i = 0; i < 30; ++i) {
      const uint32_t s = rng() % kStreams;
      switch (rng() % 3) {
      case 0:
        log(b, s, ++id, rng() % 3);
        launched[s].push_back(id);
        after[id] = known[s];
        break;
      case 1:
        b.record("step", s, s, ++value[s]);
        before[s].push_back(launched[s]);
        break;
      default: {
        const uint32_t t = rng() % kStreams;
        if (t == s || value[t] == 0)
          break;
        const uint64_t v = 1 + rng() % value[t];
        b.wait("step", s, t, v);
        for (int64_t l : before[t][v - 1])
          known[s].push_back(l);
      }
      }
    }
    auto bound = bind(b);
    std::vector<int64_t> order = runLogged(*bound);
    ASSERT_EQ(order.size(), static_cast<size_t>(id)) << "trial " << trial;
    std::map<int64_t, size_t> at;
    for (size_t k = 0; k < order.size(); ++k)
      at[order[k]] = k;
    for (const auto &[l, must] : after)
      for (int64_t m : must)
        EXPECT_LT(at[m], at[l]) << "trial " << trial << ": launch " << l
                                << " ran before " << m;
  }
}

TEST(Executor, RefusesUnknownProgramsAndSmallArenas) {
  PlanBuilder b = skeleton();
  log(b, 0, 1);
  auto bound = bind(b);
  absl::Status s = bound->run(plan::INIT);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "the plan has no INIT program");

  absl::StatusOr<std::unique_ptr<Executor>> small =
      Executor::create(bound->plan, bound->arena.data(), 64, nullptr, 0,
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
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(bound->run(plan::STEP).ok());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(seconds / 10000, 5e-6) << seconds << " s for 10000 launches";
}

} // namespace
} // namespace braid
