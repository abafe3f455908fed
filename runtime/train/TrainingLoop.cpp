#include "runtime/train/TrainingLoop.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/profile/KernelProfile.h"
#include "runtime/profile/ScheduleTrace.h"
#include "absl/strings/str_format.h"
#include "runtime/train/HumanUnits.h"
#include "runtime/train/MemoryReport.h"
#include "runtime/train/PeakFlops.h"
#include "runtime/train/ProgressLog.h"
#include "runtime/train/StopSignal.h"
#include "runtime/ckpt/Checkpoint.h"
#include "runtime/io/WholeFile.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/io/AtomicFile.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;
using File = std::unique_ptr<FILE, int (*)(FILE *)>;

// The measurement MFU is computed against, printed so that a reader knows
// what "100%" means.
double peakGflops(const Trainer &trainer, const RunOptions &options) {
  if (options.peakGflops > 0) {
    std::fprintf(options.out, "peak: %.1f GFLOP/s (from --peak-gflops)\n",
                 options.peakGflops);
    return options.peakGflops;
  }
  const DeviceInfo &device = trainer.deviceInfo();
  if (device.kind == Device::kCUDA) {
    if (!device.peakGflops) {
      std::fprintf(options.out,
                   "peak: unknown for %s (pass --peak-gflops for MFU)\n",
                   device.name.c_str());
      return 0;
    }
    std::fprintf(options.out,
                 "peak: %.1f GFLOP/s (dense bf16 datasheet figure of %s)\n",
                 *device.peakGflops, device.name.c_str());
    return *device.peakGflops;
  }
  PeakMeasurement m = measureSgemmPeak(0.3);
  std::fprintf(options.out,
               "peak: %.1f GFLOP/s (measured: best of %d sgemm %dx%dx%d)\n",
               m.gflops, m.products, m.size, m.size, m.size);
  return m.gflops;
}

void printStartup(const Trainer &trainer, const RunOptions &options) {
  const plan::Plan &plan = trainer.plan().proto;
  const plan::TrainConfig &t = plan.train();
  const DataLoader &data = trainer.data();
  const DeviceInfo &device = trainer.deviceInfo();
  std::string where =
      device.kind == Device::kCUDA
          ? absl::StrFormat("%s (%s), CUDA graphs %s", device.name,
                            humanBytes(device.memoryBytes),
                            device.cudaGraphs ? "on" : "off")
          : absl::StrFormat("%d threads", trainer.numThreads());
  // A pipeline rank reports its own stage's plan, and says which it is.
  const std::string stage =
      trainer.pipelineSize() > 1
          ? absl::StrFormat(" (pipeline rank %d of %d)",
                            trainer.pipelineRank(), trainer.pipelineSize())
          : std::string();
  std::string text = absl::StrFormat(
      "plan %s%s: %s, %s parameters, %d stream%s | batch %d x %d "
      "micro-batches x %d tokens | %s\n",
      plan.name(), stage, plan.model().family(),
      humanCount(static_cast<double>(plan.model().num_parameters())),
      plan.num_streams(), plan.num_streams() == 1 ? "" : "s",
      t.micro_batch_size(), t.num_micro_batches(), t.seq_len(), where);
  absl::StrAppend(&text,
                  formatMemoryReport(plan.memory(),
                                     precisionName(plan.train().precision()),
                                     trainer.pipelineSize() > 1
                                         ? trainer.pipelineRank()
                                         : -1),
                  absl::StrFormat(", %d bytes allocated",
                                  trainer.device().arenaBytes()),
                  trainer.device().hostArenaBytes() > 0
                      ? absl::StrFormat(" (and %d in the host arena)",
                                        trainer.device().hostArenaBytes())
                      : std::string(),
                  "\n");
  absl::StrAppend(
      &text, absl::StrFormat(
                 "data: '%s' (%s), %d tokens, %d windows of %d%s\n",
                 data.data().origin(), tokenFormatName(data.data().format()),
                 data.data().size(), data.numWindows(), data.seqLen() + 1,
                 data.shuffled() ? ", shuffled" : ""));
  std::fputs(text.c_str(), options.out);
}

