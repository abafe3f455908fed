#include "runtime/plan/StreamOrder.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace braid {

StreamOrder::StreamOrder(const std::vector<OrderStep> &steps,
                         uint32_t numStreams)
    : numStreams_(numStreams), streamOf_(steps.size()),
      position_(steps.size()), byStream_(numStreams),
      known_(steps.size() * numStreams, 0) {
  const uint32_t S = numStreams;
  // The program index of each (event, value) record seen so far.
  std::map<std::pair<uint32_t, uint64_t>, int64_t> recordAt;
  std::vector<std::vector<int64_t>> current(S, std::vector<int64_t>(S, 0));
  for (size_t i = 0; i < steps.size(); ++i) {
    const OrderStep &step = steps[i];
    const uint32_t s = step.stream;
    std::vector<int64_t> &now = current[s];
    if (step.kind == OrderStep::Kind::kRecord)
      recordAt[{step.event, step.value}] = static_cast<int64_t>(i);
    if (step.kind == OrderStep::Kind::kWait) {
      // Only a record already ordered (earlier in program order) adds what
      // it knew; checkEvents refuses waits without one.
      auto it = recordAt.find({step.event, step.value});
      if (it != recordAt.end()) {
        const int64_t j = it->second;
        for (uint32_t u = 0; u < S; ++u)
          now[u] = std::max(now[u], known(j, u));
        now[streamOf_[j]] = std::max(now[streamOf_[j]], position_[j]);
      }
    }
    streamOf_[i] = s;
    byStream_[s].push_back(static_cast<int64_t>(i));
    position_[i] = static_cast<int64_t>(byStream_[s].size());
    std::copy(now.begin(), now.end(), known_.begin() + i * S);
    now[s] = position_[i];
  }
}

void StreamOrder::addUse(StreamUses &uses, int64_t index) const {
  const uint32_t s = streamOf_[index];
  uses.lastPosition[s] = std::max(uses.lastPosition[s], position_[index]);
  if (uses.firstIndex[s] < 0)
    uses.firstIndex[s] = index;
  if (uses.first < 0)
    uses.first = index;
  uses.last = std::max(uses.last, index);
}

bool StreamOrder::startsAfter(int64_t index, const StreamUses &earlier) const {
  for (uint32_t t = 0; t < numStreams_; ++t)
    if (earlier.lastPosition[t] > known(index, t))
      return false;
  return true;
}

bool StreamOrder::allAfter(const StreamUses &later,
                           const StreamUses &earlier) const {
  // A stream's knowledge only grows, so its first use decides for the rest.
  for (uint32_t s = 0; s < numStreams_; ++s)
    if (later.firstIndex[s] >= 0 && !startsAfter(later.firstIndex[s], earlier))
      return false;
  return true;
}

int64_t StreamOrder::freeFrom(const StreamUses &uses) const {
  int64_t free = uses.last + 1;
  for (uint32_t s = 0; s < numStreams_; ++s) {
    // The instructions of stream s after the last use that do not yet know
    // of every use form a prefix of what follows; its end bounds `free`.
    const std::vector<int64_t> &insts = byStream_[s];
    auto begin = std::upper_bound(insts.begin(), insts.end(), uses.last);
    auto firstKnowing = std::partition_point(
        begin, insts.end(),
        [&](int64_t i) { return !startsAfter(i, uses); });
    if (firstKnowing != begin)
      free = std::max(free, *(firstKnowing - 1) + 1);
  }
  return free;
}

std::optional<std::string> checkEvents(const std::vector<OrderStep> &steps,
                                       int64_t *bad) {
  struct Timeline {
    uint32_t stream = 0;
    uint64_t last = 0; // the value of the latest record; 0 before any
    std::map<uint64_t, int64_t> recorded;
  };
  std::map<uint32_t, Timeline> timelines;
  for (size_t i = 0; i < steps.size(); ++i) {
    const OrderStep &step = steps[i];
    if (step.kind == OrderStep::Kind::kOther)
      continue;
    *bad = static_cast<int64_t>(i);
    const bool record = step.kind == OrderStep::Kind::kRecord;
    if (step.value == 0)
      return absl::StrCat(record ? "records" : "waits for", " event ",
                          step.event,
                          " with value 0; event values start at 1");
    auto [it, first] = timelines.try_emplace(step.event);
    Timeline &t = it->second;
    if (record) {
      if (!first && t.last > 0 && step.stream != t.stream)
        return absl::StrCat("records event ", step.event, " on stream ",
                            step.stream, ", but stream ", t.stream,
                            " records it too; one stream records an event");
      if (step.value <= t.last)
        return absl::StrCat("records event ", step.event, " with value ",
                            step.value, " after value ", t.last,
                            "; an event's values rise in program order");
      t.stream = step.stream;
      t.last = step.value;
      t.recorded[step.value] = static_cast<int64_t>(i);
      continue;
    }
    if (t.recorded.count(step.value) == 0)
      return absl::StrCat(
          "waits for event ", step.event, " to reach ", step.value,
          ", but no instruction before it records that value, so stream ",
          step.stream, " could wait forever; record it earlier in the "
          "program");
  }
  return std::nullopt;
}

} // namespace braid
