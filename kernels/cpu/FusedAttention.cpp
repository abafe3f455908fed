// flash_attention and flash_attention_grad_input (docs/fusion.md,
// "Attention"): the function of attention and attention_grad_input without
// the [B, H, S, S] probabilities.
//
// Forward visits the keys in tiles of kForwardTile with an online softmax: each
// query row keeps its running maximum m, its running sum l of exp(x - m)
// and its unnormalised output, rescaled by exp(m_old - m_new) when the
// maximum grows. At the end o = acc / l and lse = m + log(l) is saved.
// Backward recomputes P = exp(x - lse) tile by tile, with
// D_i = do_i . o_i standing for rowsum(dP * P), which it equals (dropout
// included: both are do_i . sum_j Pd_ij v_j).
//
// Work items and their single writers, so that the bits do not depend on
// the number of threads:
//   forward:          (batch, query head, block of kQueryBlock rows);
//   backward, with at least as many (batch, kv head) pairs as threads: one
//                     pair, its key tiles in order, summing dk and dv of a
//                     tile over the group's query heads and their rows in
//                     order, and dq over the tiles;
//   backward otherwise, in two passes: dk, dv per (batch, kv head, tile of
//                     kTile keys), summed as above; dq per (batch, query
//                     head, block of kQueryBlock rows), over the tiles.
// Both backward splits add the same terms in the same order.
// K and V are first laid out once per launch, per (batch, kv head), in f32
// (transposed, or with rows padded to a multiple of 16): O(S) memory, never
// O(S^2). The inner loops run over 16 contiguous values kept in registers
// (VecMath.h), as in Attention.cpp, for kRows query rows at a time.
//
// Masks: key j is visible from query i iff (!causal || j <= i || j < prefix)
// and, with segment ids, seg[b, i] == seg[b, j]. A masked score is -inf,
// whose exponential is 0. Dropout draws are those of the reference: element
// index ((b * H + h) * S + i) * S + j of dropoutKey(seed, rng_offset, step,
// micro_batch); with head_shard, H and h count the whole tensor's heads.
// With `cp`, i and j are the positions of the rows and keys in the whole
// sequence of S (AttentionGeometry.h). The diagonal is visible, so no row
// is empty, except in a ring step (cp_kv_step >= 0), whose keys are one
// rank's part: a row that sees none of them gets o = 0 and lse = -inf, and
// backward, given the merged o and lse of all steps, returns this step's
// terms of dq and its keys' dk, dv.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/cpu/AttentionGeometry.h"
#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

// Keys per tile (multiples of kLanes): forward, whose per-tile work is the
// rescaling of the running output, takes longer tiles than backward, whose
// tiles bound the rows of dk and dv one work item sums.
constexpr int64_t kForwardTile = 256;
constexpr int64_t kTile = 64;
constexpr int64_t kQueryBlock = 64; // query rows per forward / dq work item
constexpr int kRows = 8;            // query rows sharing each load of K, V
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

int64_t ceilDiv(int64_t n, int64_t m) { return (n + m - 1) / m; }

struct Geometry : AttentionGeometry {
  using AttentionGeometry::AttentionGeometry;
  int64_t kvHead(int64_t bi, int64_t hk) const { return bi * hkv + hk; }
};

// K and V of every (batch, kv head) in f32: transposed ([Dh][sPad], zero
// beyond s) for dot products with every key, padded ([sPad][dPad], zero
// beyond s and dh) for sums of weighted rows.
struct Layouts {
  std::unique_ptr<float[]> kT, vT, kPad, vPad;
  int64_t tSize, pSize;
};

template <typename T>
void transposeHead(const T *src, const Geometry &g, float *t) {
  float *staging = threadScratch(0, g.sk * g.dh);
  for (int64_t j = 0; j < g.sk; ++j)
    convert(src + j * g.kvStride, staging + j * g.dh, g.dh);
  for (int64_t d = 0; d < g.dh; ++d) {
    float *row = t + d * g.sPad;
    for (int64_t j = 0; j < g.sk; ++j)
      row[j] = staging[j * g.dh + d];
    for (int64_t j = g.sk; j < g.sPad; ++j)
      row[j] = 0.0f;
  }
}

