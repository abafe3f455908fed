// Where the positions a context-parallel rank holds lie in the whole
// sequence (docs/parallel.md, "Context parallel"). One description for the
// compiler, the kernels and the tests.
//
// The sequence of S positions is cut into 2P chunks of S / 2P; CP rank r of
// P holds chunks r and 2P - 1 - r, in that order, so that under a causal
// mask every rank has the same amount of attention work (Megatron-LM's load
// balancing). A rank's L = S / P local positions are thus two runs: local
// i < L / 2 is position r * L / 2 + i, and local i >= L / 2 is position
// (2P - 1 - r) * L / 2 + i - L / 2.
//
// A SequenceMap describes any such list of positions in two ascending runs
// (the second starting after the first ends): a rank's part, or the whole
// sequence (one run). Since positions rise with the local index, the
// positions at or below any p are a prefix of the local indices, which is
// what lets attention kernels keep "keys [0, rowEnd(i))" under every mask.
#pragma once

#include <cstdint>

#include "kernels/common/Random.h" // BRAID_HOST_DEVICE

namespace braid {

struct SequenceMap {
  int64_t len = 0;    // local positions
  int64_t half = 0;   // local positions in the first run (len: one run)
  int64_t start0 = 0; // position of local 0
  int64_t start1 = 0; // position of local `half`

  // The whole sequence of `len` positions, in order.
  BRAID_HOST_DEVICE static SequenceMap whole(int64_t len) {
    return SequenceMap{len, len, 0, len};
  }
  // The part of CP rank `rank` of `size` holding `len` positions (len even
  // when size > 1); the whole sequence when size is 1.
  BRAID_HOST_DEVICE static SequenceMap part(int64_t len, int64_t rank,
                                            int64_t size) {
    if (size <= 1)
      return whole(len);
    const int64_t h = len / 2;
    return SequenceMap{len, h, rank * h, (2 * size - 1 - rank) * h};
  }

  // The position of local index i (0 <= i < len).
  BRAID_HOST_DEVICE int64_t at(int64_t i) const {
    return i < half ? start0 + i : start1 + (i - half);
  }
  // How many local indices have a position at or below p: those indices
  // are [0, countAtOrBelow(p)).
  BRAID_HOST_DEVICE int64_t countAtOrBelow(int64_t p) const {
    int64_t n = clamp(p - start0 + 1, half);
    if (n == half && len > half)
      n += clamp(p - start1 + 1, len - half);
    return n;
  }
  // The first local index whose position is at least p (len if none).
  BRAID_HOST_DEVICE int64_t firstAtOrAbove(int64_t p) const {
    return countAtOrBelow(p - 1);
  }
  // The last local index of the run holding local i, plus one: at() is
  // contiguous on [i, runEnd(i)).
  BRAID_HOST_DEVICE int64_t runEnd(int64_t i) const {
    return i < half ? half : len;
  }

private:
  BRAID_HOST_DEVICE static int64_t clamp(int64_t v, int64_t hi) {
    return v < 0 ? 0 : v > hi ? hi : v;
  }
};

} // namespace braid
