// The per-step outputs of a training run: the progress line a person reads
// and the JSON-lines record a script reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

struct StepReport {
  int64_t step = 0; // 1-based
  int64_t totalSteps = 0;
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;
  double tokensPerSecond = 0;
  // Model FLOPs utilisation in [0, 1]; negative when unknown.
  double mfu = -1;
  // Estimated time to the end of this run; negative when unknown.
  double etaSeconds = -1;
  // The update was not applied: the loss or gradient norm was not finite.
  bool skipped = false;
  // Adaptive recompute, by world rank (StepResult's): empty without it.
  std::vector<int64_t> activationsKept;
  std::vector<int64_t> activationsRecomputed;
  // Hot-expert replication, by world rank (StepResult's): empty without it.
  std::vector<int64_t> passesReplicated;
  std::vector<int64_t> moePasses;
};

// "step   12/300 | loss 2.8431 | lr 1.80e-03 | grad_norm 0.912 |
//  41.2k tok/s | MFU 23.1% | ETA 0:01:47" (one line, no newline), ending
// with " | skipped: not finite" for a skipped step.
std::string formatProgressLine(const StepReport &report);

// {"step":12,"loss":2.84310007,"lr":0.00180000004,"grad_norm":0.912,
//  "tokens_per_s":41234.5} (one line, no newline), with "skipped":true
// added for a skipped step and, under adaptive recompute, each rank's
// recomputed expert activations ("experts_recomputed":[6,0]) and, under
// hot-expert replication, each rank's MoE layer passes that replicated
// ("experts_replicated":[2,2]). Floats use %.9g, enough to round-trip fp32;
// NaN and infinities, which JSON lacks, print as null.
std::string formatJsonLine(const StepReport &report);

// What adaptive recompute chose in `report`'s step, for the log when it
// changes: "adaptive recompute at step 3: rank 0 recomputes 6 of 16 expert
// activations, rank 1 keeps its 16" (one line, no newline; ranks holding no
// MoE layer left out, at most 8 ranks named).
std::string formatAdaptiveRecompute(const StepReport &report);

// What hot-expert replication did in `report`'s step, for the log when it
// switches: "hot-expert replication at step 4: on in MoE layer passes on
// rank 0: 2 of 4, rank 1: 2 of 4" (ranks without MoE layers left out, at
// most 8 named).
std::string formatReplication(const StepReport &report);

// The lines of a JSON-lines log (`text`) that record steps up to `step`, in
// order: what a run resumed from the checkpoint of `step` keeps before it
// appends, so that every step has one line. Lines of later steps, and a
// torn or foreign line, are dropped.
std::string logLinesThrough(std::string_view text, int64_t step);

} // namespace braid