template <typename T>
void padHead(const T *src, const Geometry &g, float *out) {
  for (int64_t j = 0; j < g.sk; ++j) {
    convert(src + j * g.kvStride, out + j * g.dPad, g.dh);
    std::memset(out + j * g.dPad + g.dh, 0, (g.dPad - g.dh) * sizeof(float));
  }
  std::memset(out + g.sk * g.dPad, 0, (g.sPad - g.sk) * g.dPad * sizeof(float));
}

// Lays out k (transposed, and padded when `kPadded`) and v (padded, and
// transposed when `vTransposed`).
template <typename T>
Layouts layOut(const KernelArgs &args, const Geometry &g, const T *k,
               const T *v, bool kPadded, bool vTransposed) {
  Layouts l;
  l.tSize = g.dh * g.sPad;
  l.pSize = g.sPad * g.dPad;
  const int64_t n = g.b * g.hkv;
  l.kT.reset(new float[n * l.tSize]);
  l.vPad.reset(new float[n * l.pSize]);
  if (kPadded)
    l.kPad.reset(new float[n * l.pSize]);
  if (vTransposed)
    l.vT.reset(new float[n * l.tSize]);
  parallelFor(poolOf(args), n, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t off = (u / g.hkv) * g.sk * g.kvStride + (u % g.hkv) * g.dh;
      transposeHead(k + off, g, l.kT.get() + u * l.tSize);
      padHead(v + off, g, l.vPad.get() + u * l.pSize);
      if (kPadded)
        padHead(k + off, g, l.kPad.get() + u * l.pSize);
      if (vTransposed)
        transposeHead(v + off, g, l.vT.get() + u * l.tSize);
    }
  });
  return l;
}

// out[r * W + j] = sum over d < dh of a[r * dPad + d] * t[d * sPad + j]
// for j < width (a multiple of kLanes), each sum over d in order.
template <int R, int64_t W = kTile>
BRAID_INLINE void rowsDotColumns(const float *__restrict a,
                                 const float *__restrict t, const Geometry &g,
                                 int64_t width, float *__restrict out) {
  for (int64_t j0 = 0; j0 < width; j0 += kLanes) {
    Vec16 acc[R] = {};
    for (int64_t d = 0; d < g.dh; ++d) {
      const Vec16 tv = load16(t + d * g.sPad + j0);
      for (int r = 0; r < R; ++r)
        acc[r] += a[r * g.dPad + d] * tv;
    }
    for (int r = 0; r < R; ++r)
      store16(out + r * W + j0, acc[r]);
  }
}

// out[r * dPad + c] += sum over j < width of w[r * W + j] *
// rows[j * dPad + c], the tile's sum formed first, over j in order.
template <int R, int64_t W = kTile>
BRAID_INLINE void
addWeightedSums(const float *__restrict w, const float *__restrict rows,
                const Geometry &g, int64_t width, float *__restrict out) {
  for (int64_t c0 = 0; c0 < g.dPad; c0 += kLanes) {
    Vec16 acc[R] = {};
    for (int64_t j = 0; j < width; ++j) {
      const Vec16 rv = load16(rows + j * g.dPad + c0);
      for (int r = 0; r < R; ++r)
        acc[r] += w[r * W + j] * rv;
    }
    for (int r = 0; r < R; ++r)
      store16(out + r * g.dPad + c0, load16(out + r * g.dPad + c0) + acc[r]);
  }
}

// y[j * dPad + c] += sum over r of w[r * kTile + j] * x[r * dPad + c] for
// j < width, adding the rows r = 0 .. R-1 in order.
template <int R>
BRAID_INLINE void addWeightedRows(const float *__restrict w,
                                  const float *__restrict x, const Geometry &g,
                                  int64_t width, float *__restrict y) {
  for (int64_t c0 = 0; c0 < g.dPad; c0 += kLanes) {
    Vec16 xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = load16(x + r * g.dPad + c0);
    for (int64_t j = 0; j < width; ++j) {
      Vec16 acc = load16(y + j * g.dPad + c0);
      for (int r = 0; r < R; ++r)
        acc += w[r * kTile + j] * xr[r];
      store16(y + j * g.dPad + c0, acc);
    }
  }
}

