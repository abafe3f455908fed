// attention and attention_grad_input on CUDA: the reference (unfused)
// path, softmax(scale q k^T) v per head with grouped-query heads read in
// place, optional masks and optional dropout on the probabilities
// (docs/kernels.md). Flash attention replaces it for speed; this path is
// written for clarity and exact agreement with the CPU's definition.
//
// Masks, as in flash attention: key j is visible from query i iff
// (!causal || j <= i || j < prefix) and, with segment ids (the last input),
// seg[b, i] == seg[b, j]. Only keys [0, rowEnd(i)) of a row are walked, and
// only query rows from firstRowSeeing(j) on for a key; within those, a key
// of another segment gets score -inf (probability exactly 0) in the
// forward and coefficient 0 in the backward, whatever `probs` holds there.
//
// Every kernel works on one row of the [S, S] attention matrix at a time
// (one block per row, grid-stride over rows) in two phases per chunk of up
// to kChunk keys: warps compute the row's coefficients (dot products of
// head vectors, one warp per key, reduced by a fixed butterfly) into shared
// memory, then each thread owns head-dimension columns and adds the
// chunk's weighted rows in key order. No float atomics: every sum has one
// writer and a fixed order, so results are the same on every run.
//
// Forward, per (b, h, i): scores, max, sum of exp, probabilities (stored in
// `probs`, zero at every invisible key, before dropout), dropout, o_i.
// When a row has more than kChunk keys its scores are computed again in
// each pass instead of being kept.
//
// Backward runs three kernels:
//   A (one warp per query row): rowsum_i = sum_j dP_ij P_ij, with
//     dP = dropout_backward(do_i . v_j). It is kept in the first 4 bytes of
//     dq's slice for that row and head (dq is written last), so no
//     workspace is needed. Where that slice is narrower than 4 bytes (bf16
//     with Dh = 1) the other kernels recompute it instead.
//   B (one block per key row (b, hk, j)): dk_j and dv_j summed over the
//     group's query heads in head order, then query rows in order.
//   C (one block per query row): dq_i = scale * sum_j dS_ij k_j.
// Dropout masks come from rng::dropoutKey with the step values read from
// device memory (GpuContext::stepValues), as in the CPU kernel.
//
// Workspace: none.
#include <algorithm>
#include <cmath>

#include "kernels/common/Random.h"
#include "kernels/cuda/AttentionCommon.cuh"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::Bf16;
using rows::blockMax;
using rows::blockSum;
using rows::kBlock;
using rows::kWarps;
using rows::load;
using rows::store;
using rows::warpSum;

// Keys (or query rows) whose coefficients sit in shared memory at once.
constexpr int64_t kChunk = 2048;

using attention::Geometry;
using attention::geometryOf;
using attention::addWeightedRows;
using attention::dropFactor;
using attention::kColsPerThread;
using attention::kDTile;
using attention::storeColumns;
using attention::getStat;
using attention::maskKey;
using attention::putStat;
using attention::warpDot;

