//===- TpOverlap.h - the TP sums hidden behind compute ----------*- C++ -*-===//
#pragma once

#include <cstdint>

#include "dialects/sched/SchedOps.h"

namespace braid {

struct TpOverlapStats {
  // Row-parallel GEMMs computed and summed piece by piece.
  int64_t chunkedGemms = 0;
  // Backward sums moved to the TP stream, behind weight-gradient launches.
  int64_t hiddenSums = 0;
  // Sequence parallel: all-gathers decomposed into a ring beside the GEMMs
  // that read them, and reduce-scatters beside the GEMMs that make them.
  int64_t gatherRings = 0;
  int64_t scatterRings = 0;
  // Sequence parallel: other all-gathers (backward's re-gathers for the
  // weight gradients) passed round the ring ahead of their reader.
  int64_t prefetchedGathers = 0;
};

// Hides the TP group's sums of `step` (braid-overlap, see TpOverlap.cpp),
// cutting each row-parallel GEMM and its sum into up to `chunks` pieces.
TpOverlapStats overlapTensorParallel(sched::ProgramOp step, int64_t chunks);

} // namespace braid