// Scales row[0, width) by `scale` and sets the keys jt0 + j that query i
// does not see to -inf. Returns the number of leading keys of the tile
// inside the row's range (those with dropout draws).
BRAID_INLINE int64_t scaleAndMask(float *__restrict row, const Geometry &g,
                                  int64_t bi, int64_t i, int64_t jt0,
                                  int64_t width) {
  for (int64_t j0 = 0; j0 < width; j0 += kLanes)
    store16(row + j0, load16(row + j0) * g.scale);
  int64_t end = g.rowEnd(i) - jt0;
  end = end < 0 ? 0 : end > width ? width : end;
  for (int64_t j = end; j < width; ++j)
    row[j] = kMinusInf;
  if (g.seg) {
    const int32_t *seg = g.segments(bi);
    const int32_t mine = seg[g.qmap.at(i)];
    for (int64_t j = 0; j < end; ++j)
      row[j] = seg[g.kmap.at(jt0 + j)] == mine ? row[j] : kMinusInf;
  }
  return end;
}

// ---------------------------------------------------------------------------
// Forward

struct ForwardState {
  float *qRows, *acc, *m, *l, *scores;
  explicit ForwardState(const Geometry &g) {
    qRows = threadScratch(1, 2 * kQueryBlock * g.dPad);
    acc = qRows + kQueryBlock * g.dPad;
    m = threadScratch(2, 2 * kQueryBlock);
    l = m + kQueryBlock;
    scores = threadScratch(3, kRows * kForwardTile);
  }
};

// Rows i .. i+R-1 (block-relative index r) against the keys of the tile at
// jt0.
template <int R>
BRAID_INLINE void forwardTile(const Geometry &g, const ForwardState &st,
                              const float *kT, const float *vPad, int64_t bi,
                              int64_t hi, int64_t i, int64_t r, int64_t jt0) {
  const int64_t nMax = g.rowEnd(i + R - 1);
  if (jt0 >= nMax)
    return;
  const int64_t width =
      roundUp((nMax - jt0) < kForwardTile ? nMax - jt0 : kForwardTile, kLanes);
  rowsDotColumns<R, kForwardTile>(st.qRows + r * g.dPad, kT + jt0, g, width,
                                  st.scores);
  for (int rr = 0; rr < R; ++rr) {
    float *__restrict row = st.scores + rr * kForwardTile;
    const int64_t end = scaleAndMask(row, g, bi, i + rr, jt0, width);
    Vec16 mx = broadcast16(kMinusInf);
    for (int64_t j0 = 0; j0 < width; j0 += kLanes) {
      const Vec16 x = load16(row + j0);
      mx = x > mx ? x : mx;
    }
    const float tileMax = maxLanes(mx);
    if (tileMax == kMinusInf) {
      // Nothing visible here: zero weights, state unchanged.
      std::memset(row, 0, width * sizeof(float));
      continue;
    }
    float &m = st.m[r + rr];
    float &l = st.l[r + rr];
    const float mNew = tileMax > m ? tileMax : m;
    const float alpha = expFloat(m - mNew); // 0 on the first visible tile
    for (int64_t j = 0; j < width; ++j)
      row[j] = expFloat(row[j] - mNew);
    Vec16 total = {};
    for (int64_t j0 = 0; j0 < width; j0 += kLanes)
      total += load16(row + j0);
    l = l * alpha + sumLanes(total);
    m = mNew;
    if (alpha != 1.0f) {
      float *__restrict acc = st.acc + (r + rr) * g.dPad;
      for (int64_t c0 = 0; c0 < g.dPad; c0 += kLanes)
        store16(acc + c0, load16(acc + c0) * alpha);
    }
    if (g.mask.active) {
      const DropoutMask mask = g.mask; // a local copy: no aliasing with row
      g.forKeyDraws(
          g.dropRow(bi, hi, i + rr), jt0, jt0 + end,
          [&](int64_t j, int64_t draw) { row[j] *= mask.factor(draw); });
    }
  }
  addWeightedSums<R, kForwardTile>(st.scores, vPad + jt0 * g.dPad, g, width,
                                   st.acc + r * g.dPad);
}

