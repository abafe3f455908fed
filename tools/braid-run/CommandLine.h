// braid-run's command line: flags, their values and the usage text.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/ckpt/ShardIndex.h"
#include "runtime/comm/EmulatedLink.h"

namespace braid {

struct CommandLine {
  bool help = false;
  std::string planPath; // empty when the plan is embedded
  std::string dataPath;
  std::optional<std::string> dataFormat;
  int64_t steps = 0;     // 0: the plan's (or the checkpoint's) total
  int64_t stopAfter = 0; // 0: run to the end
  bool shuffle = false;
  std::string logPath;
  std::string saveDir;
  int64_t saveInterval = 0;
  // --save-shard-size: the most tensor bytes of one model shard.
  uint64_t saveShardBytes = ckpt::kDefaultMaxShardBytes;
  bool saveShardSizeGiven = false;
  std::string resumeDir;
  // Full field names (RunIdentity.h) that may differ on resume.
  std::set<std::string> allowChanges;
  int64_t skipNonfinite = 0;
  int threads = 0; // 0: the default thread count
  std::string device = "cpu";
  bool cudaGraphs = true; // --cuda-graphs=on|off (CUDA only)
  double peakGflops = 0; // 0: measure
  // Multi-rank runs: how long a collective may take before the rank stops
  // the job (the watchdog, docs/parallel.md).
  double commTimeoutSeconds = 300;
  // Benchmarks: hold every collective for a slower link (EmulatedLink.h).
  std::optional<LinkModel> emulateLink;
  // The axes it applies to (Ranks::emulateLink); empty: all.
  std::set<std::string> emulateLinkAxes;
  bool quiet = false;
  bool profile = false;
  // Time the schedule's marks into DIR/rank-N.json (ScheduleTrace.h).
  std::string traceDir;
};

// Parses argv[1..]. `embeddedPlan` says whether this executable carries its
// plan, in which case no PLAN argument is taken. InvalidArgument with a
// sentence naming the flag for an unknown flag, a missing or malformed
// value, or a missing required argument.
absl::StatusOr<CommandLine>
parseCommandLine(const std::vector<std::string> &args, bool embeddedPlan);

// The --help text for `program` (argv[0]).
std::string usage(const std::string &program, bool embeddedPlan);

} // namespace braid
