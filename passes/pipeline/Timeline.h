// The schedule picture: braidc --schedule-svg. One row per rank, time on
// the x axis, one colour per F, B, W and BW, overlapped FB pairs hatched,
// each box labelled with its micro-batch (and chunk where a rank has more
// than one), the idle time in a colour of its own with each rank's bubble
// written at the row's end, a time axis, and the stages' empty-layer
// padding listed under the rows.
#pragma once

#include <string>
#include <vector>

#include "passes/pipeline/Simulate.h"

namespace braid::pipeline {

struct TimelineLabels {
  std::string title;              // e.g. "1F1B, P=4, M=8"
  std::vector<std::string> notes; // lines under the picture (padding, ...)
  // Times are shown multiplied by `timeScale`, in `timeUnit` (e.g. 1e3 and
  // "ms" for a simulation in seconds); none: as they are.
  double timeScale = 1;
  std::string timeUnit;
};

// A standalone SVG document of `simulation`'s spans.
std::string timelineSvg(const Schedule &schedule, const Simulation &simulation,
                        const TimelineLabels &labels);

} // namespace braid::pipeline
