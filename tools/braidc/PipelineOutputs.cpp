#include "tools/braidc/PipelineOutputs.h"

#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/PipelineAttrs.h"
#include "passes/pipeline/Simulate.h"
#include "passes/pipeline/Timeline.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/profile/TraceSummary.h"

namespace braid {
namespace {

absl::Status writeTo(const std::string &path, const std::string &text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return absl::OkStatus();
  }
  return writeFileAtomically(path, text);
}

std::string title(const pipeline::Schedule &s) {
  std::string t = absl::StrCat(pipeline::familyName(s.family), ", ",
                               s.placement.ranks, " ranks");
  if (s.placement.chunks > 1)
    absl::StrAppend(&t, " x ", s.placement.chunks, " chunks");
  absl::StrAppend(&t, ", ", s.microBatches, " micro-batches");
  return t;
}

std::string bytes(double b) {
  if (b >= (1ull << 30))
    return absl::StrFormat("%.2f GiB", b / (1ull << 30));
  if (b >= (1ull << 20))
    return absl::StrFormat("%.2f MiB", b / (1ull << 20));
  return absl::StrFormat("%.1f KiB", b / 1024);
}

std::string report(const pipeline::Schedule &s, const pipeline::Partition &p,
                   const PipelineOutputs &outputs,
                   const pipeline::Simulation &sim,
                   const TraceSummary *measured) {
  const pipeline::Rates &rates = outputs.rates;
  std::string out = absl::StrCat("schedule ", title(s), "\n");
  for (const std::string &line : p.describe())
    absl::StrAppend(&out, "  ", line, "\n");
  if (p.padding() > 0)
    absl::StrAppend(&out, "  ", p.padding(),
                    " empty layers in all (padding: no compute, no memory)\n");
  if (measured == nullptr)
    absl::StrAppend(&out, absl::StrFormat("cost model: %.4g GFLOP/s per rank",
                                          rates.flopsPerSecond / 1e9));
  else
    absl::StrAppend(&out,
                    absl::StrFormat("cost model: the parts' mean CPU times "
                                    "over %d traced steps in %s",
                                    measured->steps, outputs.profileDir));
  // Measured transfers in whole microseconds: %g would turn a slow run's
  // 10 ms into 1e+04.
  if (measured != nullptr && measured->handoffSamples > 0)
    absl::StrAppend(
        &out,
        absl::StrFormat(", transfers of %.0f us (the mean of %d measured "
                        "hand-overs of activations)",
                        measured->handoffSeconds * 1e6,
                        measured->handoffSamples),
        measured->gradientHandoffSamples > 0
            ? absl::StrFormat(" and %.0f us (of %d of gradients)",
                              measured->gradientHandoffSeconds * 1e6,
                              measured->gradientHandoffSamples)
            : std::string());
  else
    absl::StrAppend(&out,
                    absl::StrFormat(", link %.4g us + %.4g GB/s per transfer",
                                    rates.linkLatency * 1e6,
                                    rates.linkBytesPerSecond / 1e9));
  absl::StrAppend(&out, outputs.cores > 0
                            ? absl::StrCat(", ", outputs.cores,
                                           " cores shared by the ranks\n")
                            : std::string(", a core per rank\n"));
  if (measured != nullptr) {
    absl::StrAppend(&out, "stage  F ms     B ms     W ms     (CPU; wall)\n");
    for (size_t i = 0; i < measured->stages.size(); ++i) {
      const StageProfile &st = measured->stages[i];
      absl::StrAppend(
          &out, absl::StrFormat("%-6d %-8.3f %-8.3f %-8.3f (%.3f %.3f %.3f)\n",
                                i, st.f.cpu * 1e3, st.b.cpu * 1e3,
                                st.w.cpu * 1e3, st.f.wall * 1e3,
                                st.b.wall * 1e3, st.w.wall * 1e3));
    }
  }
  absl::StrAppend(&out, absl::StrFormat("step time %.3f ms (simulated)",
                                        sim.stepTime * 1e3));
  if (measured != nullptr)
    absl::StrAppend(
        &out,
        absl::StrFormat(", %.3f ms measured: error %+.1f%%\n"
                        "(the schedule, first part to last; the whole step "
                        "measured %.3f ms with staging and the optimizer)",
                        measured->scheduleSeconds * 1e3,
                        (sim.stepTime / measured->scheduleSeconds - 1) * 100,
                        measured->stepSeconds * 1e3));
  absl::StrAppend(&out, "\nrank  busy ms   bubble ms  bubble  in flight  "
                        "activations",
                  measured ? "  measured busy ms  bubble" : "", "\n");
  for (size_t r = 0; r < sim.ranks.size(); ++r) {
    const pipeline::RankResult &rr = sim.ranks[r];
    absl::StrAppend(&out,
                    absl::StrFormat("%-5d %-10.3f %-10.3f %5.1f%%  %-10d %-11s",
                                    r, rr.busy * 1e3, rr.bubble * 1e3,
                                    rr.bubbleRatio * 100, rr.peakInFlight,
                                    bytes(rr.peakActivationBytes)));
    if (measured != nullptr)
      absl::StrAppend(&out, absl::StrFormat("  %-16.3f  %5.1f%%",
                                            measured->busySeconds[r] * 1e3,
                                            measured->bubbleRatio[r] * 100));
    absl::StrAppend(&out, "\n");
  }
  return out;
}

// The measured run in `dir`, for this schedule: one trace per pipeline rank.
absl::StatusOr<TraceSummary> readProfile(const std::string &dir,
                                         const pipeline::Schedule &schedule,
                                         int64_t stages) {
  absl::StatusOr<std::vector<RankTrace>> traces = readScheduleTraces(dir);
  if (!traces.ok())
    return traces.status();
  if (static_cast<int64_t>(traces->size()) != schedule.placement.ranks)
    return absl::InvalidArgumentError(absl::StrCat(
        "the traces in '", dir, "' are of ", traces->size(),
        " ranks, but the schedule has ", schedule.placement.ranks,
        " pipeline ranks (trace a run of this plan with data_parallel 1)"));
  return summarizeTraces(*traces, stages);
}

} // namespace

