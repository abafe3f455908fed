// Level-2 profile: where each marked part of a pipeline schedule ran. The
// step programs of a pipeline bracket every part (the forward, input
// gradient or weight gradient of one micro-batch through one stage) with a
// begin and an end Mark (plan.proto); while a trace is attached, the device
// timestamps each mark as its stream reaches it, and the trace pairs them
// into spans. braid-run --trace writes one trace per rank, in the Chrome
// trace-event format that Perfetto and chrome://tracing open, and
// braidc --sim-profile reads them back as the simulator's costs.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/plan/plan.pb.h"

namespace braid {

// A mark as the executor hands it to a device (plan.proto Mark).
struct MarkCall {
  plan::SchedulePart part = plan::PART_UNSPECIFIED;
  uint32_t stage = 0;
  int64_t microBatch = 0;
  bool end = false;
};

// "F", "B" or "W" (a trace event's name); "?" for PART_UNSPECIFIED.
const char *schedulePartName(plan::SchedulePart part);

// The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID).
double threadCpuSeconds();

class ScheduleTrace {
public:
  using Clock = std::chrono::steady_clock;

  struct Span {
    int64_t step = 0;
    uint32_t stream = 0;
    plan::SchedulePart part = plan::PART_UNSPECIFIED;
    uint32_t stage = 0;
    int64_t microBatch = 0;
    // Seconds on the steady clock (shared by every process of a machine).
    double begin = 0, end = 0;
    // CPU seconds the stream's thread spent between the marks: what the
    // part costs on a core of its own. A GPU's spans carry end - begin.
    double cpu = 0;
  };
  struct Step {
    int64_t step = 0;
    double begin = 0, end = 0; // steady-clock seconds
  };

  // Step `step` (1-based, as the progress lines count) starts and ends:
  // the step's wall time, from the host's view.
  void beginStep(int64_t step);
  void endStep();

  // A mark reached on `stream` at `at`, with the thread's CPU clock then
  // (threadCpuSeconds; ignored for a GPU's marks, pass a negative value).
  // Thread-safe: a device's streams call it from their own threads.
  void mark(uint32_t stream, const MarkCall &call, Clock::time_point at,
            double cpuSeconds);
  // A span timed elsewhere (a GPU's events), in the current step.
  void addSpan(Span span);

  std::vector<Span> spans() const;
  std::vector<Step> steps() const;
  // Marks that did not pair up (an end without its begin, or the other
  // way round). Zero for every plan the loader accepts.
  int64_t unpaired() const;

  // The trace in the Chrome trace-event format: one process per rank, one
  // thread per stream (and thread 0 for the steps), every span an "X"
  // event named F, B or W with its stage, micro-batch, step and CPU time
  // as args; `otherData` says the rank, the world and the format.
  std::string chromeJson(int rank, int worldSize) const;

private:
  struct Open {
    MarkCall call;
    double at = 0, cpu = 0;
  };
  mutable std::mutex mutex_;
  int64_t step_ = 0;
  std::vector<Step> steps_;
  std::vector<Span> spans_;
  std::map<uint32_t, Open> open_;
  int64_t unpaired_ = 0;
};

// A trace read back (braidc --sim-profile): the spans and steps of one
// rank's file. InvalidArgument naming the file and what is wrong.
struct RankTrace {
  int rank = 0;
  int worldSize = 1;
  std::vector<ScheduleTrace::Span> spans;
  std::vector<ScheduleTrace::Step> steps;
};
absl::StatusOr<RankTrace> parseScheduleTrace(const std::string &json,
                                             const std::string &name);

// Reads DIR/rank-N.json for every rank of the world the files state.
absl::StatusOr<std::vector<RankTrace>>
readScheduleTraces(const std::string &dir);

// The file of `rank` in a trace directory.
std::string traceFileName(const std::string &dir, int rank);

} // namespace braid
