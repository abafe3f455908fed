// attention and attention_grad_input: softmax(scale q k^T) v per head, with
// grouped-query heads read in place (no repeated K/V), an optional causal
// mask and optional dropout on the probabilities.
//
// Forward runs one (batch, query head) pair per work item; backward one
// (batch, kv head) pair, so that the key/value gradients summed over the
// group's query heads have a single writer and a fixed order. Each work item
// first copies its K/V head into per-thread scratch, transposed (for dot
// products with every key) or with rows padded to a multiple of 16 (for sums
// of weighted rows), so that every inner loop runs over 16 contiguous,
// independent values kept in registers: it vectorises without reordering
// any sum. With `causal`, only keys j < rowEnd(i) (j <= i, or j < prefix)
// are computed; the masked part of `probs` is written as zeros. Keys of
// another segment within that range get the score -inf, hence probability
// 0, and backward, which reads the probabilities, adds nothing for them.
// With `cp` the masks and draws act on positions (AttentionGeometry.h);
// probs is then [B, H, Sq, Sk]. The keys must hold the whole sequence
// (cp_kv_step -1): a row needs its own position among them, since without
// an lse the softmax of a ring step's keys could not be merged.
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/AttentionGeometry.h"
#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

// Keys (and head-dimension columns) handled together in registers.
constexpr int64_t kBlock = kLanes;

// The sizes and parameters of one launch, read once (sPad and dPad are
// multiples of kBlock).
struct Geometry : AttentionGeometry {
  using AttentionGeometry::AttentionGeometry;
  int64_t keys(int64_t i) const { return rowEnd(i); }
};

// Sets the scores row[0, n) of query i whose key lies in another segment
// to -inf.
BRAID_INLINE void maskSegments(float *row, const Geometry &g, int64_t bi,
                               int64_t i, int64_t n) {
  const int32_t *seg = g.segments(bi);
  const int32_t mine = seg[g.qmap.at(i)];
  for (int64_t j = 0; j < n; ++j)
    if (seg[g.kmap.at(j)] != mine)
      row[j] = -std::numeric_limits<float>::infinity();
}

// Copies the sk rows of one head (stride `stride`, dh values each) into
// t[d * sPad + j], zero-padding j in [sk, sPad). The rows are first copied
// whole into `staging` (sk * dh floats): row copies keep many cache misses in
// flight, where the element-wise transpose reading the head straight from
// memory waited on them about one row at a time (measured: the transpose's
// share of attention_grad_input fell from 13% to 6%).
template <typename T>
BRAID_INLINE void transposeHead(const T *src, int64_t stride, const Geometry &g,
                                float *staging, float *t) {
  for (int64_t j = 0; j < g.sk; ++j)
    convert(src + j * stride, staging + j * g.dh, g.dh);
  for (int64_t d = 0; d < g.dh; ++d)
    for (int64_t j = g.sk; j < g.sPad; ++j)
      t[d * g.sPad + j] = 0.0f;
  for (int64_t j = 0; j < g.sk; ++j)
    for (int64_t d = 0; d < g.dh; ++d)
      t[d * g.sPad + j] = staging[j * g.dh + d];
}

// Copies the sk rows of one head into rows of dPad floats.
template <typename T>
BRAID_INLINE void padHead(const T *src, int64_t stride, const Geometry &g,
                          float *out) {
  for (int64_t j = 0; j < g.sk; ++j)
    padRow(src + j * stride, g, out + j * g.dPad);
}

// Query rows handled together: their partial sums are independent chains
// that keep the vector units busy, and each load of K or V serves all of
// them. R is kRows, or 1 for the last rows of a head.
constexpr int kRows = 4;