absl::Status writePipelineOutputs(mlir::ModuleOp module,
                                  const PipelineOutputs &outputs) {
  absl::StatusOr<pipeline::Schedule> schedule = readSchedule(module);
  if (!schedule.ok())
    return schedule.status();
  if (!outputs.scheduleJson.empty())
    if (absl::Status s =
            writeTo(outputs.scheduleJson, pipeline::scheduleJson(*schedule));
        !s.ok())
      return s;
  if (!outputs.simulate && outputs.svg.empty())
    return absl::OkStatus();
  absl::StatusOr<pipeline::Partition> partition = readPartition(module);
  if (!partition.ok())
    return partition.status();
  pipeline::CostModel costs =
      pipeline::costModel(modelShape(module), *partition, outputs.rates);
  costs.cores = outputs.cores;
  std::optional<TraceSummary> measured;
  if (!outputs.profileDir.empty()) {
    absl::StatusOr<TraceSummary> read = readProfile(
        outputs.profileDir, *schedule,
        static_cast<int64_t>(partition->stages.size()));
    if (!read.ok())
      return absl::Status(read.status().code(),
                          absl::StrCat("--sim-profile: ",
                                       read.status().message()));
    measured = std::move(*read);
    if (measured->handoffSamples > 0)
      costs.transfer = measured->handoffSeconds;
    if (measured->gradientHandoffSamples > 0)
      costs.gradientTransfer = measured->gradientHandoffSeconds;
    for (size_t i = 0; i < costs.stages.size(); ++i) {
      costs.stages[i].f = measured->stages[i].f.cpu;
      costs.stages[i].b = measured->stages[i].b.cpu;
      costs.stages[i].w = measured->stages[i].w.cpu;
    }
  }
  absl::StatusOr<pipeline::Simulation> sim =
      pipeline::simulate(*schedule, costs);
  if (!sim.ok())
    return sim.status();
  if (outputs.simulate)
    if (absl::Status s =
            writeTo("-", report(*schedule, *partition, outputs, *sim,
                                measured ? &*measured : nullptr));
        !s.ok())
      return s;
  if (!outputs.svg.empty()) {
    pipeline::TimelineLabels labels;
    labels.title = title(*schedule);
    labels.timeScale = 1e3;
    labels.timeUnit = "ms";
    for (size_t i = 0; i < partition->stages.size(); ++i)
      if (partition->stages[i].padding > 0)
        labels.notes.push_back(partition->describe()[i]);
    if (!labels.notes.empty())
      labels.notes.insert(
          labels.notes.begin(),
          absl::StrCat("padding: ", partition->padding(), " empty layers"));
    if (absl::Status s = writeTo(
            outputs.svg, pipeline::timelineSvg(*schedule, *sim, labels));
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

} // namespace braid