// What the run touched of an arena (`arena`: "arena" or "host arena"),
// against what the plan predicted: every rank says so when they differ,
// the first prints both.
void reportHighWater(const Trainer &trainer, const RunOptions &options,
                     const char *arena, uint64_t touched, uint64_t planned) {
  if (!options.quiet)
    std::fprintf(options.out,
                 "%s high-water mark: %llu bytes measured, %llu planned%s\n",
                 arena, static_cast<unsigned long long>(touched),
                 static_cast<unsigned long long>(planned),
                 touched == planned ? " (equal)" : "");
  if (touched != planned)
    std::fprintf(options.err,
                 "braid-run: warning: rank %lld touched %llu bytes of its "
                 "%s, the plan predicted %llu\n",
                 static_cast<long long>(trainer.worldRank()),
                 static_cast<unsigned long long>(touched), arena,
                 static_cast<unsigned long long>(planned));
}

absl::Status save(Trainer &trainer, const RunOptions &options) {
  absl::StatusOr<std::string> dir =
      trainer.saveCheckpoint(options.saveDir, options.checkpointLayout);
  if (!dir.ok())
    return dir.status();
  if (!options.quiet && !dir->empty())
    std::fprintf(options.out, "saved checkpoint %s\n", dir->c_str());
  return absl::OkStatus();
}

// Where to go from a step that was not applied.
std::string resumeAdvice(const Trainer &trainer) {
  if (trainer.lastCheckpoint().empty())
    return "No checkpoint was saved in this run (--save-dir with "
           "--save-interval keeps one)";
  return absl::StrCat("The last checkpoint, all of whose values are "
                      "finite, is ",
                      trainer.lastCheckpoint(),
                      ": resume from it with a lower learning rate "
                      "(--allow-change=lr), or pass --skip-nonfinite N to "
                      "skip up to N such steps");
}

std::string number(double v) {
  return std::isnan(v) ? "NaN" : absl::StrFormat("%g", v);
}

std::string nonFiniteStep(const StepResult &r) {
  return absl::StrCat("step ", r.step, ": the loss is ", number(r.loss),
                      " and the gradient norm is ", number(r.gradNorm),
                      ", not both finite, so its update was not applied");
}

// Opens the JSON-lines log: truncated for a run from step 0; for a resumed
// run, cut back to the steps up to the checkpoint and appended to.
absl::StatusOr<File> openLog(const std::string &path, int64_t stepsDone) {
  if (stepsDone > 0) {
    absl::StatusOr<std::string> old = readWholeFile(path, "log");
    if (old.ok()) {
      std::string kept = logLinesThrough(*old, stepsDone);
      if (kept.size() != old->size())
        if (absl::Status s = writeFileAtomically(path, kept); !s.ok())
          return s;
    } else if (!absl::IsNotFound(old.status())) {
      return old.status();
    }
  }
  File log(std::fopen(path.c_str(), stepsDone == 0 ? "w" : "a"), &std::fclose);
  if (!log)
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open the log file '", path, "': ", std::strerror(errno)));
  return log;
}