// out[r * sPad + j] = sum over d of a[r * aStride + d] * t[d * sPad + j] for
// r < R and j < n rounded up to kBlock, each sum taken over d in order.
template <int R>
BRAID_INLINE void
rowsTimesTransposed(const float *__restrict a, int64_t aStride,
                    const float *__restrict t, const Geometry &g, int64_t n,
                    float *__restrict out) {
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    Vec16 acc[R] = {};
    for (int64_t d = 0; d < g.dh; ++d) {
      const Vec16 tv = load16(t + d * g.sPad + j0);
      for (int r = 0; r < R; ++r)
        acc[r] += a[r * aStride + d] * tv;
    }
    for (int r = 0; r < R; ++r)
      store16(out + r * g.sPad + j0, acc[r]);
  }
}

// out[r * dPad + c] = sum over j < n of w[r * sPad + j] * rows[j * dPad + c]
// for r < R and c < dPad, each sum taken over j in order.
template <int R>
BRAID_INLINE void
weightedRowSums(const float *__restrict w, const float *__restrict rows,
                const Geometry &g, int64_t n, float *__restrict out) {
  for (int64_t c0 = 0; c0 < g.dPad; c0 += kBlock) {
    Vec16 acc[R] = {};
    for (int64_t j = 0; j < n; ++j) {
      const Vec16 rv = load16(rows + j * g.dPad + c0);
      for (int r = 0; r < R; ++r)
        acc[r] += w[r * g.sPad + j] * rv;
    }
    for (int r = 0; r < R; ++r)
      store16(out + r * g.dPad + c0, acc[r]);
  }
}

// y[j * dPad + c] += w[r * sPad + j] * x[r * dPad + c] for j < n, adding
// the rows r = 0 .. R-1 in order. The R blocks of x stay in registers over
// all j.
template <int R>
BRAID_INLINE void addWeightedRows(const float *__restrict w,
                                  const float *__restrict x, const Geometry &g,
                                  int64_t n, float *__restrict y) {
  for (int64_t c0 = 0; c0 < g.dPad; c0 += kBlock) {
    Vec16 xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = load16(x + r * g.dPad + c0);
    for (int64_t j = 0; j < n; ++j) {
      Vec16 acc = load16(y + j * g.dPad + c0);
      for (int r = 0; r < R; ++r)
        acc += w[r * g.sPad + j] * xr[r];
      store16(y + j * g.dPad + c0, acc);
    }
  }
}

// The lanes of the block starting at key j0 that hold keys of a row of n.
BRAID_INLINE Mask16 keysInRow(int64_t n, int64_t j0) {
  const int64_t k = n - j0;
  return firstLanes(static_cast<int>(k < 0 ? 0 : k > kLanes ? kLanes : k));
}

// Softmax of scale * row[0, n) in place; row[n, end) becomes 0, and `end` is
// a multiple of kBlock. The bits are those of scaleInPlace, maxOf,
// expShiftInPlace, sum and scaleInPlace over [0, n) in turn: the maximum and
// the sum keep key j in lane j % kLanes, as those helpers do. Every pass runs
// over whole blocks with lane masks rather than a scalar tail, since most
// causal rows end mid-block.
BRAID_INLINE void softmaxRow(float *__restrict row, int64_t n, int64_t end,
                             float scale) {
  // Lanes beyond n compare element 0 again, which every lane of maxOf starts
  // from: no maximum changes.
  const Vec16 first = broadcast16(row[0] * scale);
  Vec16 mx = first;
  for (int64_t j0 = 0; j0 < end; j0 += kBlock) {
    const Vec16 x = load16(row + j0) * scale;
    store16(row + j0, x);
    const Vec16 c = keysInRow(n, j0) ? x : first;
    mx = c > mx ? c : mx;
  }
  const float m = maxLanes(mx);
  for (int64_t j = 0; j < end; ++j)
    row[j] = expFloat(row[j] - m);
  // Lanes beyond n add 0, which leaves each lane's sum unchanged: a sum that
  // starts at +0 is never -0.
  Vec16 total = {};
  for (int64_t j0 = 0; j0 < end; j0 += kBlock) {
    const Vec16 e = keysInRow(n, j0) ? load16(row + j0) : Vec16{};
    store16(row + j0, e);
    total += e;
  }
  const float inv = 1.0f / sumLanes(total);
  for (int64_t j0 = 0; j0 < end; j0 += kBlock)
    store16(row + j0, load16(row + j0) * inv);
}