template <typename T>
BRAID_INLINE void forwardBlockBody(const KernelArgs &args, const Geometry &g,
                                   const Layouts &lay, int64_t bi, int64_t hi,
                                   int64_t i0) {
  const int64_t i1 = i0 + kQueryBlock < g.sq ? i0 + kQueryBlock : g.sq;
  const int64_t rows = i1 - i0;
  const ForwardState st(g);
  const T *q =
      dataOf<T>(args.ins[0]) + (bi * g.sq + i0) * g.qStride + hi * g.dh;
  for (int64_t r = 0; r < rows; ++r)
    padRow(q + r * g.qStride, g, st.qRows + r * g.dPad);
  std::memset(st.acc, 0, rows * g.dPad * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    st.m[r] = kMinusInf;
    st.l[r] = 0.0f;
  }
  const int64_t u = g.kvHead(bi, hi / g.group);
  const float *kT = lay.kT.get() + u * lay.tSize;
  const float *vPad = lay.vPad.get() + u * lay.pSize;
  const int64_t keysEnd = g.rowEnd(i1 - 1);
  for (int64_t jt0 = 0; jt0 < keysEnd; jt0 += kForwardTile) {
    int64_t r = 0;
    for (; r + kRows <= rows; r += kRows)
      forwardTile<kRows>(g, st, kT, vPad, bi, hi, i0 + r, r, jt0);
    for (; r < rows; ++r)
      forwardTile<1>(g, st, kT, vPad, bi, hi, i0 + r, r, jt0);
  }
  T *o = dataOf<T>(args.outs[0]) + (bi * g.sq + i0) * g.qStride + hi * g.dh;
  float *lse = args.outs[1].f32() + (bi * g.h + hi) * g.sq + i0;
  for (int64_t r = 0; r < rows; ++r) {
    float *acc = st.acc + r * g.dPad;
    if (st.m[r] == kMinusInf) {
      // No visible key (possible only with cp: a ring step's keys may all
      // lie after the query or in other documents): o = 0 and lse = -inf,
      // which attention_merge weighs by exp(-inf) = 0.
      zero(o + r * g.qStride, g.dh);
      lse[r] = kMinusInf;
      continue;
    }
    const float inv = 1.0f / st.l[r];
    for (int64_t d = 0; d < g.dh; ++d)
      acc[d] *= inv;
    convert(acc, o + r * g.qStride, g.dh);
    lse[r] = st.m[r] + std::log(st.l[r]);
  }
}

BRAID_VECTOR_CLONES
void forwardBlock(const KernelArgs &args, const Geometry &g, const Layouts &lay,
                  int64_t bi, int64_t hi, int64_t i0, const float *) {
  forwardBlockBody<float>(args, g, lay, bi, hi, i0);
}
BRAID_VECTOR_CLONES
void forwardBlock(const KernelArgs &args, const Geometry &g, const Layouts &lay,
                  int64_t bi, int64_t hi, int64_t i0, const Bf16 *) {
  forwardBlockBody<Bf16>(args, g, lay, bi, hi, i0);
}

template <typename T> void runFlashAttention(const KernelArgs &args) {
  const Geometry g(args, *args.ins[0].desc, *args.ins[1].desc, 3);
  const Layouts lay =
      layOut(args, g, dataOf<T>(args.ins[1]), dataOf<T>(args.ins[2]),
             /*kPadded=*/false, /*vTransposed=*/false);
  const int64_t blocks = ceilDiv(g.sq, kQueryBlock);
  parallelFor(poolOf(args), g.b * g.h * blocks, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bh = u / blocks;
      forwardBlock(args, g, lay, bh / g.h, bh % g.h, (u % blocks) * kQueryBlock,
                   static_cast<const T *>(nullptr));
    }
  });
}

