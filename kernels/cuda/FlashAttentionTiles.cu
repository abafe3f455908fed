// Flash attention on tensor cores: flash_attention and
// flash_attention_grad_input for bf16 storage with head dimensions 64 and
// 128 (FlashAttentionTiles.h). FusedAttention.cu calls these kernels when
// they apply and runs its own (one block per row, CUDA cores) otherwise.
//
// Tiles of 64 query rows and 64 keys; a block of 4 warps, each owning 16
// rows (forward, dq) or 16 keys (dk, dv) of its block's tile. Products are
// 16x16x16 bf16 tensor-core tiles (nvcuda::wmma) accumulating in f32:
//   forward: S = Q K^T, then per row the online softmax (running maximum m
//     and sum l, the output rows rescaled by exp(m_old - m_new)), then
//     O += P V with P the dropped probabilities; o = O / l and
//     lse = m + log(l) at the end;
//   dk, dv (one block per kv head and key tile, over the group's query
//     heads and their row tiles in order): S^T = K Q^T and dP^T = V dO^T,
//     P = exp(scale S - lse), dS = P (dP f - D), then dV += (P f)^T dO and
//     dK += dS^T Q; dk = scale dK;
//   dq (one block per query head and row tile, over the key tiles in
//     order): S and dP again, dS, dQ += dS K; dq = scale dQ.
// Every output element has one writer that adds its terms in a fixed
// order: results are the same on every run. Masks and dropout draws are
// those of FusedAttention.cu (element ((b H + h) S + i) S + j); a key a row
// does not see gets probability 0. The tensor cores multiply bf16, but the
// weights of the second products (P, P f, dS) are f32 values: each is split
// into a bf16 high part and the bf16 rounding of the rest, and both are
// multiplied, high part first, so a weight keeps about 16 bits. (Rounded
// to bf16 once, few-key rows under causal or document masks, where the
// weights are large and the sums cancel, would miss the bf16 tolerance of
// the tests.)
//
// Shared memory: Q, K, V (and dO) tiles in bf16 with rows padded by 8
// values, f32 score tiles, bf16 weight tiles (high and low parts) and f32
// accumulators (up to 205 KiB for head dimension 128, opted into at each
// launch).
#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/AttentionCommon.cuh"
#include "kernels/cuda/FlashAttentionTiles.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda::flash_tiles {
namespace {

using namespace nvcuda;
using attention::dropFactor;
using attention::Geometry;
using attention::getStat;
using attention::maskKey;
using rows::warpSum;

constexpr int kTile = 64;    // query rows and keys of a tile
constexpr int kThreads = 128; // 4 warps of 16 rows (or keys) each
constexpr int kPadH = 8;     // bf16 values added to each shared row
constexpr int kPadF = 4;     // f32 values added to each shared row
constexpr int ldS = kTile + kPadF; // f32 score rows
constexpr int ldP = kTile + kPadH; // bf16 probability rows

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                             wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                                wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                                wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__device__ __forceinline__ const __nv_bfloat16 *tc(const Bf16 *p) {
  return reinterpret_cast<const __nv_bfloat16 *>(p);
}

__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Rows [0, kTile) of a head (row r at src + r * stride, D values) into
// shared rows of D + kPadH values; rows from `valid` on are zeros.
template <int D>
__device__ void loadTile(Bf16 *dst, const Bf16 *src, int64_t stride,
                         int64_t valid) {
  constexpr int kVecs = D / 8; // 16-byte vectors per row
  for (int t = threadIdx.x; t < kTile * kVecs; t += kThreads) {
    const int r = t / kVecs, c = (t % kVecs) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < valid)
      val = *reinterpret_cast<const uint4 *>(src + r * stride + c);
    *reinterpret_cast<uint4 *>(dst + r * (D + kPadH) + c) = val;
  }
}

// out[16][kTile] (f32, ld ldS) = a[16][D] times the transpose of b's
// kTile rows of D values: a's and b's rows in shared memory (ld D + kPadH).
template <int D>
__device__ void rowsTimesRowsT(const Bf16 *a, const Bf16 *b, float *out) {
  constexpr int ldH = D + kPadH;
#pragma unroll
  for (int c = 0; c < kTile / 16; ++c) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      FragA fa;
      FragBCol fb;
      wmma::load_matrix_sync(fa, tc(a + kk * 16), ldH);
      wmma::load_matrix_sync(fb, tc(b + c * 16 * ldH + kk * 16), ldH);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + c * 16, acc, ldS, wmma::mem_row_major);
  }
}

