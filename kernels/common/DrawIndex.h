// The element index a dropout draw is keyed by when the launch's tensor is
// one tensor-parallel rank's part of a whole tensor (the `tp_dim` parameter
// of docs/kernels.md, "Sequence parallel").
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
// Without tp_dim (-1, the tensor is whole) `chunk` is 0 and the index is n
// itself, computed without any arithmetic: draws are those of the kernels
// before the parameter existed, bit for bit.
#pragma once

#include <cstdint>

#include "kernels/common/Random.h" // BRAID_HOST_DEVICE
#include "kernels/registry/Kernel.h"

namespace braid {

struct DrawIndex {
  int64_t chunk = 0;  // l * inner; 0: the tensor is whole
  int64_t gap = 0;    // chunk * (size - 1): the other ranks' elements
  int64_t offset = 0; // rank * chunk

  BRAID_HOST_DEVICE bool whole() const { return chunk == 0; }

  // The whole tensor's index of local element n.
  BRAID_HOST_DEVICE int64_t at(int64_t n) const {
    return chunk == 0 ? n : n + (n / chunk) * gap + offset;
  }
  // The first local index after n that starts another chunk (at() is
  // contiguous on [n, runEnd(n))); INT64_MAX for a whole tensor.
  int64_t runEnd(int64_t n) const {
    return chunk == 0 ? INT64_MAX : (n / chunk + 1) * chunk;
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
  // The map of launch `args` whose operand `local` carries the draws: its
  // `tp_dim` parameter and context's TP coordinate.
  static DrawIndex of(const KernelArgs &args, const TensorDesc &local) {
    const int64_t dim =
        args.params ? args.params->intOr("tp_dim", -1) : int64_t{-1};
    if (dim < 0 || args.ctx == nullptr)
      return of(local, dim, 0, 1);
    return of(local, dim, args.ctx->tpRank, args.ctx->tpSize);
  }
};

} // namespace braid