// ---------------------------------------------------------------------------
// Backward

// Per-thread scratch of one backward work item.
struct BackwardState {
  float *qRows, *doRows, *p, *dS, *pd, *acc;
  BackwardState(const Geometry &g, int64_t accRows) {
    qRows = threadScratch(1, 2 * kRows * g.dPad);
    doRows = qRows + kRows * g.dPad;
    p = threadScratch(2, 3 * kRows * kTile);
    dS = p + kRows * kTile;
    pd = dS + kRows * kTile;
    acc = threadScratch(3, accRows * g.dPad);
  }
};

// Recomputes, for rows i .. i+R-1 of head (bi, hi) and keys jt0 .. +width,
// P = exp(scale q k^T - lse) (in p), the dropped probabilities Pd (in pd,
// with dropout) and dS = P * (dP - D) (in dS), dP being do v^T with the
// dropout mask applied.
template <int R>
BRAID_INLINE void gradTile(const Geometry &g, const BackwardState &st,
                           const float *kT, const float *vT, const float *lse,
                           const float *delta, int64_t bi, int64_t hi,
                           int64_t i, int64_t jt0, int64_t width) {
  rowsDotColumns<R>(st.qRows, kT + jt0, g, width, st.p);
  rowsDotColumns<R>(st.doRows, vT + jt0, g, width, st.dS);
  for (int rr = 0; rr < R; ++rr) {
    float *__restrict p = st.p + rr * kTile;
    float *__restrict dS = st.dS + rr * kTile;
    const int64_t end = scaleAndMask(p, g, bi, i + rr, jt0, width);
    const float shift = lse[rr];
    // A row that saw no key at all (lse -inf, possible only with cp) has no
    // probabilities; exp(x - lse) would make them NaN.
    if (shift == kMinusInf)
      std::memset(p, 0, width * sizeof(float));
    else
      for (int64_t j = 0; j < width; ++j)
        p[j] = expFloat(p[j] - shift);
    if (g.mask.active) {
      float *__restrict pd = st.pd + rr * kTile;
      const DropoutMask mask = g.mask;
      g.forKeyDraws(g.dropRow(bi, hi, i + rr), jt0, jt0 + end,
                    [&](int64_t j, int64_t draw) {
                      const float f = mask.factor(draw);
                      dS[j] *= f;
                      pd[j] = p[j] * f;
                    });
      std::memset(pd + end, 0, (width - end) * sizeof(float));
    }
    const Vec16 d = broadcast16(delta[rr]);
    for (int64_t j0 = 0; j0 < width; j0 += kLanes)
      store16(dS + j0, load16(p + j0) * (load16(dS + j0) - d));
  }
}

template <typename T>
BRAID_INLINE void loadGradRows(const KernelArgs &args, const Geometry &g,
                               const BackwardState &st, int64_t bi, int64_t hi,
                               int64_t i, int R) {
  const int64_t off = (bi * g.sq + i) * g.qStride + hi * g.dh;
  for (int r = 0; r < R; ++r) {
    padRow(dataOf<T>(args.ins[0]) + off + r * g.qStride, g,
           st.doRows + r * g.dPad);
    padRow(dataOf<T>(args.ins[1]) + off + r * g.qStride, g,
           st.qRows + r * g.dPad);
  }
}

// Rows i .. i+R-1 of query head hi added into the dk and dv rows of the
// key tile at j0, and, when `dq` is given (rows of dPad from row i), the
// tile's contribution to their dq.
template <int R, typename T>
BRAID_INLINE void
keyTileRows(const KernelArgs &args, const Geometry &g, const BackwardState &st,
            const float *kT, const float *vT, const float *kPad,
            const float *delta, int64_t bi, int64_t hi, int64_t i, int64_t j0,
            int64_t width, float *dk, float *dv, float *dq) {
  // Keys beyond the last row's range add nothing: the tile is cut there,
  // as queryRows cuts it, so dq gets the same terms in either split.
  width = std::min(width, roundUp(g.rowEnd(i + R - 1) - j0, kLanes));
  loadGradRows<T>(args, g, st, bi, hi, i, R);
  const int64_t stat = (bi * g.h + hi) * g.sq + i;
  gradTile<R>(g, st, kT, vT, args.ins[5].f32() + stat, delta + stat, bi, hi, i,
              j0, width);
  addWeightedRows<R>(g.mask.active ? st.pd : st.p, st.doRows, g, width, dv);
  addWeightedRows<R>(st.dS, st.qRows, g, width, dk);
  if (dq)
    addWeightedSums<R>(st.dS, kPad + j0 * g.dPad, g, width, dq);
}

