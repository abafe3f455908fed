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

// One part of one micro-batch on one stage, as a rank ran it: a whole
// backward (BW) runs its B and W layer by layer, so each part comes in
// several spans between its marks. The merged span runs from the first
// one's begin to the last one's end; `wall` and the span's `cpu` add up
// the pieces.
struct Merged {
  ScheduleTrace::Span span;
  double wall = 0;
};

std::vector<Merged> mergeParts(const std::vector<ScheduleTrace::Span> &spans) {
  using Key = std::tuple<int64_t, uint32_t, int64_t, int>;
  std::map<Key, size_t> at;
  std::vector<Merged> out;
  for (const ScheduleTrace::Span &s : spans) {
    auto [it, inserted] = at.try_emplace(
        Key{s.step, s.stage, s.microBatch, static_cast<int>(s.part)},
        out.size());
    if (inserted) {
      out.push_back({s, s.end - s.begin});
      continue;
    }
    Merged &m = out[it->second];
    m.span.begin = std::min(m.span.begin, s.begin);
    m.span.end = std::max(m.span.end, s.end);
    m.span.cpu += s.cpu;
    m.wall += s.end - s.begin;
  }
  return out;
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
    // The backward half of an FB pair sends once its W is done: a W of
    // the same stage and micro-batch that follows the B on its stream at
    // once. (A whole backward, BW, sends after its last B op, so its W,
    // which began among the B's pieces, does not follow it.)
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
  // Each rank's parts, their pieces merged, once.
  std::vector<std::vector<Merged>> parts(n);
  for (size_t r = 0; r < n; ++r)
    parts[r] = mergeParts(ranks[r].spans);
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
      }
    // One sample per part of a micro-batch, its pieces added up.
    for (size_t r = 0; r < n; ++r)
      for (const Merged &m : parts[r]) {
        if (m.span.step != step)
          continue;
        auto &[cpu, wall] =
            samples[{m.span.stage, static_cast<int>(m.span.part)}];
        cpu.push_back(m.span.cpu);
        wall.push_back(m.wall);
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
  // Handoffs go by whole parts: from a part's last span to the next
  // stage's first.
  std::vector<RankTrace> merged = ranks;
  for (size_t r = 0; r < n; ++r) {
    merged[r].spans.clear();
    for (const Merged &m : parts[r])
      merged[r].spans.push_back(m.span);
  }
  std::vector<double> handoffs = handoffSamples(merged, stepsSeen, false);
  out.handoffSamples = static_cast<int64_t>(handoffs.size());
  out.handoffSeconds = mean(handoffs);
  handoffs = handoffSamples(merged, stepsSeen, true);
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