// A weight w as two bf16 parts, hi + lo, hi first: lo is the rounding of
// w - hi, so hi + lo is w to about 16 bits.
__device__ __forceinline__ void splitWeight(float w, Bf16 *hi, Bf16 *lo) {
  const Bf16 h = roundToBf16(w);
  *hi = h;
  *lo = roundToBf16(w - widen(h));
}

// acc[16][D] (f32, ld D + kPadF) += w[16][kTile] times b's kTile rows of D
// values (bf16, ld D + kPadH), w given as its parts wHi and wLo (bf16, ld
// ldP); for each step of 16 keys the high part's product first.
template <int D>
__device__ void addWeightsTimesRows(const Bf16 *wHi, const Bf16 *wLo,
                                    const Bf16 *b, float *acc) {
  constexpr int ldH = D + kPadH, ldO = D + kPadF;
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    FragC f;
    wmma::load_matrix_sync(f, acc + c * 16, ldO, wmma::mem_row_major);
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      FragA fa;
      FragBRow fb;
      wmma::load_matrix_sync(fb, tc(b + kk * 16 * ldH + c * 16), ldH);
      wmma::load_matrix_sync(fa, tc(wHi + kk * 16), ldP);
      wmma::mma_sync(f, fa, fb, f);
      wmma::load_matrix_sync(fa, tc(wLo + kk * 16), ldP);
      wmma::mma_sync(f, fa, fb, f);
    }
    wmma::store_matrix_sync(acc + c * 16, f, ldO, wmma::mem_row_major);
  }
}

// --- forward -----------------------------------------------------------------

template <int D> constexpr size_t forwardBytes() {
  return 3 * size_t{kTile} * (D + kPadH) * 2 + size_t{kTile} * ldS * 4 +
         2 * size_t{kTile} * ldP * 2 + size_t{kTile} * (D + kPadF) * 4;
}

