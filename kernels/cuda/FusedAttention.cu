// flash_attention and flash_attention_grad_input on CUDA (docs/fusion.md,
// "Attention"): attention without the [B, H, S, S] probabilities. Forward
// keeps, per query row, a running maximum m, a running sum l of
// exp(x - m) and an unnormalised output, rescaled by exp(m_old - m_new)
// whenever a chunk of keys raises the maximum (online softmax), and saves
// lse = m + log(l). Backward recomputes P = exp(x - lse).
//
// Layout of the work as in Attention.cu (one block per row of the [S, S]
// matrix, warps over keys for the dot products, threads over head-dimension
// columns for the weighted sums, chunks of kChunk coefficients in shared
// memory), with no float atomics: every sum has one writer and a fixed
// order, so results are the same on every run.
//
// Masks: key j is visible from query i iff (!causal || j <= i || j < prefix)
// and, with segment ids, seg[b, i] == seg[b, j]. Dropout draws are those of
// the reference: element ((b * H + h) * S + i) * S + j of dropoutKey(seed,
// rng_offset, step, micro_batch), the step values read from device memory;
// with head_shard, H and h count the whole tensor's heads.
//
// Backward runs three kernels:
//   A (one warp per query row): D_i = do_i . o_i, which equals
//     rowsum(dP * P), kept in the first 4 bytes of dq's slice for the row
//     and head (dq is written last); recomputed where the slice is
//     narrower (bf16 with Dh = 1).
//   B (one block per key row (b, hk, j)): dk_j and dv_j summed over the
//     group's query heads in order, then query rows in order.
//   C (one block per query row): dq_i = scale * sum_j dS_ij k_j.
//
// With bf16 storage and head dimension 64 or 128 the tensor-core kernels of
// FlashAttentionTiles.cu run instead of the forward and of kernels B and C
// (kernel A still stashes D_i for them); these kernels take every other
// launch.
//
// Workspace: none.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/common/Random.h"
#include "kernels/cuda/AttentionCommon.cuh"
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/FlashAttentionTiles.h"
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
constexpr int64_t kChunk = 1024;

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

// One block per query row (b, h, i); chunks of keys in order. Each chunk:
// scores into shared memory (masked ones -inf), the chunk's maximum, the
// new running maximum, exp(x - m), the running sum, and the output
// columns rescaled and extended by the chunk's weighted value rows.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    flashForward(const T *__restrict__ q, const T *__restrict__ k,
                 const T *__restrict__ v, T *__restrict__ o,
                 float *__restrict__ lse, Geometry g,
                 const StepValues *__restrict__ steps) {
  __shared__ float buf[kChunk];
  __shared__ float red[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t key = maskKey(g, steps);
  const int64_t numRows = g.b * g.h * g.s;
  for (int64_t u = blockIdx.x; u < numRows; u += gridDim.x) {
    const int64_t i = u % g.s, hi = (u / g.s) % g.h, bi = u / (g.s * g.h);
    const int64_t n = g.rowEnd(i);
    const T *qRow = q + (bi * g.s + i) * g.qStride + hi * g.dh;
    const int64_t kvOff = bi * g.s * g.kvStride + (hi / g.group) * g.dh;
    const T *kHead = k + kvOff, *vHead = v + kvOff;
    const int64_t drop = g.dropRow(bi, hi, i);
    T *oRow = o + (bi * g.s + i) * g.qStride + hi * g.dh;
    // Each head-dimension tile walks the keys again; the statistics of the
    // first walk are the ones saved (later walks compute the same values).
    float m = -INFINITY, l = 0.0f;
    for (int64_t dt0 = 0; dt0 < g.dh; dt0 += kDTile) {
      float out[kColsPerThread] = {};
      m = -INFINITY;
      l = 0.0f;
      for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
        const int64_t j1 = min(n, j0 + kChunk);
        for (int64_t j = j0 + warp; j < j1; j += kWarps) {
          const float dot = warpDot(qRow, kHead + j * g.kvStride, g.dh);
          if (lane == 0)
            buf[j - j0] = g.visible(bi, i, j) ? dot * g.scale : -INFINITY;
        }
        __syncthreads();
        float cm = -INFINITY;
        for (int64_t j = j0 + threadIdx.x; j < j1; j += kBlock)
          cm = fmaxf(cm, buf[j - j0]);
        cm = blockMax(cm, red);
        if (cm == -INFINITY) // nothing visible in this chunk
          continue;
        const float mNew = fmaxf(m, cm);
        const float alpha = expf(m - mNew); // 0 on the first visible chunk
        float part = 0.0f;
        for (int64_t j = j0 + threadIdx.x; j < j1; j += kBlock) {
          const float e = expf(buf[j - j0] - mNew);
          part += e;
          buf[j - j0] = e * dropFactor(g, key, drop + j);
        }
        l = l * alpha + blockSum(part, red);
        m = mNew;
        addWeightedRows(out, alpha, buf, vHead, g.kvStride, j0, j1, dt0,
                        g.dh);
        __syncthreads();
      }
      const float inv = 1.0f / l;
      storeColumns(oRow, out, inv, dt0, g.dh);
    }
    if (threadIdx.x == 0)
      lse[(bi * g.h + hi) * g.s + i] = m + logf(l);
  }
}