// dk and dv of keys [j0, j0 + kTile) of kv head (bi, hk): over the group's
// query heads in order, and over their rows in order. With `dqAcc` (group
// * S rows of dPad), also adds the tile's dq contributions there.
template <typename T>
BRAID_INLINE void keyTileAll(const KernelArgs &args, const Geometry &g,
                             const Layouts &lay, const float *delta, int64_t bi,
                             int64_t hk, int64_t j0, float *dqAcc) {
  const int64_t keys = j0 + kTile < g.sk ? kTile : g.sk - j0;
  const int64_t width = roundUp(keys, kLanes);
  const BackwardState st(g, 2 * kTile);
  float *dk = st.acc, *dv = st.acc + kTile * g.dPad;
  std::memset(st.acc, 0, 2 * kTile * g.dPad * sizeof(float));
  const int64_t u = g.kvHead(bi, hk);
  const float *kT = lay.kT.get() + u * lay.tSize;
  const float *vT = lay.vT.get() + u * lay.tSize;
  const float *kPad = lay.kPad.get() + u * lay.pSize;
  const int64_t first = g.firstRowSeeing(j0);
  for (int64_t c = 0; c < g.group; ++c) {
    const int64_t hi = hk * g.group + c;
    float *dq = dqAcc ? dqAcc + c * g.sq * g.dPad : nullptr;
    int64_t i = first;
    for (; i + kRows <= g.sq; i += kRows)
      keyTileRows<kRows, T>(args, g, st, kT, vT, kPad, delta, bi, hi, i, j0,
                            width, dk, dv, dq ? dq + i * g.dPad : nullptr);
    for (; i < g.sq; ++i)
      keyTileRows<1, T>(args, g, st, kT, vT, kPad, delta, bi, hi, i, j0, width,
                        dk, dv, dq ? dq + i * g.dPad : nullptr);
  }
  const int64_t off = bi * g.sk * g.kvStride + hk * g.dh;
  T *dkOut = dataOf<T>(args.outs[1]) + off;
  T *dvOut = dataOf<T>(args.outs[2]) + off;
  for (int64_t j = 0; j < keys; ++j) {
    float *dkRow = dk + j * g.dPad;
    for (int64_t d = 0; d < g.dh; ++d)
      dkRow[d] *= g.scale;
    convert(dkRow, dkOut + (j0 + j) * g.kvStride, g.dh);
    convert(dv + j * g.dPad, dvOut + (j0 + j) * g.kvStride, g.dh);
  }
}

template <typename T>
BRAID_INLINE void keyTileBody(const KernelArgs &args, const Geometry &g,
                              const Layouts &lay, const float *delta,
                              int64_t bi, int64_t hk, int64_t j0) {
  keyTileAll<T>(args, g, lay, delta, bi, hk, j0, nullptr);
}