// One block per (query tile, head, batch).
template <int D>
__global__ void __launch_bounds__(kThreads)
    tiledForward(Geometry g, const StepValues *__restrict__ steps,
                 const Bf16 *__restrict__ q,
                 const Bf16 *__restrict__ k, const Bf16 *__restrict__ v,
                 Bf16 *__restrict__ o, float *__restrict__ lse) {
  constexpr int ldH = D + kPadH, ldO = D + kPadF;
  extern __shared__ __align__(32) unsigned char smem[];
  Bf16 *qs = reinterpret_cast<Bf16 *>(smem);
  Bf16 *ks = qs + kTile * ldH;
  Bf16 *vs = ks + kTile * ldH;
  float *ss = reinterpret_cast<float *>(vs + kTile * ldH);
  Bf16 *ps = reinterpret_cast<Bf16 *>(ss + kTile * ldS); // P f, high
  Bf16 *psLo = ps + kTile * ldP;                          // and low parts
  float *os = reinterpret_cast<float *>(psLo + kTile * ldP);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = warp * 16;
  const int64_t q0 = int64_t{blockIdx.x} * kTile, hi = blockIdx.y,
                bi = blockIdx.z, hk = hi / g.group;
  const int64_t rows = min(int64_t{kTile}, g.s - q0);
  const uint64_t key = maskKey(g, steps);
  loadTile<D>(qs, q + (bi * g.s + q0) * g.qStride + hi * D, g.qStride, rows);
  for (int t = threadIdx.x; t < kTile * ldO; t += kThreads)
    os[t] = 0.0f;
  float m[16], l[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const Bf16 *kHead = k + bi * g.s * g.kvStride + hk * D;
  const Bf16 *vHead = v + bi * g.s * g.kvStride + hk * D;
  const int64_t keysEnd = g.rowEnd(q0 + rows - 1);
  for (int64_t j0 = 0; j0 < keysEnd; j0 += kTile) {
    const int64_t keys = min(int64_t{kTile}, g.s - j0);
    loadTile<D>(ks, kHead + j0 * g.kvStride, g.kvStride, keys);
    loadTile<D>(vs, vHead + j0 * g.kvStride, g.kvStride, keys);
    __syncthreads();
    rowsTimesRowsT<D>(qs + r0 * ldH, ks, ss + r0 * ldS);
    __syncwarp();
    // The online softmax of each row, lanes over the tile's keys.
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t i = q0 + r0 + r;
      float x[2];
      bool seen[2];
      float tileMax = -INFINITY;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int jj = lane + 32 * t;
        seen[t] = g.visible(bi, i, j0 + jj);
        x[t] = seen[t] ? ss[(r0 + r) * ldS + jj] * g.scale : -INFINITY;
        tileMax = fmaxf(tileMax, x[t]);
      }
      tileMax = warpMax(tileMax);
      const float mNew = fmaxf(m[r], tileMax);
      float alpha = 1.0f, e[2] = {0.0f, 0.0f};
      if (mNew != -INFINITY) {
        alpha = expf(m[r] - mNew); // 0 on the row's first visible tile
#pragma unroll
        for (int t = 0; t < 2; ++t)
          e[t] = seen[t] ? expf(x[t] - mNew) : 0.0f;
      }
      l[r] = l[r] * alpha + warpSum(e[0] + e[1]);
      m[r] = mNew;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int jj = lane + 32 * t;
        const float f =
            seen[t] ? dropFactor(g, key, g.dropRow(bi, hi, i) + j0 + jj)
                    : 0.0f;
        splitWeight(e[t] * f, &ps[(r0 + r) * ldP + jj],
                    &psLo[(r0 + r) * ldP + jj]);
      }
      if (alpha != 1.0f)
        for (int d = lane; d < D; d += 32)
          os[(r0 + r) * ldO + d] *= alpha;
    }
    __syncwarp();
    addWeightsTimesRows<D>(ps + r0 * ldP, psLo + r0 * ldP, vs,
                           os + r0 * ldO);
    __syncthreads(); // the next tile overwrites ks and vs
  }
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t i = q0 + r0 + r;
    if (i >= g.s)
      continue;
    const float inv = 1.0f / l[r];
    Bf16 *oRow = o + (bi * g.s + i) * g.qStride + hi * D;
    for (int d = lane; d < D; d += 32)
      oRow[d] = roundToBf16(os[(r0 + r) * ldO + d] * inv);
    if (lane == 0)
      lse[(bi * g.h + hi) * g.s + i] = m[r] + logf(l[r]);
  }
}

// --- backward ----------------------------------------------------------------

// The stashed D_i and the lse of rows [i0, i0 + kTile) of head (bi, hi);
// 0 past the sequence.
__device__ void loadRowStats(const Geometry &g, const float *lse,
                             const Bf16 *dq, int64_t bi, int64_t hi,
                             int64_t i0, float *rowLse, float *rowD) {
  for (int t = threadIdx.x; t < kTile; t += kThreads) {
    const int64_t i = i0 + t;
    const bool in = i < g.s;
    rowLse[t] = in ? lse[(bi * g.h + hi) * g.s + i] : 0.0f;
    rowD[t] = in ? getStat(dq + (bi * g.s + i) * g.qStride + hi * g.dh)
                 : 0.0f;
  }
}

// The weights query i and key j give the backward products: P f (for dV)
// and dS = P (dP f - D_i) (for dK and dQ), from the score q_i . k_j, dP =
// do_i . v_j before the dropout factor f, and the row's lse and D_i; both
// 0 where i does not see j.
struct PairWeights {
  float pf, ds;
};
__device__ __forceinline__ PairWeights
pairWeights(const Geometry &g, uint64_t key, int64_t bi, int64_t hi,
            int64_t i, int64_t j, float score, float dp, float lse,
            float delta) {
  if (!g.visible(bi, i, j))
    return {0.0f, 0.0f};
  const float prob = expf(score * g.scale - lse);
  const float f = dropFactor(g, key, g.dropRow(bi, hi, i) + j);
  return {prob * f, prob * (dp * f - delta)};
}

template <int D> constexpr size_t keyGradBytes() {
  return 4 * size_t{kTile} * (D + kPadH) * 2 + 2 * size_t{kTile} * ldS * 4 +
         4 * size_t{kTile} * ldP * 2 + 2 * size_t{kTile} * (D + kPadF) * 4 +
         2 * size_t{kTile} * 4;
}

