// What a pipeline's schedule traces (ScheduleTrace.h, one per rank) say,
// summed up for the simulator (braidc --sim-profile): the cost of each part
// of each stage, and the measured step and bubble to hold its prediction
// against.
//
// The first traced step warms up (allocations, first touches) and is left
// out whenever there are later ones. Within a step, the schedule's window
// is from the first part any rank begins to the last part any rank ends
// (the ranks' steady clocks are one clock on one machine); a rank's busy
// time is the union of its parts' spans, on every stream, so an overlapped
// FB pair counts once; its bubble is the rest of the window.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/profile/ScheduleTrace.h"

namespace braid {

struct PartCost {
  int64_t samples = 0;
  // Means over the samples: what a step adds up. CPU seconds of the
  // part's thread (its cost on a core of its own), and wall seconds.
  double cpu = 0;
  double wall = 0;
};

struct StageProfile {
  PartCost f, b, w;
};

struct TraceSummary {
  int64_t steps = 0; // steps summed (the warm-up left out)
  std::vector<StageProfile> stages;
  // Medians over the steps: the schedule's window and the host's whole
  // step (the window plus staging before it and the optimizer after it).
  double scheduleSeconds = 0;
  double stepSeconds = 0;
  // The mean hand-over of activations between ranks: from the end of a
  // micro-batch's forward on one stage to the start of its forward on the
  // next, where that stage's rank was idle waiting for it (the link's time
  // and the software's wake-ups together); 0 with no such sample.
  double handoffSeconds = 0;
  int64_t handoffSamples = 0;
  // The same for gradients: from the end of a micro-batch's B on one
  // stage (its last piece; or its W's end, where the W follows the B at
  // once, an FB pair's backward half) to the start of its B on the stage
  // before.
  double gradientHandoffSeconds = 0;
  int64_t gradientHandoffSamples = 0;
  // Per rank, means over the steps: busy seconds and busy / window.
  std::vector<double> busySeconds;
  std::vector<double> bubbleRatio;
};

// InvalidArgument when the traces hold no step with spans, when a stage
// below `numStages` lacks one of its parts (traced from another plan?), or
// when a span names a stage at or above `numStages`.
absl::StatusOr<TraceSummary> summarizeTraces(const std::vector<RankTrace> &ranks,
                                             int64_t numStages);

} // namespace braid