// All gradients of kv head (bi, hk) and its query heads in one pass: the
// key tiles in order, each as keyTileBody, with dq summed over the tiles
// in per-thread rows. Each dq row gets the same terms in the same order as
// in queryBlockBody (tiles ascending; a tile a row cannot see adds zeros),
// so both splits give the same bits.
template <typename T>
BRAID_INLINE void kvHeadBody(const KernelArgs &args, const Geometry &g,
                             const Layouts &lay, const float *delta, int64_t bi,
                             int64_t hk) {
  float *dqAcc = threadScratch(0, g.group * g.sq * g.dPad);
  std::memset(dqAcc, 0, g.group * g.sq * g.dPad * sizeof(float));
  for (int64_t j0 = 0; j0 < g.sk; j0 += kTile)
    keyTileAll<T>(args, g, lay, delta, bi, hk, j0, dqAcc);
  T *dq = dataOf<T>(args.outs[0]);
  for (int64_t c = 0; c < g.group; ++c) {
    const int64_t hi = hk * g.group + c;
    for (int64_t i = 0; i < g.sq; ++i) {
      const float *acc = dqAcc + (c * g.sq + i) * g.dPad;
      T *out = dq + (bi * g.sq + i) * g.qStride + hi * g.dh;
      for (int64_t d = 0; d < g.dh; ++d)
        store(out, d, acc[d] * g.scale);
    }
  }
}

// dq of rows i .. i+R-1 of head (bi, hi), over the key tiles in order.
template <int R, typename T>
BRAID_INLINE void
queryRows(const KernelArgs &args, const Geometry &g, const BackwardState &st,
          const float *kT, const float *vT, const float *kPad,
          const float *delta, int64_t bi, int64_t hi, int64_t i) {
  loadGradRows<T>(args, g, st, bi, hi, i, R);
  std::memset(st.acc, 0, R * g.dPad * sizeof(float));
  const int64_t stat = (bi * g.h + hi) * g.sq + i;
  const int64_t nMax = g.rowEnd(i + R - 1);
  for (int64_t jt0 = 0; jt0 < nMax; jt0 += kTile) {
    const int64_t width =
        roundUp(nMax - jt0 < kTile ? nMax - jt0 : kTile, kLanes);
    gradTile<R>(g, st, kT, vT, args.ins[5].f32() + stat, delta + stat, bi, hi,
                i, jt0, width);
    addWeightedSums<R>(st.dS, kPad + jt0 * g.dPad, g, width, st.acc);
  }
  T *dq = dataOf<T>(args.outs[0]);
  for (int r = 0; r < R; ++r) {
    T *out = dq + (bi * g.sq + i + r) * g.qStride + hi * g.dh;
    for (int64_t d = 0; d < g.dh; ++d)
      store(out, d, st.acc[r * g.dPad + d] * g.scale);
  }
}

// dq of rows [i0, i0 + kQueryBlock) of head (bi, hi).
template <typename T>
BRAID_INLINE void queryBlockBody(const KernelArgs &args, const Geometry &g,
                                 const Layouts &lay, const float *delta,
                                 int64_t bi, int64_t hi, int64_t i0) {
  const int64_t i1 = i0 + kQueryBlock < g.sq ? i0 + kQueryBlock : g.sq;
  const BackwardState st(g, kRows);
  const int64_t u = g.kvHead(bi, hi / g.group);
  const float *kT = lay.kT.get() + u * lay.tSize;
  const float *vT = lay.vT.get() + u * lay.tSize;
  const float *kPad = lay.kPad.get() + u * lay.pSize;
  int64_t i = i0;
  for (; i + kRows <= i1; i += kRows)
    queryRows<kRows, T>(args, g, st, kT, vT, kPad, delta, bi, hi, i);
  for (; i < i1; ++i)
    queryRows<1, T>(args, g, st, kT, vT, kPad, delta, bi, hi, i);
}