// One block per (key tile, kv head, batch): dk and dv of the tile's keys.
template <int D>
__global__ void __launch_bounds__(kThreads)
    tiledKeyGrads(Geometry g, const StepValues *__restrict__ steps,
                  const Bf16 *__restrict__ dout,
                  const Bf16 *__restrict__ q, const Bf16 *__restrict__ k,
                  const Bf16 *__restrict__ v, const float *__restrict__ lse,
                  const Bf16 *__restrict__ dq, Bf16 *__restrict__ dk,
                  Bf16 *__restrict__ dv) {
  constexpr int ldH = D + kPadH, ldO = D + kPadF;
  extern __shared__ __align__(32) unsigned char smem[];
  Bf16 *ks = reinterpret_cast<Bf16 *>(smem);
  Bf16 *vs = ks + kTile * ldH;
  Bf16 *qs = vs + kTile * ldH;
  Bf16 *dos = qs + kTile * ldH;
  float *st = reinterpret_cast<float *>(dos + kTile * ldH); // S^T
  float *dpt = st + kTile * ldS;                            // dP^T
  Bf16 *pdt = reinterpret_cast<Bf16 *>(dpt + kTile * ldS);  // (P f)^T,
  Bf16 *pdtLo = pdt + kTile * ldP;                          // its parts
  Bf16 *dst = pdtLo + kTile * ldP;                          // dS^T, its
  Bf16 *dstLo = dst + kTile * ldP;                          // parts
  float *dkAcc = reinterpret_cast<float *>(dstLo + kTile * ldP);
  float *dvAcc = dkAcc + kTile * ldO;
  float *rowLse = dvAcc + kTile * ldO;
  float *rowD = rowLse + kTile;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int c0 = warp * 16; // this warp's keys within the tile
  const int64_t j0 = int64_t{blockIdx.x} * kTile, hk = blockIdx.y,
                bi = blockIdx.z;
  const int64_t keys = min(int64_t{kTile}, g.s - j0);
  const uint64_t key = maskKey(g, steps);
  const int64_t kvOff = (bi * g.s + j0) * g.kvStride + hk * D;
  loadTile<D>(ks, k + kvOff, g.kvStride, keys);
  loadTile<D>(vs, v + kvOff, g.kvStride, keys);
  for (int t = threadIdx.x; t < 2 * kTile * ldO; t += kThreads)
    dkAcc[t] = 0.0f; // dkAcc and dvAcc
  const int64_t iStart = g.firstRowSeeing(j0) / kTile * kTile;
  for (int64_t hi = hk * g.group; hi < (hk + 1) * g.group; ++hi) {
    for (int64_t i0 = iStart; i0 < g.s; i0 += kTile) {
      const int64_t rows = min(int64_t{kTile}, g.s - i0);
      __syncthreads(); // the previous tile's readers are done
      const int64_t qOff = (bi * g.s + i0) * g.qStride + hi * D;
      loadTile<D>(qs, q + qOff, g.qStride, rows);
      loadTile<D>(dos, dout + qOff, g.qStride, rows);
      loadRowStats(g, lse, dq, bi, hi, i0, rowLse, rowD);
      __syncthreads();
      rowsTimesRowsT<D>(ks + c0 * ldH, qs, st + c0 * ldS);
      rowsTimesRowsT<D>(vs + c0 * ldH, dos, dpt + c0 * ldS);
      __syncwarp();
#pragma unroll 4
      for (int r = 0; r < 16; ++r) {
        const int64_t j = j0 + c0 + r;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int ii = lane + 32 * t;
          const int64_t i = i0 + ii;
          const PairWeights w =
              pairWeights(g, key, bi, hi, i, j, st[(c0 + r) * ldS + ii],
                          dpt[(c0 + r) * ldS + ii], rowLse[ii], rowD[ii]);
          const int at = (c0 + r) * ldP + ii;
          splitWeight(w.pf, &pdt[at], &pdtLo[at]);
          splitWeight(w.ds, &dst[at], &dstLo[at]);
        }
      }
      __syncwarp();
      addWeightsTimesRows<D>(pdt + c0 * ldP, pdtLo + c0 * ldP, dos,
                             dvAcc + c0 * ldO);
      addWeightsTimesRows<D>(dst + c0 * ldP, dstLo + c0 * ldP, qs,
                             dkAcc + c0 * ldO);
    }
  }
  __syncwarp();
  for (int r = 0; r < 16; ++r) {
    if (c0 + r >= keys)
      break;
    const int64_t off = (bi * g.s + j0 + c0 + r) * g.kvStride + hk * D;
    for (int d = lane; d < D; d += 32) {
      dk[off + d] = roundToBf16(dkAcc[(c0 + r) * ldO + d] * g.scale);
      dv[off + d] = roundToBf16(dvAcc[(c0 + r) * ldO + d]);
    }
  }
}

