// The layout kernels of sequence and context parallelism, `take_part`,
// `stack_parts` and `unstack_parts` (docs/kernels.md, "Sequence parallel"
// and "Context parallel"), as one copy plan that the CPU and CUDA kernels
// both run, so that they move the same elements.
//
// Each kernel copies `chunks` contiguous runs of `len` elements: run q goes
// to y at q * len and comes from x at source(q) (or, with `scatter`, comes
// from x at q * len and goes to y at source(q)). With x and y cut at
// dimension d into [outer, x[d], inner] (outer: the product of the
// dimensions before d, inner: after d), contiguous parts (source(q) =
// (q / mod) * strideA + (q % mod) * strideB + base):
// - take_part, y[d] = l, x[d] = w: run o (< outer) is the l * inner
//   elements of part `rank` of row o: mod 1, strideA w * inner, base
//   rank * l * inner. When part `rank` ends past w the plan is `zero`: y is
//   all zeros.
// - stack_parts, x [d0, A..., n * P, inner...] -> y [P * d0, A..., n, ...]
//   (A: the product of dimensions 1 to d-1): run q = k * d0A + ia (k < P,
//   ia < d0 * A) is part k of x's row ia: len n * inner, mod d0A, strideA
//   len (the part), strideB P * len (the row).
// - unstack_parts, the inverse, x [P * d0, ..., n, ...] -> y [d0, ...,
//   P * n, ...]: run q = ia * P + k is row ia of x's block k: mod P, strideA
//   len, strideB d0A * len.
//
// `balanced` parts are those of context parallelism (SequenceLayout.h):
// the whole dimension is cut into 2P chunks of n / 2, and part k is chunks
// k and 2P - 1 - k. Runs are then those half parts, and every plan is the
// one of stack_parts: run q = (k * rows + ia) * 2 + h (half h of part k of
// row ia, in the order of the stacked side) lies on the cut side at
//   ia * strideB + (h ? mirror - k : k) * strideA + base
// with len = strideA = (n / 2) * inner, strideB = P * n * inner (a row of the
// cut side), mirror = 2P - 1, rows = d0A (`mod`). take_part reads block
// `rank` of that plan (its runs start at firstRun = rank * 2 * outer,
// rows = outer), and unstack_parts runs it backwards (`scatter`).
//
// `ring` order (stack_parts and unstack_parts, contiguous parts): block s
// along dimension 0 holds part (rank - s - offset) mod P, the order in
// which the steps of a ring meet the parts: a ring that starts from its
// own part and receives the previous rank's at each step (offset 0), or
// one that starts from the next rank's part (offset 1, a reduce-scatter
// whose sums travel forward). The block index of a run (its quotient for
// stack_parts, its remainder for unstack_parts) is mapped so.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/common/Random.h" // BRAID_HOST_DEVICE
#include "kernels/registry/Kernel.h"

namespace braid {

struct PartCopy {
  int64_t chunks = 0;
  int64_t len = 0;
  int64_t mod = 1;
  int64_t strideA = 0;
  int64_t strideB = 0;
  int64_t base = 0;
  bool zero = false; // write zeros to all of y instead
  // Balanced parts: mirror = 2P - 1 (0: contiguous parts), the plan's run
  // of run 0 and whether y, not x, is the side read at source(q).
  int64_t mirror = 0;
  int64_t firstRun = 0;
  bool scatter = false;
  // Ring order: P (0: none), the rank and the offset of its first part,
  // and whether the block index is q's quotient (stack_parts) or remainder.
  int64_t ringParts = 0;
  int64_t ringRank = 0;
  int64_t ringOffset = 0;
  bool ringQuotient = false;

  // Offset of run q's first element on the side it is not contiguous in.
  BRAID_HOST_DEVICE int64_t source(int64_t q) const {
    if (mirror == 0) {
      int64_t a = q / mod, b = q % mod;
      if (ringParts > 0) {
        int64_t &block = ringQuotient ? a : b;
        block = ((ringRank - block - ringOffset) % ringParts + ringParts) %
                ringParts;
      }
      return a * strideA + b * strideB + base;
    }
    const int64_t r = q + firstRun;
    const int64_t h = r % 2, ia = (r / 2) % mod, k = r / (2 * mod);
    return ia * strideB + (h ? mirror - k : k) * strideA + base;
  }

  // The plan of kernel `name` ("take_part", "stack_parts" or
  // "unstack_parts") from x to y along dimension `dim`, for part `rank`
  // (take_part, and the `ring` order of the others), with contiguous or
  // `balanced` parts. The shapes are those the kernel's check accepted.
  static PartCopy of(std::string_view name, const TensorDesc &x,
                     const TensorDesc &y, int64_t dim, int64_t rank,
                     bool balanced = false, bool ring = false,
                     int64_t ringOffset = 0) {
    PartCopy p;
    if (dim < 0 || dim >= x.rank() || x.rank() != y.rank())
      return p;
    auto product = [](const TensorDesc &t, int64_t from, int64_t to) {
      int64_t r = 1;
      for (int64_t i = from; i < to; ++i)
        r *= t.shape[i];
      return r;
    };
    if (name == "take_part") {
      const int64_t inner = product(x, dim + 1, x.rank());
      const int64_t w = x.shape[dim], l = y.shape[dim];
      p.chunks = product(x, 0, dim);
      p.len = l * inner;
      p.strideA = w * inner;
      p.base = rank * l * inner;
      p.zero = rank < 0 || rank * l + l > w;
      if (balanced && !p.zero && l > 0) {
        p.mirror = 2 * (w / l) - 1;
        p.len = p.strideA = l / 2 * inner;
        p.strideB = w * inner;
        p.mod = p.chunks > 0 ? p.chunks : 1;
        p.firstRun = rank * 2 * p.chunks;
        p.chunks *= 2;
        p.base = 0;
      }
      return p;
    }
    if (dim < 1)
      return p;
    const bool stack = name == "stack_parts";
    // The side with the parts along `dim` (x for stack_parts) and the side
    // with them stacked along dimension 0.
    const TensorDesc &cut = stack ? x : y, &stacked = stack ? y : x;
    const int64_t d0 = cut.shape[0];
    const int64_t parts = d0 > 0 ? stacked.shape[0] / d0 : 1;
    const int64_t d0a = d0 * product(cut, 1, dim);
    p.len = stacked.shape[dim] * product(cut, dim + 1, cut.rank());
    p.chunks = parts * d0a;
    if (balanced) {
      p.mirror = 2 * parts - 1;
      p.strideB = parts * p.len;
      p.len = p.strideA = p.len / 2;
      p.mod = d0a;
      p.chunks *= 2;
      p.scatter = !stack;
      if (p.mod == 0 || p.len == 0) {
        p.chunks = 0;
        p.mod = 1;
      }
      return p;
    }
    p.strideA = p.len;
    p.mod = stack ? d0a : parts;
    p.strideB = stack ? parts * p.len : d0a * p.len;
    if (ring && parts > 0) {
      p.ringParts = parts;
      p.ringRank = rank;
      p.ringOffset = ringOffset;
      p.ringQuotient = stack;
    }
    if (p.mod == 0) {
      p.chunks = 0;
      p.mod = 1;
    }
    return p;
  }
};

} // namespace braid
