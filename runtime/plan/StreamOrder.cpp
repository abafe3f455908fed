#include "runtime/plan/StreamOrder.h"

#include <algorithm>
#include <unordered_map>

namespace braid {

StreamOrder::StreamOrder(const std::vector<OrderStep> &steps,
                         uint32_t numStreams)
    : numStreams_(numStreams), streamOf_(steps.size()),
      position_(steps.size()), byStream_(numStreams),
      known_(steps.size() * numStreams, 0) {
  const uint32_t S = numStreams;
  // Records of each event: per stream, their program indices in order, and
  // how many each stream has in the whole program.
  std::unordered_map<uint32_t, std::vector<std::vector<int64_t>>> records;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].kind == OrderStep::Kind::kRecord) {
      auto &perStream = records[steps[i].event];
      perStream.resize(S);
      perStream[steps[i].stream].push_back(static_cast<int64_t>(i));
    }
  std::vector<std::vector<int64_t>> current(S, std::vector<int64_t>(S, 0));
  for (size_t i = 0; i < steps.size(); ++i) {
    const OrderStep &step = steps[i];
    const uint32_t s = step.stream;
    std::vector<int64_t> &now = current[s];
    if (step.kind == OrderStep::Kind::kWait) {
      auto it = records.find(step.event);
      if (it != records.end()) {
        int64_t total = 0;
        for (const auto &r : it->second)
          total += static_cast<int64_t>(r.size());
        for (uint32_t t = 0; t < S; ++t) {
          const std::vector<int64_t> &onT = it->second[t];
          const int64_t others = total - static_cast<int64_t>(onT.size());
          const int64_t need = step.waitTarget - others;
          if (need < 1 || need > static_cast<int64_t>(onT.size()))
            continue;
          // Only a record already ordered (earlier in program order) adds
          // what it knew; a later one adds nothing that is known here.
          const int64_t j = onT[need - 1];
          if (j >= static_cast<int64_t>(i))
            continue;
          for (uint32_t u = 0; u < S; ++u)
            now[u] = std::max(now[u], known(j, u));
          now[t] = std::max(now[t], position_[j]);
        }
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

} // namespace braid
