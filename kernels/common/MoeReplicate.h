// Hot-expert replication under expert parallel (docs/moe.md,
// docs/kernels.md): moe_hot_experts chooses the experts every rank of the
// group computes itself, and moe_split_rows / moe_merge_rows take their
// rows out of a rank's permuted rows and put them back. Shared by the CPU
// kernels and the CUDA ones, which run the choice on one thread and the row
// mapping once per row (E and H are small).
#pragma once

#include <cstdint>

#include "kernels/common/HostDevice.h"

namespace braid::moe {

// The rows the EP group sends expert e: the sum over the senders s of
// counts[s * experts + e] (`counts` [ranks, experts] flat, moe_hot_experts'
// input).
BRAID_HOST_DEVICE inline int64_t groupCount(const int32_t *counts,
                                            int64_t ranks, int64_t experts,
                                            int64_t e) {
  int64_t c = 0;
  for (int64_t s = 0; s < ranks; ++s)
    c += counts[s * experts + e];
  return c;
}

// The first of the `slots` entries of `hot` that names `e`, -1 when none
// does.
BRAID_HOST_DEVICE inline int64_t slotNaming(const int32_t *hot, int64_t slots,
                                            int64_t e) {
  for (int64_t h = 0; h < slots; ++h)
    if (hot[h] == e)
      return h;
  return -1;
}

// Whether `e` is one of the `slots` entries of `hot`.
BRAID_HOST_DEVICE inline bool isHot(const int32_t *hot, int64_t slots,
                                    int64_t e) {
  return slotNaming(hot, slots, e) >= 0;
}

// The expert whose rows (and replica) slot h of `hot` takes: hot[h] when it
// is one of the layer's experts and no earlier slot names it, else -1 (an
// unused slot). The kernels and the replicas' collectives
// (runtime/executor/RunCollective.cpp) read the slots alike.
BRAID_HOST_DEVICE inline int64_t slotExpert(const int32_t *hot, int64_t h,
                                            int64_t experts) {
  const int64_t e = hot[h];
  if (e < 0 || e >= experts)
    return -1;
  for (int64_t j = 0; j < h; ++j)
    if (hot[j] == e)
      return -1;
  return e;
}

// moe_hot_experts. Rank k holds experts k*m .. k*m + m - 1 (m = experts /
// ranks) and receives L_k, its experts' group counts summed. Replication
// is on when the total is positive and the busiest rank receives more than
// `threshold` times the mean: max L_k * ranks > threshold * total. Then
// hot[0 .. slots) are the experts of largest group count held by ranks
// above the mean (L_k * ranks > total: replicating another rank's expert
// would move rows onto the busy ones), in decreasing count, ties to the
// lower expert, only counts above zero; -1 fills the slots left (all of
// them when off). cold = counts with every hot expert's column zeroed.
// Returns whether replication is on. `cold` (ranks x experts entries, at
// least experts + ranks with two ranks or more) holds the group counts and
// loads while the choice is made, so that each is summed once.
BRAID_HOST_DEVICE inline bool chooseHotExperts(const int32_t *counts,
                                               int64_t ranks, int64_t experts,
                                               double threshold, int64_t slots,
                                               int32_t *hot, int32_t *cold) {
  for (int64_t h = 0; h < slots; ++h)
    hot[h] = -1;
  if (ranks < 2) {
    // One rank receives the mean.
    for (int64_t i = 0; i < ranks * experts; ++i)
      cold[i] = counts[i];
    return false;
  }
  const int64_t m = experts / ranks;
  int32_t *groupCounts = cold, *loads = cold + experts;
  int64_t total = 0, busiest = 0;
  for (int64_t e = 0; e < experts; ++e)
    groupCounts[e] = static_cast<int32_t>(groupCount(counts, ranks, experts, e));
  for (int64_t k = 0; k < ranks; ++k) {
    int64_t load = 0;
    for (int64_t j = 0; j < m; ++j)
      load += groupCounts[k * m + j];
    loads[k] = static_cast<int32_t>(load);
    total += load;
    busiest = load > busiest ? load : busiest;
  }
  const bool on = total > 0 && static_cast<double>(busiest) *
                                       static_cast<double>(ranks) >
                                   threshold * static_cast<double>(total);
  // Each slot takes the largest (count, lower index) strictly after the
  // previous slot's in that order: no marks needed.
  int64_t lastCount = 0, last = -1;
  for (int64_t h = 0; on && h < slots; ++h) {
    int64_t best = -1, bestCount = 0;
    for (int64_t e = 0; e < experts; ++e) {
      if (int64_t{loads[e / m]} * ranks <= total)
        continue;
      const int64_t c = groupCounts[e];
      const bool after =
          last < 0 || c < lastCount || (c == lastCount && e > last);
      if (c > 0 && after && (best < 0 || c > bestCount)) {
        best = e;
        bestCount = c;
      }
    }
    hot[h] = static_cast<int32_t>(best);
    if (best >= 0) {
      last = best;
      lastCount = bestCount;
    }
  }
  for (int64_t i = 0; i < ranks * experts; ++i)
    cold[i] = isHot(hot, slots, i % experts) ? 0 : counts[i];
  return on;
}

// moe_split_rows and moe_merge_rows: a rank's `rows` permuted rows, expert
// e's at [offsets[e], offsets[e + 1]) clamped to the rows there are as the
// grouped GEMMs clamp them (kernels/cpu/Linear.cpp, ExpertBlocks), and the
// `slots` entries of `hot`. A slot takes its expert's rows when its entry
// is an expert in [0, experts) that no earlier slot names; the others are
// unused. The cold rows are those of the experts no slot names, packed in
// expert order from row 0 of `rows`; the hot rows those of the slots, slot
// by slot, packed from row 0 of `hotRows`. Positions past either buffer
// hold nothing: split drops such rows and merge reads zeros for them
// (impossible with moe_permute's offsets and the compiler's hotRows).
struct HotRows {
  const int32_t *offsets;
  int64_t experts;
  const int32_t *hot;
  int64_t slots;
  int64_t rows, hotRows;