// Per-thread scratch of the forward pass of one head.
struct ForwardScratch {
  float *kT, *vPad, *staging, *scores, *out, *qRows;
  explicit ForwardScratch(const Geometry &g) {
    kT = threadScratch(0, g.dh * g.sPad);
    vPad = threadScratch(1, g.sk * (g.dPad + g.dh));
    staging = vPad + g.sk * g.dPad;
    scores = threadScratch(2, kRows * (g.sPad + 2 * g.dPad));
    out = scores + kRows * g.sPad;
    qRows = out + kRows * g.dPad;
  }
};

// Query rows i0 .. i0+R-1 of head (bi, hi). Rows with fewer keys than the
// block's last row get zero weights beyond their keys. The query rows are
// read from a padded f32 copy, which changes no sum: each runs over d < dh
// in order either way.
template <int R, typename T>
BRAID_INLINE void attentionRows(const KernelArgs &args, const Geometry &g,
                                const ForwardScratch &m, int64_t bi, int64_t hi,
                                int64_t i0) {
  const T *q =
      dataOf<T>(args.ins[0]) + (bi * g.sq + i0) * g.qStride + hi * g.dh;
  T *o = dataOf<T>(args.outs[0]) + (bi * g.sq + i0) * g.qStride + hi * g.dh;
  const int64_t nMax = g.keys(i0 + R - 1);
  for (int r = 0; r < R; ++r)
    padRow(q + r * g.qStride, g, m.qRows + r * g.dPad);
  rowsTimesTransposed<R>(m.qRows, g.dPad, m.kT, g, nMax, m.scores);
  for (int r = 0; r < R; ++r) {
    float *row = m.scores + r * g.sPad;
    const int64_t n = g.keys(i0 + r);
    if (g.seg)
      maskSegments(row, g, bi, i0 + r, n);
    softmaxRow(row, n, roundUp(nMax, kBlock), g.scale);

    const int64_t base = g.probsRow(bi, hi, i0 + r);
    T *probs = dataOf<T>(args.outs[1]) + base;
    convert(row, probs, n);
    zero(probs + n, g.sk - n);
    if (g.mask.active) {
      // A local copy: read through g, the mask's fields might alias row and
      // would be reloaded for every element.
      const DropoutMask mask = g.mask;
      g.forKeyDraws(
          g.dropRow(bi, hi, i0 + r), 0, n,
          [&](int64_t j, int64_t draw) { row[j] *= mask.factor(draw); });
    }
  }
  weightedRowSums<R>(m.scores, m.vPad, g, nMax, m.out);
  for (int r = 0; r < R; ++r)
    convert(m.out + r * g.dPad, o + r * g.qStride, g.dh);
}

template <typename T>
BRAID_INLINE void attentionHeadBody(const KernelArgs &args, const Geometry &g,
                                    int64_t bi, int64_t hi) {
  const int64_t kvOff = bi * g.sk * g.kvStride + (hi / g.group) * g.dh;
  const ForwardScratch m(g);
  transposeHead(dataOf<T>(args.ins[1]) + kvOff, g.kvStride, g, m.staging,
                m.kT);
  padHead(dataOf<T>(args.ins[2]) + kvOff, g.kvStride, g, m.vPad);
  int64_t i = 0;
  for (; i + kRows <= g.sq; i += kRows)
    attentionRows<kRows, T>(args, g, m, bi, hi, i);
  for (; i < g.sq; ++i)
    attentionRows<1, T>(args, g, m, bi, hi, i);
}

// One cloned function per storage type (the last argument only selects it).
BRAID_VECTOR_CLONES
void attentionHead(const KernelArgs &args, const Geometry &g, int64_t bi,
                   int64_t hi, const float *) {
  attentionHeadBody<float>(args, g, bi, hi);
}
BRAID_VECTOR_CLONES
void attentionHead(const KernelArgs &args, const Geometry &g, int64_t bi,
                   int64_t hi, const Bf16 *) {
  attentionHeadBody<Bf16>(args, g, bi, hi);
}