template <int D> constexpr size_t queryGradBytes() {
  return 4 * size_t{kTile} * (D + kPadH) * 2 + 2 * size_t{kTile} * ldS * 4 +
         2 * size_t{kTile} * ldP * 2 + size_t{kTile} * (D + kPadF) * 4 +
         2 * size_t{kTile} * 4;
}

// One block per (query tile, head, batch): dq of the tile's rows, after
// reading their stashed D_i.
template <int D>
__global__ void __launch_bounds__(kThreads)
    tiledQueryGrads(Geometry g, const StepValues *__restrict__ steps,
                    const Bf16 *__restrict__ dout,
                    const Bf16 *__restrict__ q, const Bf16 *__restrict__ k,
                    const Bf16 *__restrict__ v, const float *__restrict__ lse,
                    Bf16 *__restrict__ dq) {
  constexpr int ldH = D + kPadH, ldO = D + kPadF;
  extern __shared__ __align__(32) unsigned char smem[];
  Bf16 *qs = reinterpret_cast<Bf16 *>(smem);
  Bf16 *dos = qs + kTile * ldH;
  Bf16 *ks = dos + kTile * ldH;
  Bf16 *vs = ks + kTile * ldH;
  float *ss = reinterpret_cast<float *>(vs + kTile * ldH);
  float *dps = ss + kTile * ldS;
  Bf16 *dss = reinterpret_cast<Bf16 *>(dps + kTile * ldS); // dS, its
  Bf16 *dssLo = dss + kTile * ldP;                          // parts
  float *dqAcc = reinterpret_cast<float *>(dssLo + kTile * ldP);
  float *rowLse = dqAcc + kTile * ldO;
  float *rowD = rowLse + kTile;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = warp * 16;
  const int64_t q0 = int64_t{blockIdx.x} * kTile, hi = blockIdx.y,
                bi = blockIdx.z, hk = hi / g.group;
  const int64_t rows = min(int64_t{kTile}, g.s - q0);
  const uint64_t key = maskKey(g, steps);
  const int64_t qOff = (bi * g.s + q0) * g.qStride + hi * D;
  loadTile<D>(qs, q + qOff, g.qStride, rows);
  loadTile<D>(dos, dout + qOff, g.qStride, rows);
  loadRowStats(g, lse, dq, bi, hi, q0, rowLse, rowD);
  for (int t = threadIdx.x; t < kTile * ldO; t += kThreads)
    dqAcc[t] = 0.0f;
  const Bf16 *kHead = k + bi * g.s * g.kvStride + hk * D;
  const Bf16 *vHead = v + bi * g.s * g.kvStride + hk * D;
  const int64_t keysEnd = g.rowEnd(q0 + rows - 1);
  for (int64_t j0 = 0; j0 < keysEnd; j0 += kTile) {
    const int64_t keys = min(int64_t{kTile}, g.s - j0);
    __syncthreads(); // the previous tile's readers are done
    loadTile<D>(ks, kHead + j0 * g.kvStride, g.kvStride, keys);
    loadTile<D>(vs, vHead + j0 * g.kvStride, g.kvStride, keys);
    __syncthreads();
    rowsTimesRowsT<D>(qs + r0 * ldH, ks, ss + r0 * ldS);
    rowsTimesRowsT<D>(dos + r0 * ldH, vs, dps + r0 * ldS);
    __syncwarp();
#pragma unroll 4
    for (int r = 0; r < 16; ++r) {
      const int64_t i = q0 + r0 + r;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int jj = lane + 32 * t;
        const PairWeights w = pairWeights(
            g, key, bi, hi, i, j0 + jj, ss[(r0 + r) * ldS + jj],
            dps[(r0 + r) * ldS + jj], rowLse[r0 + r], rowD[r0 + r]);
        splitWeight(w.ds, &dss[(r0 + r) * ldP + jj],
                    &dssLo[(r0 + r) * ldP + jj]);
      }
    }
    __syncwarp();
    addWeightsTimesRows<D>(dss + r0 * ldP, dssLo + r0 * ldP, ks,
                           dqAcc + r0 * ldO);
  }
  // Every warp has read rowD (the stash) before any dq row is written:
  // the rows' stashes live in the slices written below.
  __syncthreads();
  for (int r = 0; r < 16; ++r) {
    const int64_t i = q0 + r0 + r;
    if (i >= g.s)
      break;
    Bf16 *dqRow = dq + (bi * g.s + i) * g.qStride + hi * D;
    for (int d = lane; d < D; d += 32)
      dqRow[d] = roundToBf16(dqAcc[(r0 + r) * ldO + d] * g.scale);
  }
}