// --- backward ----------------------------------------------------------------

// Kernel A: D_i = do_i . o_i, one warp per query row, stashed in dq.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    flashRowDeltas(const T *__restrict__ dout, const T *__restrict__ o,
                   T *__restrict__ dq, Geometry g) {
  const int64_t numRows = g.b * g.h * g.s;
  const int lane = threadIdx.x & 31;
  for (int64_t u = blockIdx.x * int64_t{kWarps} + (threadIdx.x >> 5);
       u < numRows; u += int64_t{gridDim.x} * kWarps) {
    const int64_t i = u % g.s, hi = (u / g.s) % g.h, bi = u / (g.s * g.h);
    const int64_t off = (bi * g.s + i) * g.qStride + hi * g.dh;
    const float dlt = warpDot(dout + off, o + off, g.dh);
    if (lane == 0)
      putStat(dq + off, dlt);
  }
}

template <typename T>
__device__ __forceinline__ float rowDelta(const T *dout, const T *o,
                                          const T *dq, int64_t off,
                                          const Geometry &g, bool stashed) {
  return stashed ? getStat(dq + off) : warpDot(dout + off, o + off, g.dh);
}

// Kernel B: dk_j and dv_j of kv head (bi, hk), over the group's query heads
// in order and their rows in order:
//   P_ij = exp(scale q_i . k_j - lse_i), dP_ij = (do_i . v_j) f_ij,
//   dS_ij = P_ij (dP_ij - D_i), dv_j = sum P_ij f_ij do_i,
//   dk_j = sum scale dS_ij q_i.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    flashKeyGrads(const T *__restrict__ dout, const T *__restrict__ q,
                  const T *__restrict__ k, const T *__restrict__ v,
                  const T *__restrict__ o, const float *__restrict__ lse,
                  const T *__restrict__ dq, T *__restrict__ dk,
                  T *__restrict__ dv, Geometry g, bool stashed,
                  const StepValues *__restrict__ steps) {
  __shared__ float coefK[kChunk];
  __shared__ float coefV[kChunk];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t key = maskKey(g, steps);
  const int64_t numRows = g.b * g.hkv * g.s;
  for (int64_t u = blockIdx.x; u < numRows; u += gridDim.x) {
    const int64_t j = u % g.s, hk = (u / g.s) % g.hkv, bi = u / (g.s * g.hkv);
    const int64_t kvOff = (bi * g.s + j) * g.kvStride + hk * g.dh;
    const T *kRow = k + kvOff, *vRow = v + kvOff;
    const int64_t iStart = g.firstRowSeeing(j);
    for (int64_t dt0 = 0; dt0 < g.dh; dt0 += kDTile) {
      float accK[kColsPerThread] = {}, accV[kColsPerThread] = {};
      for (int64_t hi = hk * g.group; hi < (hk + 1) * g.group; ++hi) {
        for (int64_t i0 = iStart; i0 < g.s; i0 += kChunk) {
          const int64_t i1 = min(g.s, i0 + kChunk);
          for (int64_t i = i0 + warp; i < i1; i += kWarps) {
            const int64_t qOff = (bi * g.s + i) * g.qStride + hi * g.dh;
            float ck = 0.0f, cv = 0.0f;
            if (g.visible(bi, i, j)) {
              const float x = warpDot(q + qOff, kRow, g.dh) * g.scale;
              const float p = expf(x - lse[(bi * g.h + hi) * g.s + i]);
              const float f = dropFactor(g, key, g.dropRow(bi, hi, i) + j);
              const float dP = warpDot(dout + qOff, vRow, g.dh) * f;
              const float dlt = rowDelta(dout, o, dq, qOff, g, stashed);
              ck = g.scale * (p * (dP - dlt));
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
// stashed D_i from its own slice before overwriting it.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    flashQueryGrads(const T *__restrict__ dout, const T *__restrict__ q,
                    const T *__restrict__ k, const T *__restrict__ v,
                    const T *__restrict__ o, const float *__restrict__ lse,
                    T *__restrict__ dq, Geometry g, bool stashed,
                    const StepValues *__restrict__ steps) {
  __shared__ float buf[kChunk];
  __shared__ float delta;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t key = maskKey(g, steps);
  const int64_t numRows = g.b * g.h * g.s;
  for (int64_t u = blockIdx.x; u < numRows; u += gridDim.x) {
    const int64_t i = u % g.s, hi = (u / g.s) % g.h, bi = u / (g.s * g.h);
    const int64_t n = g.rowEnd(i);
    const int64_t qOff = (bi * g.s + i) * g.qStride + hi * g.dh;
    const int64_t kvOff = bi * g.s * g.kvStride + (hi / g.group) * g.dh;
    const T *kHead = k + kvOff, *vHead = v + kvOff;
    const int64_t drop = g.dropRow(bi, hi, i);
    const float rowLse = lse[(bi * g.h + hi) * g.s + i];
    if (warp == 0) {
      const float dlt = rowDelta(dout, o, dq, qOff, g, stashed);
      if (lane == 0)
        delta = dlt;
    }
    __syncthreads();
    const float dlt = delta;
    for (int64_t dt0 = 0; dt0 < g.dh; dt0 += kDTile) {
      float acc[kColsPerThread] = {};
      for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
        const int64_t j1 = min(n, j0 + kChunk);
        for (int64_t j = j0 + warp; j < j1; j += kWarps) {
          float dS = 0.0f;
          if (g.visible(bi, i, j)) {
            const float x =
                warpDot(q + qOff, kHead + j * g.kvStride, g.dh) * g.scale;
            const float p = expf(x - rowLse);
            const float dP =
                warpDot(dout + qOff, vHead + j * g.kvStride, g.dh) *
                dropFactor(g, key, drop + j);
            dS = p * (dP - dlt);
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
    // delta is read again by the next row of this block.
    __syncthreads();
  }
}

// --- host side ---------------------------------------------------------------

// The tensor-core kernels' view of a launch (FlashAttentionTiles.h).
flash_tiles::Launch tileLaunch(const Geometry &g, const KernelArgs &args) {
  return {g, rows::stepValuesOf(args), rows::streamOf(args)};
}

// Whether the tensor-core kernels take this launch: bf16 storage, a head
// dimension they are built for, and operands on 16-byte boundaries (they
// move 8 values at a time).
template <typename T>
bool tilesTake(const Geometry &g, std::initializer_list<const void *> ptrs) {
  if (!flash_tiles::applies(g.dh, std::is_same_v<T, Bf16>) ||
      g.h > 65535 || g.b > 65535) // grid dimensions y and z
    return false;
  for (const void *ptr : ptrs)
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      return false;
  return true;
}

template <typename T> void runFlashAttention(const KernelArgs &args) {
  const Geometry g = geometryOf(args, *args.ins[0].desc, 3);
  const int64_t numRows = g.b * g.h * g.s;
  if (numRows == 0 || g.dh == 0)
    return;
  if constexpr (std::is_same_v<T, Bf16>) {
    if (tilesTake<T>(g, {args.ins[0].data, args.ins[1].data,
                         args.ins[2].data, args.outs[0].data})) {
      flash_tiles::forward(tileLaunch(g, args), args.ins[0].bf16(),
                           args.ins[1].bf16(), args.ins[2].bf16(),
                           args.outs[0].bf16(), args.outs[1].f32());
      return;
    }
  }
  flashForward<T>
      <<<rows::gridFor(numRows, 1), kBlock, 0, rows::streamOf(args)>>>(
          rows::dataOf<T>(args.ins[0]), rows::dataOf<T>(args.ins[1]),
          rows::dataOf<T>(args.ins[2]), rows::dataOf<T>(args.outs[0]),
          args.outs[1].f32(), g, rows::stepValuesOf(args));
}

template <typename T> void runFlashAttentionGradInput(const KernelArgs &args) {
  const Geometry g = geometryOf(args, *args.ins[1].desc, 6);
  const int64_t queryRows = g.b * g.h * g.s, keyRows = g.b * g.hkv * g.s;
  if (queryRows == 0 || g.dh == 0)
    return;
  cudaStream_t stream = rows::streamOf(args);
  const StepValues *steps = rows::stepValuesOf(args);
  const T *dout = rows::dataOf<T>(args.ins[0]),
          *q = rows::dataOf<T>(args.ins[1]), *k = rows::dataOf<T>(args.ins[2]),
          *v = rows::dataOf<T>(args.ins[3]), *o = rows::dataOf<T>(args.ins[4]);
  const float *lse = args.ins[5].f32();
  T *dq = rows::dataOf<T>(args.outs[0]), *dk = rows::dataOf<T>(args.outs[1]),
    *dv = rows::dataOf<T>(args.outs[2]);
  const bool stashed = g.dh * static_cast<int64_t>(sizeof(T)) >= 4;
  if (stashed)
    flashRowDeltas<T><<<rows::gridFor(queryRows, kWarps), kBlock, 0, stream>>>(
        dout, o, dq, g);
  if constexpr (std::is_same_v<T, Bf16>) {
    if (tilesTake<T>(g, {dout, q, k, v, dq, dk, dv})) {
      flash_tiles::backward(tileLaunch(g, args), dout, q, k, v, lse, dq, dk,
                            dv);
      return;
    }
  }
  flashKeyGrads<T><<<rows::gridFor(keyRows, 1), kBlock, 0, stream>>>(
      dout, q, k, v, o, lse, dq, dk, dv, g, stashed, steps);
  flashQueryGrads<T><<<rows::gridFor(queryRows, 1), kBlock, 0, stream>>>(
      dout, q, k, v, o, lse, dq, g, stashed, steps);
}

} // namespace

absl::Status registerFusedAttentionKernels(KernelRegistry &registry) {
  return rows::registerEntries(
      registry,
      {
          {"flash_attention",
           byStorage<runFlashAttention<float>, runFlashAttention<Bf16>>},
          {"flash_attention_grad_input",
           byStorage<runFlashAttentionGradInput<float>,
                     runFlashAttentionGradInput<Bf16>>},
      });
}

} // namespace braid::cuda
