#include "runtime/profile/TraceSummary.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace braid {
namespace {

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double> &v) {
  double sum = 0;
  for (double x : v)
    sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// The length of the union of [begin, end) intervals.
double unionLength(std::vector<std::pair<double, double>> spans) {
  std::sort(spans.begin(), spans.end());
  double total = 0, from = 0, to = 0;
  bool open = false;
  for (auto [b, e] : spans) {
    if (open && b <= to) {
      to = std::max(to, e);
      continue;
    }
    if (open)
      total += to - from;
    from = b;
    to = e;
    open = true;
  }
  return open ? total + (to - from) : total;
}

// The hand-overs of TraceSummary::handoffSeconds (`gradients` false) or
// gradientHandoffSeconds (true), in the steps `steps`.
std::vector<double> handoffSamples(const std::vector<RankTrace> &ranks,
                                   const std::set<int64_t> &steps,
                                   bool gradients) {
  // Each part's rank and span, by (part, step, stage, micro-batch).
  using Key = std::tuple<int, int64_t, uint32_t, int64_t>;
  std::map<Key, std::pair<size_t, const ScheduleTrace::Span *>> parts;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const ScheduleTrace::Span &s : ranks[r].spans)
      if (steps.count(s.step))
        parts[{static_cast<int>(s.part), s.step, s.stage, s.microBatch}] = {
            r, &s};
  const int kind = gradients ? plan::PART_B : plan::PART_F;
  std::vector<double> out;
  for (const auto &[key, here] : parts) {
    const auto &[part, step, stage, mb] = key;
    if (part != kind || (!gradients && stage == 0))
      continue;
    const uint32_t fromStage = gradients ? stage + 1 : stage - 1;
    auto from = parts.find({kind, step, fromStage, mb});
    if (from == parts.end() || from->second.first == here.first)
      continue; // the first (or last) stage, or a hand-over in memory
    double sent = from->second.second->end;
    // A whole backward (BW) sends once its W is done: a W of the same
    // stage and micro-batch that follows the B on its stream at once.
    if (gradients) {
      auto w = parts.find({plan::PART_W, step, fromStage, mb});
      if (w != parts.end() && w->second.first == from->second.first &&
          w->second.second->stream == from->second.second->stream &&
          w->second.second->begin >= sent &&
          w->second.second->begin - sent < 50e-6)
        sent = w->second.second->end;
    }
    const double started = here.second->begin;
    if (started < sent)
      continue;
    // Idle: no span of the receiving rank ends between the send and the
    // start.
    bool idle = true;
    for (const ScheduleTrace::Span &s : ranks[here.first].spans)
      if (s.step == step && s.end > sent && s.end <= started) {
        idle = false;
        break;
      }
    if (idle)
      out.push_back(started - sent);
  }
  return out;
}

} // namespace

absl::StatusOr<TraceSummary> summarizeTraces(const std::vector<RankTrace> &ranks,
                                             int64_t numStages) {
  std::set<int64_t> stepsSeen;
  for (const RankTrace &r : ranks)
    for (const ScheduleTrace::Span &s : r.spans) {
      if (s.stage >= numStages)
        return absl::InvalidArgumentError(absl::StrCat(
            "the trace of rank ", r.rank, " has a part of stage ", s.stage,
            ", but the schedule has ", numStages,
            " stages: was it traced from this spec's plan?"));
      stepsSeen.insert(s.step);
    }
  if (stepsSeen.empty())
    return absl::InvalidArgumentError(
        "the traces hold no part of a schedule: trace a pipeline plan "
        "(pipeline_parallel above 1) with braid-run --trace");
  // The first step warms up.
  if (stepsSeen.size() > 1)
    stepsSeen.erase(stepsSeen.begin());

  TraceSummary out;
  out.steps = static_cast<int64_t>(stepsSeen.size());
  const size_t n = ranks.size();
  out.busySeconds.assign(n, 0);
  out.bubbleRatio.assign(n, 0);
  // Per stage and part, the samples.
  std::map<std::pair<int64_t, int>, std::pair<std::vector<double>,
                                              std::vector<double>>>
      samples;
  std::vector<double> windows, hostSteps;
  for (int64_t step : stepsSeen) {
    double first = 0, last = 0;
    bool any = false;
    std::vector<std::vector<std::pair<double, double>>> perRank(n);
    for (size_t r = 0; r < n; ++r)
      for (const ScheduleTrace::Span &s : ranks[r].spans) {
        if (s.step != step)
          continue;
        first = any ? std::min(first, s.begin) : s.begin;
        last = any ? std::max(last, s.end) : s.end;
        any = true;
        perRank[r].push_back({s.begin, s.end});
        auto &[cpu, wall] = samples[{s.stage, static_cast<int>(s.part)}];
        cpu.push_back(s.cpu);
        wall.push_back(s.end - s.begin);
      }
    const double window = last - first;
    windows.push_back(window);
    for (size_t r = 0; r < n; ++r) {
      const double busy = unionLength(perRank[r]);
      out.busySeconds[r] += busy / out.steps;
      out.bubbleRatio[r] +=
          (window > 0 ? (window - busy) / window : 0) / out.steps;
    }
    double host = 0;
    int64_t hosts = 0;
    for (const RankTrace &r : ranks)
      for (const ScheduleTrace::Step &s : r.steps)
        if (s.step == step) {
          host += s.end - s.begin;
          ++hosts;
        }
    if (hosts > 0)
      hostSteps.push_back(host / hosts);
  }
  std::vector<double> handoffs = handoffSamples(ranks, stepsSeen, false);
  out.handoffSamples = static_cast<int64_t>(handoffs.size());
  out.handoffSeconds = mean(handoffs);
  handoffs = handoffSamples(ranks, stepsSeen, true);
  out.gradientHandoffSamples = static_cast<int64_t>(handoffs.size());
  out.gradientHandoffSeconds = mean(handoffs);
  out.scheduleSeconds = median(windows);
  out.stepSeconds = median(hostSteps);
  out.stages.resize(numStages);
  for (int64_t stage = 0; stage < numStages; ++stage)
    for (plan::SchedulePart part : {plan::PART_F, plan::PART_B, plan::PART_W}) {
      auto it = samples.find({stage, static_cast<int>(part)});
      if (it == samples.end())
        return absl::InvalidArgumentError(absl::StrCat(
            "the traces have no ", schedulePartName(part), " of stage ", stage,
            " in the steps after the first: was it traced from this spec's "
            "plan?"));
      PartCost &cost = part == plan::PART_F   ? out.stages[stage].f
                       : part == plan::PART_B ? out.stages[stage].b
                                              : out.stages[stage].w;
      cost.samples = static_cast<int64_t>(it->second.first.size());
      cost.cpu = mean(it->second.first);
      cost.wall = mean(it->second.second);
    }
  return out;
}

} // namespace braid
