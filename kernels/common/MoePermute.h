// Where moe_permute puts each (token, choice) assignment (docs/kernels.md):
// expert-major, and within an expert in token order then choice order, so
// that expert e's rows are [offsets[e], offsets[e + 1]). A counting sort in
// one pass over the assignments and one over the experts, with no
// workspace: offsets serve as the cursors, then shift back. An expert id
// outside [0, e) has no row (position -1). Shared by the CPU kernels and
// the CUDA ones (which run it on one thread). assignSlots is the same
// with a capacity per expert (capacity mode: drop and pad).
#pragma once

#include <cstdint>

#include "kernels/common/HostDevice.h"

namespace braid::moe {

BRAID_HOST_DEVICE inline void assignPositions(const int32_t *experts,
                                              int64_t assignments,
                                              int64_t e, int32_t *positions,
                                              int32_t *offsets) {
  for (int64_t i = 0; i <= e; ++i)
    offsets[i] = 0;
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t c = experts[a];
    if (c >= 0 && c < e)
      ++offsets[c + 1];
  }
  // offsets[i + 1] is expert i's end; shifted, it is expert i's start.
  for (int64_t i = 0; i < e; ++i)
    offsets[i + 1] += offsets[i];
  for (int64_t i = e; i > 0; --i)
    offsets[i] = offsets[i - 1];
  // Each assignment takes the next row of its expert, which leaves
  // offsets[i + 1] at expert i's end again: expert i + 1's start.
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t c = experts[a];
    positions[a] = c >= 0 && c < e ? offsets[c + 1]++ : -1;
  }
}

// Capacity mode: each expert has `capacity` rows, expert i's at [i *
// capacity, (i + 1) * capacity); its assignments take them in token order
// then choice order, and those beyond the capacity are dropped (position
// -1). offsets[i] = i * capacity after, as for uniform blocks.
BRAID_HOST_DEVICE inline void assignSlots(const int32_t *experts,
                                          int64_t assignments, int64_t e,
                                          int64_t capacity, int32_t *positions,
                                          int32_t *offsets) {
  // offsets[i + 1] counts expert i's assignments so far.
  for (int64_t i = 0; i <= e; ++i)
    offsets[i] = 0;
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t c = experts[a];
    if (c < 0 || c >= e) {
      positions[a] = -1;
      continue;
    }
    const int32_t r = offsets[c + 1]++;
    positions[a] = r < capacity ? static_cast<int32_t>(c * capacity + r) : -1;
  }
  for (int64_t i = 0; i <= e; ++i)
    offsets[i] = static_cast<int32_t>(i * capacity);
}

// Expert parallel (docs/moe.md). moe_block_counts: the rows of each block
// of `offsets` [blocks + 1], what a rank sends each expert.
BRAID_HOST_DEVICE inline void blockCounts(const int32_t *offsets,
                                          int64_t blocks, int32_t *counts) {
  for (int64_t g = 0; g < blocks; ++g)
    counts[g] = offsets[g + 1] - offsets[g];
}

// moe_ep_offsets: from the EP group's gathered counts [ranks, ranks x m]
// (rank s's row: what it sends each expert), the blocks of the rows rank
// `me` receives, in arrival order: sender by sender, each sender's rows
// expert by expert over me's m experts. offsets [ranks x m + 1].
BRAID_HOST_DEVICE inline void exchangeOffsets(const int32_t *counts,
                                              int64_t ranks, int64_t m,
                                              int64_t me, int32_t *offsets) {
  offsets[0] = 0;
  for (int64_t s = 0; s < ranks; ++s)
    for (int64_t j = 0; j < m; ++j) {
      const int64_t g = s * m + j;
      offsets[g + 1] = offsets[g] + counts[s * ranks * m + me * m + j];
    }
}

// Adaptive recompute (docs/moe.md): the rows a rank's experts received,
// the last of `offsets` [blocks + 1] clamped as the grouped GEMMs clamp it
// (from the last block's start to `rows`). The gate and up GEMMs' outputs
// are kept when this is at most the kept rows, and computed again in the
// backward otherwise.
BRAID_HOST_DEVICE inline int64_t receivedRows(const int32_t *offsets,
                                              int64_t blocks, int64_t rows) {
  if (blocks < 1)
    return 0;
  int64_t begin = offsets[blocks - 1];
  begin = begin < 0 ? 0 : (begin > rows ? rows : begin);
  const int64_t end = offsets[blocks];
  return end < begin ? begin : (end > rows ? rows : end);
}

} // namespace braid::moe
