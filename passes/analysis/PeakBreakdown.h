//===- PeakBreakdown.h - what is live when most is live ---------*- C++ -*-===//
//
// The memory report's breakdown of a program's transient peak: at the
// instruction where the live transient bytes are largest, which buffers
// are live and why.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "passes/analysis/Liveness.h"

namespace braid {

struct PeakBreakdown {
  int64_t at = -1;  // index into the program's buffer users
  int64_t live = 0; // bytes live there (each rounded to the arena's 64)
  // Used by a forward op before the peak and by a backward op from there
  // on, by the transformer layer of their writer (of their first forward
  // reader, for a received buffer); savedOther: the embedding's, the
  // loss's and unmarked ops'.
  std::vector<int64_t> savedPerLayer;
  int64_t savedOther = 0;
  // Sent to or received from another pipeline rank and not saved: hidden
  // states and gradients on their way out, gradients on their way in,
  // receives posted ahead of the forward that reads them.
  int64_t transfers = 0;
  // Used by forward ops only, or by backward ops only (the recomputed
  // forward ops are backward ops).
  int64_t forwardTransient = 0;
  int64_t backwardTransient = 0;
};

// The breakdown of `ranges` (computeLiveRanges' over `users`) at the first
// user where the most bytes are live; sizes are rounded up to `alignment`,
// as the arena places them.
PeakBreakdown breakdownAtPeak(const std::vector<LiveRange> &ranges,
                              const std::vector<mlir::Operation *> &users,
                              int64_t alignment);

} // namespace braid
