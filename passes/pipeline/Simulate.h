// The pipeline simulator and the static check: one event-driven engine
// that runs a Schedule over per-entry costs.
//
// The model of execution (what the step program does, and what the check
// proves cannot deadlock):
//   - each rank has one compute stream that runs its entries in order;
//   - an entry that needs a tensor from another rank (F: the activations
//     from the previous stage; B, BW: the gradient from the next stage; FB:
//     both of its halves' inputs) receives it; the entry starts when the
//     stream is free and every receive it needs has completed;
//   - an entry that feeds another rank (F: to the next stage; B, BW: to
//     the previous one) sends when it ends;
//   - per ordered pair of ranks and per kind (activations, gradients),
//     sends leave in the order the sender ran its entries and receives
//     are posted in the order the receiver runs its entries, a receive no
//     earlier than when the entry before it starts (one entry of
//     look-ahead); a transfer completes, after the transfer time, once its
//     send and its receive are both at the head of their queues
//     (rendezvous, as for large messages), and that channel's next
//     transfer starts after it. The two kinds' channels are independent
//     (the step program tags them apart and posts them on streams of
//     their own): DualPipeV needs it from P = 4 on, where rank 0 sends an
//     activation that rank 1 receives only after a gradient it sends
//     later;
//   - within an FB, the forward half's receive and send come before the
//     backward half's;
//   - stages on the same rank (DualPipeV's turn at rank P - 1) hand over
//     in memory, with no transfer;
//   - W needs its own B on the same rank, and B, BW need their own F.
// A state where no stream can move before every entry has run is a
// deadlock.
//
// Where the ranks' compute is: by default every rank has its own, and an
// entry runs for its cost. With CostModel::cores > 0 the ranks share that
// many cores (P ranks of one thread each, oversubscribed on fewer cores) by
// processor sharing: an entry's compute is an activity of its cost, in
// seconds on a core of its own, and while k activities run machine-wide
// each one progresses at min(1, cores / k) of a core. An FB is two
// activities, its forward half (f of its forward stage) and its backward
// half (b + w of its backward stage), that start together when the entry
// starts; the entry ends when both have, so an FB that has the cores to
// itself takes max(f, b + w) and fbShare plays no part. Transfers use no
// core. Order, receives, channels and deadlocks are as above: which
// entries run and which transfer meets which do not depend on the costs,
// so a schedule deadlocks, and says why, the same in both modes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pipeline/Schedule.h"

namespace braid::pipeline {

// Cost of each entry per stage, in any time unit (seconds from a profile,
// or 1 for the closed forms). Index: stage in model order.
struct StageCosts {
  double f = 1;               // forward
  double b = 1;               // input gradient (B)
  double w = 1;               // weight gradient (W); BW costs b + w
  double activationBytes = 0; // held per micro-batch from F until its
                              // backward is done (W, or BW)
};

struct CostModel {
  std::vector<StageCosts> stages; // one per stage, or empty: all default
  double transfer = 0;            // time of one send between ranks
  // Of a gradient's send, where it differs (negative: `transfer`).
  double gradientTransfer = -1;
  // Time of an overlapped FB pair, from its two halves' times f and bw
  // (negative: f + bw, no overlap gain). E.g. 0.9 * (f + bw). Unused where
  // the ranks share cores: an FB's halves share them as two activities.
  double fbShare = -1;
  // Cores the ranks share, by processor sharing (above); 0: every rank
  // computes on a core of its own.
  int64_t cores = 0;

  const StageCosts &stage(int64_t s) const;
  double fbCost(double f, double bw) const;
};

struct Span {
  Entry entry;
  double start = 0, end = 0;
};

struct RankResult {
  std::vector<Span> spans; // in run order
  double busy = 0;         // sum of entry times (end - start)
  double bubble = 0;       // step time - busy
  double bubbleRatio = 0;  // bubble / step time
  // Micro-batch chunks whose forward has started and whose backward (W or
  // BW) has not ended, at most, and the activation bytes they hold.
  int64_t peakInFlight = 0;
  double peakActivationBytes = 0;
};

struct Simulation {
  double stepTime = 0; // the last entry's end, over all ranks
  std::vector<RankResult> ranks;
};

// Runs `schedule`. An incomplete schedule (an F without its backward, a
// backward twice or before its F, a W before its B, a B without a W) or
// one that deadlocks is a FailedPrecondition error naming the rank, the
// micro-batch, the chunk and the entry that cannot proceed; for a deadlock,
// every stuck rank's entry and what it waits for. An entry outside the
// schedule's micro-batches or chunks, orders for another number of ranks
// than the placement's, costs for another number of stages, a negative
// cost or a negative number of cores is an InvalidArgument error. Linear
// in the number of entries; on shared cores, in the number of entries
// times the number of ranks.
absl::StatusOr<Simulation> simulate(const Schedule &schedule,
                                    const CostModel &costs);

// The static check before a plan is written: simulate() with unit costs
// and a core per rank, its result dropped.
absl::Status checkSchedule(const Schedule &schedule);

} // namespace braid::pipeline
