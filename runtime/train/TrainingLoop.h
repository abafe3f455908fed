// The training run braid-run performs: start-up reports, one progress line
// and one JSON log record per step, periodic and final checkpoints, the
// policy for steps that are not finite, and a graceful stop on SIGINT,
// SIGTERM and SIGHUP (see StopSignal.h; installing the handlers is the
// caller's choice).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/train/Trainer.h"

namespace braid {

struct RunOptions {
  // JSON-lines log; empty: none. Truncated when the run starts at step 0;
  // when it continues a checkpoint, cut back to the checkpoint's step (so
  // the steps redone after it are not logged twice) and appended to.
  std::string logPath;
  // Checkpoints go to saveDir/step-NNNNNN; empty: no checkpoints.
  std::string saveDir;
  // This rank writes no checkpoint but takes part in each one rank 0
  // writes (its shards are gathered): it saves when rank 0 does.
  bool checkpointPeer = false;
  // Save every saveInterval steps (0: only at the end or on a stop).
  int64_t saveInterval = 0;
  // How checkpoints lay the parameters out (one file, or shards).
  CheckpointLayout checkpointLayout;
  // Stop after this step (0: run to the trainer's total).
  int64_t stopAfter = 0;
  // Steps whose loss or gradient norm is not finite are never applied. Up
  // to this many of them are skipped (and logged); one more stops the run.
  int64_t skipNonfinite = 0;
  // No start-up report or progress lines (errors still print).
  bool quiet = false;
  // Several ranks: only the first (the one that saves) reports a stop.
  bool reportStop = true;
  // Print the time spent in each kernel at the end of the run.
  bool profile = false;
  // Time every mark of the step programs (the pipeline's schedule) and
  // write this rank's trace to traceDir/rank-<rank>.json at the end
  // (ScheduleTrace.h); empty: no trace.
  std::string traceDir;
  int rank = 0;
  // Peak GFLOP/s for MFU; 0: measure sgemm at start-up.
  double peakGflops = 0;
  FILE *out = stdout;
  FILE *err = stderr;
};

// Trains from the trainer's current step to its total (or options.stopAfter)
// and returns the process exit code: 0 when it reached its last step, 128 +
// the signal number when a signal stopped it (after finishing the step in
// flight and saving a checkpoint when saveDir is set). An error status for
// an unwritable log or checkpoint, or a step that is not finite beyond
// options.skipNonfinite; its message names the step and the last
// checkpoint (whose values are all finite) to resume from.
absl::StatusOr<int> runTraining(Trainer &trainer, const RunOptions &options);

} // namespace braid