template <typename T> void runAttention(const KernelArgs &args) {
  const Geometry g(args, *args.ins[0].desc, *args.ins[1].desc,
                   /*segInput=*/3);
  parallelFor(poolOf(args), g.b * g.h, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u)
      attentionHead(args, g, u / g.h, u % g.h, static_cast<const T *>(nullptr));
  });
}

// Per-thread scratch of the backward pass of one (batch, kv head).
struct BackwardScratch {
  float *vT, *kPad, *staging, *dk, *dv; // dk, dv: padded, summed over group
  float *p, *dP, *pd, *dSScaled;        // kRows rows of sPad
  float *doRows, *qRows, *dqRows;       // kRows rows of dPad
  explicit BackwardScratch(const Geometry &g) {
    vT = threadScratch(0, g.dh * g.sPad);
    kPad = threadScratch(1, g.sk * (g.dPad + g.dh));
    staging = kPad + g.sk * g.dPad;
    dk = threadScratch(2, 2 * g.sk * g.dPad);
    dv = dk + g.sk * g.dPad;
    p = threadScratch(3, kRows * (4 * g.sPad + 3 * g.dPad));
    dP = p + kRows * g.sPad;
    pd = dP + kRows * g.sPad;
    dSScaled = pd + kRows * g.sPad;
    doRows = dSScaled + kRows * g.sPad;
    qRows = doRows + kRows * g.dPad;
    dqRows = qRows + kRows * g.dPad;
  }
};

// Backward of query rows i0 .. i0+R-1 of head (bi, hi); see attentionRows.
template <int R, typename T>
BRAID_INLINE void attentionGradRows(const KernelArgs &args, const Geometry &g,
                                    const BackwardScratch &m, int64_t bi,
                                    int64_t hi, int64_t i0) {
  const int64_t qOff = (bi * g.sq + i0) * g.qStride + hi * g.dh;
  const int64_t nMax = g.keys(i0 + R - 1);
  for (int r = 0; r < R; ++r) {
    padRow(dataOf<T>(args.ins[0]) + qOff + r * g.qStride, g,
           m.doRows + r * g.dPad);
    padRow(dataOf<T>(args.ins[1]) + qOff + r * g.qStride, g,
           m.qRows + r * g.dPad);
  }
  // dPd = do v^T; dP and the dropped probabilities Pd share the mask.
  rowsTimesTransposed<R>(m.doRows, g.dPad, m.vT, g, nMax, m.dP);
  // Each row runs over whole blocks up to `end`, with lanes beyond its keys
  // set to 0 by masks rather than by a scalar tail.
  const int64_t end = roundUp(nMax, kBlock);
  for (int r = 0; r < R; ++r) {
    const int64_t n = g.keys(i0 + r);
    const int64_t base = g.probsRow(bi, hi, i0 + r);
    float *__restrict p = m.p + r * g.sPad;
    float *__restrict dP = m.dP + r * g.sPad;
    float *__restrict pd = m.pd + r * g.sPad;
    float *__restrict dSScaled = m.dSScaled + r * g.sPad;
    convert(dataOf<T>(args.ins[4]) + base, p, n);
    std::memset(p + n, 0, (end - n) * sizeof(float));
    if (g.mask.active) {
      const DropoutMask mask = g.mask; // a local copy, as in attentionRows
      g.forKeyDraws(g.dropRow(bi, hi, i0 + r), 0, n,
                    [&](int64_t j, int64_t draw) {
                      const float f = mask.factor(draw);
                      dP[j] *= f;
                      pd[j] = p[j] * f;
                    });
      std::memset(pd + n, 0, (end - n) * sizeof(float));
    }
    // rowsum(dP * P) as dot(dP, P, n) forms it: key j in lane j % kLanes.
    // Lanes beyond n add 0, which changes no lane's sum (a sum that starts
    // at +0 is never -0).
    Vec16 acc = {};
    for (int64_t j0 = 0; j0 < end; j0 += kBlock)
      acc += keysInRow(n, j0) ? load16(dP + j0) * load16(p + j0) : Vec16{};
    const float rowSum = sumLanes(acc);
    // dS = P * (dP - rowSum), kept in dP, and scale * dS, the weights of dk.
    for (int64_t j0 = 0; j0 < end; j0 += kBlock) {
      const Vec16 dS = keysInRow(n, j0)
                           ? load16(p + j0) * (load16(dP + j0) - rowSum)
                           : Vec16{};
      store16(dP + j0, dS);
      store16(dSScaled + j0, g.scale * dS);
    }
  }
  // Without dropout the dropped probabilities are the probabilities.
  addWeightedRows<R>(g.mask.active ? m.pd : m.p, m.doRows, g, nMax, m.dv);
  weightedRowSums<R>(m.dP, m.kPad, g, nMax, m.dqRows);
  for (int r = 0; r < R; ++r) {
    T *dq = dataOf<T>(args.outs[0]) + qOff + r * g.qStride;
    for (int64_t d = 0; d < g.dh; ++d)
      store(dq, d, m.dqRows[r * g.dPad + d] * g.scale);
  }
  addWeightedRows<R>(m.dSScaled, m.qRows, g, nMax, m.dk);
}