// Writes this rank's trace, and says where (rank 0 speaks for the run).
absl::Status writeTrace(const ScheduleTrace &trace, const Trainer &trainer,
                        const RunOptions &options) {
  const std::string path = traceFileName(options.traceDir, options.rank);
  if (absl::Status s = writeFileAtomically(
          path, trace.chromeJson(options.rank,
                                 static_cast<int>(trainer.worldSize())));
      !s.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("--trace: ", s.message()));
  if (trace.unpaired() > 0)
    return absl::InternalError(absl::StrCat(
        "--trace: ", trace.unpaired(), " marks of the step program did not "
        "pair up; the trace in '", path, "' is incomplete"));
  if (options.quiet)
    return absl::OkStatus();
  const size_t spans = trace.spans().size();
  std::fprintf(options.out, "schedule trace: %zu steps, %zu spans in %s%s\n",
               trace.steps().size(), spans,
               trainer.worldSize() > 1
                   ? absl::StrCat(options.traceDir, "/rank-N.json (one per "
                                                    "rank)")
                         .c_str()
                   : path.c_str(),
               spans == 0 ? "; the plan marks no schedule (pipeline plans "
                            "do), so the trace holds the steps only"
                          : "");
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<int> runTraining(Trainer &trainer, const RunOptions &options) {
  const int64_t total = trainer.totalSteps();
  const int64_t last =
      options.stopAfter > 0 ? std::min(options.stopAfter, total) : total;
  double peak = 0;
  if (!options.quiet) {
    printStartup(trainer, options);
    peak = peakGflops(trainer, options);
    std::fflush(options.out);
  }
  // A checkpoint directory that cannot be made is an error now, not after
  // the last step. What a process that died while saving left is tidied.
  const bool saving = !options.saveDir.empty() || options.checkpointPeer;
  if (!options.saveDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.saveDir, ec);
    if (!std::filesystem::is_directory(options.saveDir))
      return absl::InvalidArgumentError(absl::StrCat(
          "--save-dir '", options.saveDir, "' is not a directory and cannot "
          "be created", ec ? absl::StrCat(": ", ec.message()) : ""));
    for (const std::string &note : recoverCheckpointDir(options.saveDir))
      std::fprintf(options.err, "braid-run: %s\n", note.c_str());
  }
  File log(nullptr, &std::fclose);
  if (!options.logPath.empty()) {
    absl::StatusOr<File> opened = openLog(options.logPath, trainer.stepsDone());
    if (!opened.ok())
      return opened.status();
    log = std::move(*opened);
  }

  std::optional<ScheduleTrace> trace;
  if (!options.traceDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.traceDir, ec);
    if (!std::filesystem::is_directory(options.traceDir))
      return absl::InvalidArgumentError(absl::StrCat(
          "--trace '", options.traceDir, "' is not a directory and cannot "
          "be created", ec ? absl::StrCat(": ", ec.message()) : ""));
    trace.emplace();
    trainer.setTrace(&*trace);
  }

  const double flopsPerToken = trainer.plan().proto.model().flops_per_token();
  const int64_t firstStep = trainer.stepsDone();
  KernelProfile profile;
  if (options.profile)
    trainer.setProfile(&profile);
  // However the run ends, the device keeps no pointer to them.
  absl::Cleanup detach = [&trainer] {
    trainer.setProfile(nullptr);
    trainer.setTrace(nullptr);
  };
  const Clock::time_point runStart = Clock::now();
  bool savedLast = false;
  int64_t skippedHere = 0;
  std::vector<int64_t> lastRecomputed;
  std::vector<int64_t> lastReplicated;
  int stop = 0;
  while (trainer.stepsDone() < last) {
    // Every rank stops after the same step, whichever got the signal.
    absl::StatusOr<int> agreed = trainer.agreeOnStop(stopSignal());
    if (!agreed.ok())
      return agreed.status();
    if ((stop = *agreed) != 0)
      break;
    if (trace)
      trace->beginStep(trainer.stepsDone() + 1);
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<StepResult> r = trainer.trainStep();
    if (!r.ok())
      return r.status();
    const Clock::time_point t1 = Clock::now();
    if (trace)
      trace->endStep();
    const double stepSeconds = std::chrono::duration<double>(t1 - t0).count();
    const double runSeconds =
        std::chrono::duration<double>(t1 - runStart).count();
    const int64_t doneHere = r->step - firstStep;

    StepReport report;
    report.step = r->step;
    report.totalSteps = total;
    report.loss = r->loss;
    report.lr = r->lr;
    report.gradNorm = r->gradNorm;
    report.skipped = r->skipped;
    report.activationsKept = r->activationsKept;
    report.activationsRecomputed = r->activationsRecomputed;
    report.passesReplicated = r->passesReplicated;
    report.moePasses = r->moePasses;
    report.tokensPerSecond =
        stepSeconds > 0 ? trainer.tokensPerStep() / stepSeconds : 0;
    // Tokens per second are the whole run's, the peak one rank's.
    if (peak > 0 && flopsPerToken > 0)
      report.mfu = report.tokensPerSecond * flopsPerToken /
                   (peak * 1e9 * static_cast<double>(trainer.worldSize()));
    report.etaSeconds = runSeconds / doneHere * (last - r->step);
    if (!options.quiet) {
      std::fprintf(options.out, "%s\n", formatProgressLine(report).c_str());
      std::fflush(options.out);
    }
    // Adaptive recompute's choices, when they change (and at the start).
    if (!options.quiet && !report.activationsRecomputed.empty() &&
        report.activationsRecomputed != lastRecomputed) {
      std::fprintf(options.out, "%s\n",
                   formatAdaptiveRecompute(report).c_str());
      std::fflush(options.out);
      lastRecomputed = report.activationsRecomputed;
    }
    // Hot-expert replication, when it switches (and at the start).
    if (!options.quiet && !report.passesReplicated.empty() &&
        report.passesReplicated != lastReplicated) {
      std::fprintf(options.out, "%s\n", formatReplication(report).c_str());
      std::fflush(options.out);
      lastReplicated = report.passesReplicated;
    }
    if (log) {
      std::fprintf(log.get(), "%s\n", formatJsonLine(report).c_str());
      if (std::fflush(log.get()) != 0)
        return absl::InvalidArgumentError(
            absl::StrCat("cannot write the log file '", options.logPath,
                         "': ", std::strerror(errno)));
    }
    if (!r->skipped && !(std::isfinite(r->loss) && std::isfinite(r->gradNorm)))
      return absl::InternalError(absl::StrCat(
          "step ", r->step, ": the loss is ", r->loss,
          " and the gradient norm is ", r->gradNorm,
          ", yet the plan applied the update: its optimizer program has no "
          "step_guard; recompile the spec with this release's braidc"));
    if (r->skipped) {
      if (++skippedHere > options.skipNonfinite)
        return absl::FailedPreconditionError(absl::StrCat(
            nonFiniteStep(*r), "; stopping",
            options.skipNonfinite > 0
                ? absl::StrCat(" after ", options.skipNonfinite,
                               " skipped steps (--skip-nonfinite)")
                : "",
            ". ", resumeAdvice(trainer)));
      std::fprintf(options.err, "braid-run: %s; skipped (%lld of %lld "
                   "allowed by --skip-nonfinite)\n",
                   nonFiniteStep(*r).c_str(),
                   static_cast<long long>(skippedHere),
                   static_cast<long long>(options.skipNonfinite));
    }
    savedLast = false;
    if (saving && options.saveInterval > 0 &&
        r->step % options.saveInterval == 0) {
      if (absl::Status s = save(trainer, options); !s.ok())
        return s;
      savedLast = true;
    }
  }

  if (options.profile) {
    trainer.setProfile(nullptr);
    std::fprintf(options.out, "kernel profile over %lld steps:\n%s",
                 static_cast<long long>(trainer.stepsDone() - firstStep),
                 profile.format(trainer.stepsDone() - firstStep).c_str());
  }
  if (trace) {
    trainer.setTrace(nullptr);
    if (absl::Status s = writeTrace(*trace, trainer, options); !s.ok())
      return s;
  }
  if (trainer.stepsDone() > firstStep) {
    const DeviceStats stats = trainer.device().stats();
    const plan::MemoryReport &memory = trainer.plan().proto.memory();
    reportHighWater(trainer, options, "arena", stats.arenaHighWater,
                    memory.arena_bytes());
    if (memory.host_bytes() > 0)
      reportHighWater(trainer, options, "host arena", stats.hostArenaHighWater,
                      memory.host_bytes());
  }
  if (trainer.deviceInfo().kind == Device::kCUDA && !options.quiet) {
    const DeviceStats stats = trainer.device().stats();
    std::fprintf(options.out,
                 "program runs: %lld eager, %lld captured into CUDA graphs, "
                 "%lld graph replays\n",
                 static_cast<long long>(stats.eagerRuns),
                 static_cast<long long>(stats.graphCaptures),
                 static_cast<long long>(stats.graphReplays));
  }
  if (saving && !savedLast &&
      trainer.stepsDone() > firstStep) {
    if (absl::Status s = save(trainer, options); !s.ok())
      return s;
  }
  if (int sig = stop; sig != 0) {
    std::string next =
        !trainer.lastCheckpoint().empty()
            ? absl::StrCat("; resume with --resume ", trainer.lastCheckpoint())
        : options.saveDir.empty()
            ? std::string(" (no --save-dir: progress was not saved)")
            : std::string(" (no step finished, so nothing was saved)");
    if (options.reportStop)
      std::fprintf(options.err,
                   "braid-run: stopped by %s after step %lld of %lld%s\n",
                   stopSignalName(sig),
                   static_cast<long long>(trainer.stepsDone()),
                   static_cast<long long>(total), next.c_str());
    return 128 + sig;
  }
  return 0;
}

} // namespace braid