BRAID_VECTOR_CLONES
void keyTile(const KernelArgs &args, const Geometry &g, const Layouts &lay,
             const float *delta, int64_t bi, int64_t hk, int64_t j0,
             const float *) {
  keyTileBody<float>(args, g, lay, delta, bi, hk, j0);
}
BRAID_VECTOR_CLONES
void keyTile(const KernelArgs &args, const Geometry &g, const Layouts &lay,
             const float *delta, int64_t bi, int64_t hk, int64_t j0,
             const Bf16 *) {
  keyTileBody<Bf16>(args, g, lay, delta, bi, hk, j0);
}
BRAID_VECTOR_CLONES
void kvHead(const KernelArgs &args, const Geometry &g, const Layouts &lay,
            const float *delta, int64_t bi, int64_t hk, const float *) {
  kvHeadBody<float>(args, g, lay, delta, bi, hk);
}
BRAID_VECTOR_CLONES
void kvHead(const KernelArgs &args, const Geometry &g, const Layouts &lay,
            const float *delta, int64_t bi, int64_t hk, const Bf16 *) {
  kvHeadBody<Bf16>(args, g, lay, delta, bi, hk);
}
BRAID_VECTOR_CLONES
void queryBlock(const KernelArgs &args, const Geometry &g, const Layouts &lay,
                const float *delta, int64_t bi, int64_t hi, int64_t i0,
                const float *) {
  queryBlockBody<float>(args, g, lay, delta, bi, hi, i0);
}
BRAID_VECTOR_CLONES
void queryBlock(const KernelArgs &args, const Geometry &g, const Layouts &lay,
                const float *delta, int64_t bi, int64_t hi, int64_t i0,
                const Bf16 *) {
  queryBlockBody<Bf16>(args, g, lay, delta, bi, hi, i0);
}

// delta[b, h, i] = do[b, i, h] . o[b, i, h] over the head dimension.
template <typename T>
void rowDeltas(const KernelArgs &args, const Geometry &g, float *delta) {
  const T *dO = dataOf<T>(args.ins[0]);
  const T *o = dataOf<T>(args.ins[4]);
  parallelFor(poolOf(args), g.b * g.sq, rowGrain(g.qStride),
              [&](int64_t r0, int64_t r1) {
                float *a = threadScratch(0, 2 * g.dh), *c = a + g.dh;
                for (int64_t r = r0; r < r1; ++r)
                  for (int64_t hi = 0; hi < g.h; ++hi) {
                    const int64_t off = r * g.qStride + hi * g.dh;
                    convert(dO + off, a, g.dh);
                    convert(o + off, c, g.dh);
                    delta[((r / g.sq) * g.h + hi) * g.sq + r % g.sq] =
                        dot(a, c, g.dh);
                  }
              });
}

template <typename T> void runFlashAttentionGradInput(const KernelArgs &args) {
  const Geometry g(args, *args.ins[1].desc, *args.ins[2].desc, 6);
  std::unique_ptr<float[]> delta(new float[g.b * g.h * g.sq]);
  rowDeltas<T>(args, g, delta.get());
  const Layouts lay =
      layOut(args, g, dataOf<T>(args.ins[2]), dataOf<T>(args.ins[3]),
             /*kPadded=*/true, /*vTransposed=*/true);
  // With a (batch, kv head) pair per thread, one pass computes everything
  // and recomputes each probability once. With fewer pairs than threads,
  // dk, dv and dq are split finer in two passes, each recomputing the
  // probabilities. The bits are the same either way.
  ThreadPool *pool = poolOf(args);
  const int64_t threads = pool ? pool->size() : 1;
  if (g.b * g.hkv >= threads) {
    parallelFor(pool, g.b * g.hkv, 1, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u)
        kvHead(args, g, lay, delta.get(), u / g.hkv, u % g.hkv,
               static_cast<const T *>(nullptr));
    });
    return;
  }
  const int64_t tiles = ceilDiv(g.sk, kTile);
  parallelFor(pool, g.b * g.hkv * tiles, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bh = u / tiles;
      keyTile(args, g, lay, delta.get(), bh / g.hkv, bh % g.hkv,
              (u % tiles) * kTile, static_cast<const T *>(nullptr));
    }
  });
  const int64_t blocks = ceilDiv(g.sq, kQueryBlock);
  parallelFor(pool, g.b * g.h * blocks, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bh = u / blocks;
      queryBlock(args, g, lay, delta.get(), bh / g.h, bh % g.h,
                 (u % blocks) * kQueryBlock, static_cast<const T *>(nullptr));
    }
  });
}

} // namespace

absl::Status registerFusedAttentionKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"flash_attention",
           byStorage<runFlashAttention<float>, runFlashAttention<Bf16>>},
          {"flash_attention_grad_input",
           byStorage<runFlashAttentionGradInput<float>,
                     runFlashAttentionGradInput<Bf16>>},
      });
}

} // namespace braid::cpu
