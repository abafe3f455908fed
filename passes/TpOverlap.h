//===- TpOverlap.h - the TP sums hidden behind compute ----------*- C++ -*-===//
#pragma once

#include <cstdint>

#include "llvm/ADT/StringRef.h"
#include "mlir/Support/LogicalResult.h"

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
  // Paired: collectives moved whole to the TP stream.
  int64_t movedWhole = 0;
  // Micro-batches run two by two, interleaved (TpPairing.cpp).
  int64_t pairs = 0;
};

// Hides the TP group's sums of `step` (braid-overlap, see TpOverlap.cpp),
// cutting each row-parallel GEMM and its sum into up to `chunks` pieces;
// with `pairs`, then runs the step's micro-batches two by two. Fails, with
// an error on the op, where the pairing cannot order a micro-batch.
mlir::FailureOr<TpOverlapStats>
overlapTensorParallel(sched::ProgramOp step, int64_t chunks, bool pairs);

// The TP part's events and stream: `send` hands work from stream 0 to the
// TP stream, `back` hands it back.
struct TpPairingEvents {
  int32_t send = 0, back = 0;
  uint32_t stream = 0;
};

// On the ops of each micro-batch the TP part states out (an i64: which
// micro-batch, in program order; -1 on the ops outside every repeat).
constexpr llvm::StringLiteral kTpPairSlotAttr = "braid.tp_pair_slot";

// Interleaves each two micro-batches of `step` in turn (TpPairing.cpp),
// by the slots on their ops, which it removes; counts them in `pairs`.
mlir::LogicalResult pairMicroBatches(sched::ProgramOp step,
                                     const TpPairingEvents &events,
                                     int64_t &pairs);

} // namespace braid
