#include "tools/braidc/PipelineOutputs.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/PipelineAttrs.h"
#include "passes/pipeline/Simulate.h"
#include "passes/pipeline/Timeline.h"
#include "runtime/io/AtomicFile.h"

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
                   const pipeline::Rates &rates,
                   const pipeline::Simulation &sim) {
  std::string out = absl::StrCat("schedule ", title(s), "\n");
  for (const std::string &line : p.describe())
    absl::StrAppend(&out, "  ", line, "\n");
  if (p.padding() > 0)
    absl::StrAppend(&out, "  ", p.padding(),
                    " empty layers in all (padding: no compute, no memory)\n");
  absl::StrAppend(
      &out, absl::StrFormat("cost model: %.4g GFLOP/s per rank, link "
                            "%.4g us + %.4g GB/s per transfer\n",
                            rates.flopsPerSecond / 1e9, rates.linkLatency * 1e6,
                            rates.linkBytesPerSecond / 1e9));
  absl::StrAppend(&out, absl::StrFormat("step time %.3f ms (simulated)\n",
                                        sim.stepTime * 1e3));
  absl::StrAppend(&out, "rank  busy ms   bubble ms  bubble  in flight  "
                        "activations\n");
  for (size_t r = 0; r < sim.ranks.size(); ++r) {
    const pipeline::RankResult &rr = sim.ranks[r];
    absl::StrAppend(&out,
                    absl::StrFormat("%-5d %-10.3f %-10.3f %5.1f%%  %-10d %s\n",
                                    r, rr.busy * 1e3, rr.bubble * 1e3,
                                    rr.bubbleRatio * 100, rr.peakInFlight,
                                    bytes(rr.peakActivationBytes)));
  }
  return out;
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
  const pipeline::CostModel costs =
      pipeline::costModel(modelShape(module), *partition, outputs.rates);
  absl::StatusOr<pipeline::Simulation> sim =
      pipeline::simulate(*schedule, costs);
  if (!sim.ok())
    return sim.status();
  if (outputs.simulate)
    if (absl::Status s =
            writeTo("-", report(*schedule, *partition, outputs.rates, *sim));
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
