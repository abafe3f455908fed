//===- EpOverlap.h - expert parallel's exchanges beside compute -*- C++ -*-===//
#pragma once

#include <cstdint>

#include "mlir/Support/LogicalResult.h"

#include "dialects/sched/SchedOps.h"

namespace braid {

struct EpOverlapStats {
  // Collectives along ep moved to the EP stream.
  int64_t exchanges = 0;
  // Of them, those with compute of their own layer placed beside them.
  int64_t hidden = 0;
};

// Runs the collectives along ep of `program` (expert parallel's count
// gathers, dispatches and combines) on a stream of their own, and orders
// each layer's ops so that compute that does not need an exchange runs
// while it is in flight (braid-overlap, see EpOverlap.cpp).
EpOverlapStats overlapExpertParallel(sched::ProgramOp program);

} // namespace braid