// --- forward -----------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(kBlock)
    attentionForward(const T *__restrict__ q, const T *__restrict__ k,
                     const T *__restrict__ v, T *__restrict__ o,
                     T *__restrict__ probs, Geometry g,
                     const StepValues *__restrict__ steps) {
  __shared__ float buf[kChunk];
  __shared__ float red[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t key = maskKey(g, steps);
  const int64_t numRows = g.b * g.h * g.s;
  for (int64_t u = blockIdx.x; u < numRows; u += gridDim.x) {
    const int64_t i = u % g.s, hi = (u / g.s) % g.h, bi = u / (g.s * g.h);
    const int64_t n = g.rowEnd(i);
    const bool resident = n <= kChunk;
    const T *qRow = q + (bi * g.s + i) * g.qStride + hi * g.dh;
    const int64_t kvOff = bi * g.s * g.kvStride + (hi / g.group) * g.dh;
    const T *kHead = k + kvOff, *vHead = v + kvOff;
    const int64_t base = g.probsRow(bi, hi, i);
    const int64_t drop = g.dropRow(bi, hi, i);
    T *probsRow = probs + base;
    T *oRow = o + (bi * g.s + i) * g.qStride + hi * g.dh;

    // buf[j - j0] = scale * (q_i . k_j) for j in [j0, j1), -inf for a key
    // of another segment. The diagonal is visible, so the maximum is finite
    // and masked keys get exp(-inf) = 0.
    auto scores = [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0 + warp; j < j1; j += kWarps) {
        float x = -INFINITY;
        if (g.sameSegment(bi, i, j)) // the same for the whole warp
          x = warpDot(qRow, kHead + j * g.kvStride, g.dh) * g.scale;
        if (lane == 0)
          buf[j - j0] = x;
      }
      __syncthreads();
    };

    // The maximum score.
    float m = -INFINITY;
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t j1 = min(n, j0 + kChunk);
      scores(j0, j1);
      for (int64_t j = j0 + threadIdx.x; j < j1; j += kBlock)
        m = fmaxf(m, buf[j - j0]);
      if (!resident)
        __syncthreads();
    }
    m = blockMax(m, red);
    // The sum of exp(score - max); a resident row keeps the exponentials.
    float acc = 0.0f;
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t j1 = min(n, j0 + kChunk);
      if (!resident)
        scores(j0, j1);
      for (int64_t j = j0 + threadIdx.x; j < j1; j += kBlock) {
        const float e = expf(buf[j - j0] - m);
        if (resident)
          buf[j - j0] = e;
        acc += e;
      }
      if (!resident)
        __syncthreads();
    }
    const float inv = 1.0f / blockSum(acc, red);

    // Probabilities, dropout, and o_i = sum_j Pd_ij v_j in key order.
    for (int64_t dt0 = 0; dt0 < g.dh; dt0 += kDTile) {
      float out[kColsPerThread] = {};
      for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
        const int64_t j1 = min(n, j0 + kChunk);
        if (!resident || dt0 == 0) {
          if (!resident)
            scores(j0, j1);
          for (int64_t j = j0 + threadIdx.x; j < j1; j += kBlock) {
            const float e = resident ? buf[j - j0] : expf(buf[j - j0] - m);
            const float p = e * inv;
            if (dt0 == 0)
              store(probsRow, j, p);
            buf[j - j0] = p * dropFactor(g, key, drop + j);
          }
          __syncthreads();
        }
        addWeightedRows(out, 1.0f, buf, vHead, g.kvStride, j0, j1, dt0,
                        g.dh);
        __syncthreads();
      }
      storeColumns(oRow, out, 1.0f, dt0, g.dh);
    }
    // Keys beyond the row's range have probability 0.
    for (int64_t j = n + threadIdx.x; j < g.s; j += kBlock)
      store(probsRow, j, 0.0f);
  }
}

// --- backward ----------------------------------------------------------------

// rowsum_i = sum_j dP_ij P_ij for query row i of head (bi, hi), computed by
// one warp over visible keys in order; every lane gets the result.
template <typename T>
__device__ float rowSumWarp(const T *__restrict__ dout,
                            const T *__restrict__ v,
                            const T *__restrict__ probs, const Geometry &g,
                            uint64_t key, int64_t bi, int64_t hi, int64_t i) {
  const int64_t n = g.rowEnd(i);
  const T *doRow = dout + (bi * g.s + i) * g.qStride + hi * g.dh;
  const T *vHead = v + bi * g.s * g.kvStride + (hi / g.group) * g.dh;
  const int64_t base = g.probsRow(bi, hi, i), drop = g.dropRow(bi, hi, i);
  float acc = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    if (!g.sameSegment(bi, i, j))
      continue;
    const float dP = warpDot(doRow, vHead + j * g.kvStride, g.dh) *
                     dropFactor(g, key, drop + j);
    acc += dP * load(probs, base + j);
  }
  return acc;
}

// Kernel A: one warp per query row; rowsum stashed in dq's slice.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    attentionRowSums(const T *__restrict__ dout, const T *__restrict__ v,
                     const T *__restrict__ probs, T *__restrict__ dq,
                     Geometry g, const StepValues *__restrict__ steps) {
  const uint64_t key = maskKey(g, steps);
  const int64_t numRows = g.b * g.h * g.s;
  const int lane = threadIdx.x & 31;
  for (int64_t u = blockIdx.x * int64_t{kWarps} + (threadIdx.x >> 5);
       u < numRows; u += int64_t{gridDim.x} * kWarps) {
    const int64_t i = u % g.s, hi = (u / g.s) % g.h, bi = u / (g.s * g.h);
    const float rs = rowSumWarp(dout, v, probs, g, key, bi, hi, i);
    if (lane == 0)
      putStat(dq + (bi * g.s + i) * g.qStride + hi * g.dh, rs);
  }
}