  BRAID_HOST_DEVICE int64_t begin(int64_t e) const {
    const int64_t o = offsets[e];
    return o < 0 ? 0 : (o > rows ? rows : o);
  }
  BRAID_HOST_DEVICE int64_t end(int64_t e) const {
    const int64_t b = begin(e), o = offsets[e + 1];
    return o < b ? b : (o > rows ? rows : o);
  }
  BRAID_HOST_DEVICE int64_t count(int64_t e) const { return end(e) - begin(e); }
  // The slot that takes expert e's rows, -1 when e is cold.
  BRAID_HOST_DEVICE int64_t slotOf(int64_t e) const {
    return slotNaming(hot, slots, e);
  }
  // The expert whose rows slot h takes, -1 for an unused slot.
  BRAID_HOST_DEVICE int64_t expertOfSlot(int64_t h) const {
    return slotExpert(hot, h, experts);
  }
  BRAID_HOST_DEVICE int64_t slotRows(int64_t h) const {
    const int64_t e = expertOfSlot(h);
    return e < 0 ? 0 : count(e);
  }
  // The packed position of slot h's first row (moe_split_rows'
  // hot_offsets[h] before clamping).
  BRAID_HOST_DEVICE int64_t hotStart(int64_t h) const {
    int64_t at = 0;
    for (int64_t j = 0; j < h; ++j)
      at += slotRows(j);
    return at;
  }
  // The packed position of cold expert e's first row.
  BRAID_HOST_DEVICE int64_t coldStart(int64_t e) const {
    int64_t at = 0;
    for (int64_t j = 0; j < e; ++j)
      if (slotOf(j) < 0)
        at += count(j);
    return at;
  }

  // moe_split_rows: the row of x that cold row p holds, -1 for none (zero).
  BRAID_HOST_DEVICE int64_t coldSource(int64_t p) const {
    int64_t at = 0;
    for (int64_t e = 0; e < experts; ++e) {
      if (slotOf(e) >= 0)
        continue;
      const int64_t n = count(e);
      if (p < at + n)
        return begin(e) + (p - at);
      at += n;
    }
    return -1;
  }
  // moe_split_rows: the row of x that hot row q holds, -1 for none.
  BRAID_HOST_DEVICE int64_t hotSource(int64_t q) const {
    int64_t at = 0;
    for (int64_t h = 0; h < slots; ++h) {
      const int64_t e = expertOfSlot(h);
      if (e < 0)
        continue;
      const int64_t n = count(e);
      if (q < at + n)
        return begin(e) + (q - at);
      at += n;
    }
    return -1;
  }
  // moe_split_rows' hot_offsets [slots + 1]: each slot's packed start,
  // clamped to the hot rows there are.
  BRAID_HOST_DEVICE void hotOffsets(int32_t *out) const {
    int64_t at = 0;
    out[0] = 0;
    for (int64_t h = 0; h < slots; ++h) {
      at += slotRows(h);
      out[h + 1] = static_cast<int32_t>(at < hotRows ? at : hotRows);
    }
  }

  // moe_merge_rows: where row r of y comes from, set in `fromHot` and
  // returned: the packed row of the first expert whose rows hold r, in
  // hotRows when that expert has a slot, else in the cold rows; -1 (a zero
  // row) when no expert's rows hold r or the position is past its buffer.
  BRAID_HOST_DEVICE int64_t mergeSource(int64_t r, bool &fromHot) const {
    fromHot = false;
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t b = begin(e);
      if (r < b || r >= end(e))
        continue;
      const int64_t h = slotOf(e);
      fromHot = h >= 0;
      const int64_t p = (fromHot ? hotStart(h) : coldStart(e)) + (r - b);
      return p < (fromHot ? hotRows : rows) ? p : -1;
    }
    return -1;
  }
};

} // namespace braid::moe