// --- host side ---------------------------------------------------------------

// A kernel may use more than the default 48 KiB of shared memory once it
// asks: at every launch, since the setting belongs to the current device's
// context (host work only, allowed while a stream is captured). Should it
// fail, the launch fails visibly.
template <typename Kernel> void allowSharedBytes(Kernel kernel, size_t bytes) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(bytes));
}

unsigned tilesOf(int64_t n) {
  return static_cast<unsigned>((n + kTile - 1) / kTile);
}

template <int D>
void forwardFor(const Launch &l, const Bf16 *q, const Bf16 *k, const Bf16 *v,
                Bf16 *o, float *lse) {
  allowSharedBytes(tiledForward<D>, forwardBytes<D>());
  const dim3 grid(tilesOf(l.g.s), static_cast<unsigned>(l.g.h),
                  static_cast<unsigned>(l.g.b));
  tiledForward<D><<<grid, kThreads, forwardBytes<D>(), l.stream>>>(
      l.g, l.steps, q, k, v, o, lse);
}

template <int D>
void backwardFor(const Launch &l, const Bf16 *dout, const Bf16 *q,
                 const Bf16 *k, const Bf16 *v, const float *lse, Bf16 *dq,
                 Bf16 *dk, Bf16 *dv) {
  allowSharedBytes(tiledKeyGrads<D>, keyGradBytes<D>());
  allowSharedBytes(tiledQueryGrads<D>, queryGradBytes<D>());
  const dim3 keyGrid(tilesOf(l.g.s), static_cast<unsigned>(l.g.hkv),
                     static_cast<unsigned>(l.g.b));
  tiledKeyGrads<D><<<keyGrid, kThreads, keyGradBytes<D>(), l.stream>>>(
      l.g, l.steps, dout, q, k, v, lse, dq, dk, dv);
  const dim3 queryGrid(tilesOf(l.g.s), static_cast<unsigned>(l.g.h),
                       static_cast<unsigned>(l.g.b));
  tiledQueryGrads<D><<<queryGrid, kThreads, queryGradBytes<D>(), l.stream>>>(
      l.g, l.steps, dout, q, k, v, lse, dq);
}

} // namespace

bool applies(int64_t dh, bool bf16) {
  if (!bf16 || (dh != 64 && dh != 128))
    return false;
  // The dk/dv kernel's shared memory must fit the device (sm_90: 227 KiB;
  // smaller on other GPUs, which then take the CUDA-core kernels).
  int device = 0, optIn = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optIn, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess)
    return false;
  const size_t needed = dh == 64 ? keyGradBytes<64>() : keyGradBytes<128>();
  return needed <= static_cast<size_t>(optIn);
}

void forward(const Launch &l, const Bf16 *q, const Bf16 *k, const Bf16 *v,
             Bf16 *o, float *lse) {
  if (l.g.dh == 64)
    forwardFor<64>(l, q, k, v, o, lse);
  else
    forwardFor<128>(l, q, k, v, o, lse);
}

void backward(const Launch &l, const Bf16 *dout, const Bf16 *q,
              const Bf16 *k, const Bf16 *v, const float *lse, Bf16 *dq,
              Bf16 *dk, Bf16 *dv) {
  if (l.g.dh == 64)
    backwardFor<64>(l, dout, q, k, v, lse, dq, dk, dv);
  else
    backwardFor<128>(l, dout, q, k, v, lse, dq, dk, dv);
}

} // namespace braid::cuda::flash_tiles