// The gradients of one (batch, kv head): dq for each query head of the
// group, and dk, dv summed over those heads in order, in padded scratch rows
// that are copied out at the end.
template <typename T>
BRAID_INLINE void attentionGradGroupBody(const KernelArgs &args,
                                         const Geometry &g, int64_t bi,
                                         int64_t hk) {
  const int64_t kvOff = bi * g.sk * g.kvStride + hk * g.dh;
  const BackwardScratch m(g);
  transposeHead(dataOf<T>(args.ins[3]) + kvOff, g.kvStride, g, m.staging,
                m.vT);
  padHead(dataOf<T>(args.ins[2]) + kvOff, g.kvStride, g, m.kPad);
  std::memset(m.dk, 0, 2 * g.sk * g.dPad * sizeof(float));
  for (int64_t hi = hk * g.group; hi < (hk + 1) * g.group; ++hi) {
    int64_t i = 0;
    for (; i + kRows <= g.sq; i += kRows)
      attentionGradRows<kRows, T>(args, g, m, bi, hi, i);
    for (; i < g.sq; ++i)
      attentionGradRows<1, T>(args, g, m, bi, hi, i);
  }
  for (int64_t j = 0; j < g.sk; ++j) {
    convert(m.dk + j * g.dPad, dataOf<T>(args.outs[1]) + kvOff + j * g.kvStride,
            g.dh);
    convert(m.dv + j * g.dPad, dataOf<T>(args.outs[2]) + kvOff + j * g.kvStride,
            g.dh);
  }
}

BRAID_VECTOR_CLONES
void attentionGradGroup(const KernelArgs &args, const Geometry &g, int64_t bi,
                        int64_t hk, const float *) {
  attentionGradGroupBody<float>(args, g, bi, hk);
}
BRAID_VECTOR_CLONES
void attentionGradGroup(const KernelArgs &args, const Geometry &g, int64_t bi,
                        int64_t hk, const Bf16 *) {
  attentionGradGroupBody<Bf16>(args, g, bi, hk);
}

template <typename T> void runAttentionGradInput(const KernelArgs &args) {
  const Geometry g(args, *args.ins[1].desc, *args.ins[2].desc,
                   /*segInput=*/5);
  parallelFor(poolOf(args), g.b * g.hkv, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u)
      attentionGradGroup(args, g, u / g.hkv, u % g.hkv,
                         static_cast<const T *>(nullptr));
  });
}

} // namespace

absl::Status registerAttentionKernels(KernelRegistry &registry) {
  return registerAll(registry,
                     {
                         {"attention",
                          byStorage<runAttention<float>, runAttention<Bf16>>},
                         {"attention_grad_input",
                          byStorage<runAttentionGradInput<float>,
                                    runAttentionGradInput<Bf16>>},
                     });
}

} // namespace braid::cpu
