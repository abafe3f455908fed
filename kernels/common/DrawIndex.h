// The element index a dropout draw is keyed by when the launch's tensor is
// one rank's part of a whole tensor: a tensor-parallel rank's contiguous
// part (the `tp_dim` parameter of docs/kernels.md, "Sequence parallel"), a
// context-parallel rank's load-balanced part of the sequence (`cp_dim`,
// "Context parallel"), or both.
//
// With `tp_dim = d` the launch's tensor [d0, ..., l, ..., dk] (l at d) is
// part `rank` of the whole tensor [d0, ..., l * size, ..., dk], cut along d
// into `size` contiguous parts. Viewed as [outer, l * inner] with inner the
// product of the dimensions after d, each of its `outer` chunks of
// l * inner elements is contiguous in the whole tensor too, at whole index
// o * (size * l * inner) + rank * l * inner. So local element n has whole
// index n + (n / chunk) * chunk * (size - 1) + rank * chunk, and every run of
// local indices inside one chunk maps to a run of whole indices. Every row
// of the last dimension lies inside one chunk.
//
// With `cp_dim = d` dimension d holds the CP rank's part of the whole
// dimension (cpSize times longer), whose positions a SequenceMap gives.
// With tp_dim = d as well, the local tensor is TP rank's contiguous part of
// that CP part (sequence parallelism inside a CP rank): local index m along
// d is index tpRank * l + m of the CP part. Local element n = (o * l + m) *
// inner + e then has whole index (o * W + map.at(tpRank * l + m)) * inner +
// e, W being the whole dimension. Runs of m inside one run of the map stay
// runs of whole indices; a row of the last dimension lies inside one
// (d is below the last dimension, or the row is one element).
//
// Without tp_dim and cp_dim (-1, the tensor is whole) `chunk` is 0 and the
// index is n itself, computed without any arithmetic: draws are those of
// the kernels before the parameters existed, bit for bit.
#pragma once

#include <cstdint>

#include "kernels/common/Random.h" // BRAID_HOST_DEVICE
#include "kernels/common/SequenceLayout.h"
#include "kernels/registry/Kernel.h"

namespace braid {

struct DrawIndex {
  int64_t chunk = 0;  // l * inner; 0: the tensor is whole
  int64_t gap = 0;    // chunk * (size - 1): the other TP ranks' elements
  int64_t offset = 0; // rank * chunk
  // With cp_dim (inner > 0): the CP part's positions, the product of the
  // dimensions after d, the whole tensor's chunk (W * inner) and the first
  // index of the local part in the CP part (tpRank * l).
  SequenceMap map;
  int64_t inner = 0;
  int64_t wholeChunk = 0;
  int64_t first = 0;

  BRAID_HOST_DEVICE bool whole() const { return chunk == 0; }

  // The whole tensor's index of local element n.
  BRAID_HOST_DEVICE int64_t at(int64_t n) const {
    if (chunk == 0)
      return n;
    if (inner == 0)
      return n + (n / chunk) * gap + offset;
    const int64_t o = n / chunk, r = n - o * chunk, m = r / inner;
    return o * wholeChunk + map.at(first + m) * inner + (r - m * inner);
  }
  // The first local index after n that starts another run (at() is
  // contiguous on [n, runEnd(n))); INT64_MAX for a whole tensor.
  BRAID_HOST_DEVICE int64_t runEnd(int64_t n) const {
    if (chunk == 0)
      return INT64_MAX;
    const int64_t o = n / chunk;
    if (inner == 0)
      return (o + 1) * chunk;
    const int64_t m = (n - o * chunk) / inner, l = chunk / inner;
    const int64_t end = map.runEnd(first + m) - first;
    return o * chunk + (end < l ? end : l) * inner;
  }

  // The map of a launch's operand `local` with parameter tp_dim = `dim`
  // (< 0: whole) on TP rank `rank` of `size`.
  static DrawIndex of(const TensorDesc &local, int64_t dim, int64_t rank,
                      int64_t size) {
    DrawIndex d;
    if (dim < 0 || dim >= local.rank())
      return d;
    int64_t chunk = 1;
    for (int64_t i = dim; i < local.rank(); ++i)
      chunk *= local.shape[i];
    if (chunk == 0)
      return d; // nothing to draw
    d.chunk = chunk;
    d.gap = chunk * (size > 1 ? size - 1 : 0);
    d.offset = chunk * (rank > 0 ? rank : 0);
    return d;
  }
  // The map with tp_dim = `tpDim` as above and cp_dim = `cpDim` (< 0: no
  // CP part) on CP rank `cpRank` of `cpSize`. The checks ask that the two
  // name one dimension when both are set.
  static DrawIndex of(const TensorDesc &local, int64_t tpDim, int64_t tpRank,
                      int64_t tpSize, int64_t cpDim, int64_t cpRank,
                      int64_t cpSize) {
    if (cpDim < 0 || cpDim >= local.rank() || cpSize <= 1)
      return of(local, tpDim, tpRank, tpSize);
    DrawIndex d;
    const int64_t l = local.shape[cpDim];
    int64_t inner = 1;
    for (int64_t i = cpDim + 1; i < local.rank(); ++i)
      inner *= local.shape[i];
    if (l * inner == 0)
      return d; // nothing to draw
    const bool tp = tpDim == cpDim && tpSize > 1;
    const int64_t part = tp ? l * tpSize : l; // the CP rank's part
    d.chunk = l * inner;
    d.inner = inner;
    d.map = SequenceMap::part(part, cpRank, cpSize);
    d.wholeChunk = part * cpSize * inner;
    d.first = tp && tpRank > 0 ? tpRank * l : 0;
    return d;
  }
  // The map of launch `args` whose operand `local` carries the draws: its
  // `tp_dim` and `cp_dim` parameters and context's TP and CP coordinates.
  static DrawIndex of(const KernelArgs &args, const TensorDesc &local) {
    const KernelParams *p = args.params;
    const int64_t tpDim = p ? p->intOr("tp_dim", -1) : int64_t{-1};
    const int64_t cpDim = p ? p->intOr("cp_dim", -1) : int64_t{-1};
    if ((tpDim < 0 && cpDim < 0) || args.ctx == nullptr)
      return of(local, -1, 0, 1);
    const KernelContext &ctx = *args.ctx;
    return of(local, tpDim, ctx.tpRank, ctx.tpSize, cpDim, ctx.cpRank,
              ctx.cpSize);
  }
};

} // namespace braid