// Kernel B: dk_j and dv_j of kv head (bi, hk), summed over the group's
// query heads in order and over query rows i in order:
//   dv_j = sum Pd_ij do_i,  dk_j = sum scale * dS_ij q_i,
//   dS_ij = P_ij (dP_ij - rowsum_i).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    attentionKeyGrads(const T *__restrict__ dout, const T *__restrict__ q,
                      const T *__restrict__ v,
                      const T *__restrict__ probs, const T *__restrict__ dq,
                      T *__restrict__ dk, T *__restrict__ dv, Geometry g,
                      bool stashed, const StepValues *__restrict__ steps) {
  __shared__ float coefK[kChunk];
  __shared__ float coefV[kChunk];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t key = maskKey(g, steps);
  const int64_t numRows = g.b * g.hkv * g.s;
  for (int64_t u = blockIdx.x; u < numRows; u += gridDim.x) {
    const int64_t j = u % g.s, hk = (u / g.s) % g.hkv, bi = u / (g.s * g.hkv);
    const int64_t kvOff = (bi * g.s + j) * g.kvStride + hk * g.dh;
    const T *vRow = v + kvOff;
    const int64_t iStart = g.firstRowSeeing(j);
    for (int64_t dt0 = 0; dt0 < g.dh; dt0 += kDTile) {
      float accK[kColsPerThread] = {}, accV[kColsPerThread] = {};
      for (int64_t hi = hk * g.group; hi < (hk + 1) * g.group; ++hi) {
        for (int64_t i0 = iStart; i0 < g.s; i0 += kChunk) {
          const int64_t i1 = min(g.s, i0 + kChunk);
          for (int64_t i = i0 + warp; i < i1; i += kWarps) {
            // Query rows of another segment add nothing.
            float ck = 0.0f, cv = 0.0f;
            if (g.sameSegment(bi, i, j)) {
              const int64_t qOff = (bi * g.s + i) * g.qStride + hi * g.dh;
              const int64_t base = g.probsRow(bi, hi, i);
              const float f = dropFactor(g, key, g.dropRow(bi, hi, i) + j);
              const float dP = warpDot(dout + qOff, vRow, g.dh) * f;
              const float rs =
                  stashed ? getStat(dq + qOff)
                          : rowSumWarp(dout, v, probs, g, key, bi, hi, i);
              const float p = load(probs, base + j);
              ck = g.scale * (p * (dP - rs));
              cv = p * f;
            }
            if (lane == 0) {
              coefK[i - i0] = ck;
              coefV[i - i0] = cv;
            }
          }
          __syncthreads();
          const int64_t headOff = bi * g.s * g.qStride + hi * g.dh;
          addWeightedRows(accK, 1.0f, coefK, q + headOff, g.qStride, i0, i1,
                          dt0, g.dh);
          addWeightedRows(accV, 1.0f, coefV, dout + headOff, g.qStride, i0,
                          i1, dt0, g.dh);
          __syncthreads();
        }
      }
      storeColumns(dk + kvOff, accK, 1.0f, dt0, g.dh);
      storeColumns(dv + kvOff, accV, 1.0f, dt0, g.dh);
    }
  }
}

// Kernel C: dq_i = scale * sum_j dS_ij k_j over keys in order. Reads the
// stashed rowsum from its own slice before overwriting it.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    attentionQueryGrads(const T *__restrict__ dout, const T *__restrict__ k,
                        const T *__restrict__ v, const T *__restrict__ probs,
                        T *__restrict__ dq, Geometry g, bool stashed,
                        const StepValues *__restrict__ steps) {
  __shared__ float buf[kChunk];
  __shared__ float rowSum;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t key = maskKey(g, steps);
  const int64_t numRows = g.b * g.h * g.s;
  for (int64_t u = blockIdx.x; u < numRows; u += gridDim.x) {
    const int64_t i = u % g.s, hi = (u / g.s) % g.h, bi = u / (g.s * g.h);
    const int64_t n = g.rowEnd(i);
    const int64_t qOff = (bi * g.s + i) * g.qStride + hi * g.dh;
    const T *doRow = dout + qOff;
    const int64_t kvOff = bi * g.s * g.kvStride + (hi / g.group) * g.dh;
    const T *kHead = k + kvOff, *vHead = v + kvOff;
    const int64_t base = g.probsRow(bi, hi, i), drop = g.dropRow(bi, hi, i);
    if (stashed) {
      if (threadIdx.x == 0)
        rowSum = getStat(dq + qOff);
    } else if (warp == 0) {
      const float rs = rowSumWarp(dout, v, probs, g, key, bi, hi, i);
      if (lane == 0)
        rowSum = rs;
    }
    __syncthreads();
    const float rs = rowSum;
    for (int64_t dt0 = 0; dt0 < g.dh; dt0 += kDTile) {
      float acc[kColsPerThread] = {};
      for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
        const int64_t j1 = min(n, j0 + kChunk);
        for (int64_t j = j0 + warp; j < j1; j += kWarps) {
          // Keys of another segment add nothing.
          float dS = 0.0f;
          if (g.sameSegment(bi, i, j)) {
            const float dP = warpDot(doRow, vHead + j * g.kvStride, g.dh) *
                             dropFactor(g, key, drop + j);
            dS = load(probs, base + j) * (dP - rs);
          }
          if (lane == 0)
            buf[j - j0] = dS;
        }
        __syncthreads();
        addWeightedRows(acc, 1.0f, buf, kHead, g.kvStride, j0, j1, dt0,
                        g.dh);
        __syncthreads();
      }
      storeColumns(dq + qOff, acc, g.scale, dt0, g.dh);
    }
    // rowSum is read again by the next row of this block.
    __syncthreads();
  }
}

// --- host side ---------------------------------------------------------------

template <typename T> void runAttention(const KernelArgs &args) {
  const Geometry g = geometryOf(args, *args.ins[0].desc, 3);
  const int64_t numRows = g.b * g.h * g.s;
  if (numRows == 0 || g.dh == 0)
    return;
  attentionForward<T><<<rows::gridFor(numRows, 1), kBlock, 0,
                        rows::streamOf(args)>>>(
      rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
      rows::dataOf<T>(args.ins[2]), rows::dataOf<T>(args.outs[0]),
      rows::dataOf<T>(args.outs[1]), g, rows::stepValuesOf(args));
}

template <typename T> void runAttentionGradInput(const KernelArgs &args) {
  const Geometry g = geometryOf(args, *args.ins[1].desc, 5);
  const int64_t queryRows = g.b * g.h * g.s, keyRows = g.b * g.hkv * g.s;
  if (queryRows == 0 || g.dh == 0)
    return;
  cudaStream_t stream = rows::streamOf(args);
  const StepValues *steps = rows::stepValuesOf(args);
  const T *dout = rows::dataOf<T>(args.ins[0]), *q = rows::dataOf<T>(args.ins[1]),
          *k = rows::dataOf<T>(args.ins[2]), *v = rows::dataOf<T>(args.ins[3]),
          *probs = rows::dataOf<T>(args.ins[4]);
  T *dq = rows::dataOf<T>(args.outs[0]), *dk = rows::dataOf<T>(args.outs[1]),
    *dv = rows::dataOf<T>(args.outs[2]);
  // Room for an f32 in each (row, head) slice of dq.
  const bool stashed = g.dh * static_cast<int64_t>(sizeof(T)) >= 4;
  if (stashed)
    attentionRowSums<T><<<rows::gridFor(queryRows, kWarps), kBlock, 0,
                          stream>>>(dout, v, probs, dq, g, steps);
  attentionKeyGrads<T><<<rows::gridFor(keyRows, 1), kBlock, 0, stream>>>(
      dout, q, v, probs, dq, dk, dv, g, stashed, steps);
  attentionQueryGrads<T><<<rows::gridFor(queryRows, 1), kBlock, 0, stream>>>(
      dout, k, v, probs, dq, g, stashed, steps);
}

} // namespace

absl::Status registerAttentionKernels(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {
          {"attention", byStorage<runAttention<float>, runAttention<Bf16>>},
          {"attention_grad_input",
           byStorage<runAttentionGradInput<float>,
                     runAttentionGradInput<Bf16>>},
      });
}

} // namespace braid::cuda
