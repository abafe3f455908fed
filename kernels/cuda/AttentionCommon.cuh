// What the reference attention (Attention.cu) and flash attention
// (FusedAttention.cu, FlashAttentionTiles.cu) share: a launch's geometry
// and masks, the dropout draws, a warp dot product over a head, and the row
// statistic stashed in dq's slice during backward.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/common/Random.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda::attention {

using rows::Bf16;
using rows::load;
using rows::warpSum;

// The sizes, masks and dropout of one launch: q [B, S, H*Dh], k and v
// [B, S, Hkv*Dh]. Key j is visible from query i iff
// (!causal || j <= i || j < prefix) and, with segment ids,
// seg[b, i] == seg[b, j].
struct Geometry {
  int64_t b, s, h, hkv, dh, group;
  int64_t qStride, kvStride; // elements between consecutive positions
  int32_t causal;
  int64_t prefix; // in [0, s]; 0 without causal
  float scale;
  // Dropout: kept iff the draw's 24 bits are >= threshold; kept values are
  // multiplied by dropScale.
  int32_t dropout;
  uint64_t threshold;
  float dropScale;
  int64_t rngOffset;
  int64_t microBatch; // the launch's micro-batch: part of the mask key
  // The heads of the whole tensor and the first of them this launch holds:
  // h and 0 unless `head_shard` makes q/k/v one TP rank's slice of the
  // heads. The draws are keyed by the whole tensor's element index.
  int64_t dropHeads, dropHead0;
  const int32_t *seg; // segment ids [B, S], or null

  // Keys [0, rowEnd(i)) may be visible from query i (segments aside).
  __device__ int64_t rowEnd(int64_t i) const {
    return causal ? max(i + 1, prefix) : s;
  }
  // The first query row that may see key j (segments aside).
  __device__ int64_t firstRowSeeing(int64_t j) const {
    return !causal || j < prefix ? 0 : j;
  }
  // Whether query i and key j lie in one segment.
  __device__ bool sameSegment(int64_t bi, int64_t i, int64_t j) const {
    return !seg || seg[bi * s + i] == seg[bi * s + j];
  }
  // Whether query i sees key j; rows and keys past the sequence (a last
  // tile's padding) see and are seen by nothing.
  __device__ bool visible(int64_t bi, int64_t i, int64_t j) const {
    return i < s && j < rowEnd(i) && sameSegment(bi, i, j);
  }
  // Element index of probs[bi, hi, i, 0] in this launch's tensor.
  __device__ int64_t probsRow(int64_t bi, int64_t hi, int64_t i) const {
    return ((bi * h + hi) * s + i) * s;
  }
  // Element index of the dropout draw of probs[bi, hi, i, 0]: that of the
  // probability in the whole (unsharded) tensor; probsRow without
  // head_shard.
  __device__ int64_t dropRow(int64_t bi, int64_t hi, int64_t i) const {
    return ((bi * dropHeads + dropHead0 + hi) * s + i) * s;
  }
};

// The geometry of a launch with queries `q`; `segInput` is the index the
// optional segment ids have among the inputs.
inline Geometry geometryOf(const KernelArgs &args, const TensorDesc &q,
                           int segInput) {
  const KernelParams &p = rows::paramsOf(args);
  Geometry g{};
  g.b = q.shape[0];
  g.s = q.shape[1];
  g.h = p.intOr("num_heads", 1);
  g.hkv = p.intOr("num_kv_heads", 1);
  g.dh = g.h > 0 ? q.shape[2] / g.h : 0;
  g.group = g.hkv > 0 ? g.h / g.hkv : 1;
  g.qStride = g.h * g.dh;
  g.kvStride = g.hkv * g.dh;
  g.causal = p.intOr("causal", 0) != 0;
  g.prefix =
      g.causal ? std::clamp<int64_t>(p.intOr("prefix", 0), 0, g.s) : 0;
  g.scale = static_cast<float>(p.floatOr("scale", 1.0));
  const double drop = p.floatOr("dropout", 0.0);
  g.dropout = drop > 0;
  g.threshold = static_cast<uint64_t>(std::ceil(drop * 16777216.0));
  g.dropScale = 1.0f / (1.0f - static_cast<float>(drop));
  g.rngOffset = p.intOr("rng_offset", 0);
  g.microBatch = args.microBatch;
  // The TP coordinate is the same on every run of a rank's program, so it
  // may be a launch argument even in a captured graph.
  g.dropHeads = g.h;
  g.dropHead0 = 0;
  if (p.intOr("head_shard", 0) != 0 && args.ctx != nullptr) {
    g.dropHeads = g.h * args.ctx->tpSize;
    g.dropHead0 = g.h * args.ctx->tpRank;
  }
  g.seg = static_cast<int>(args.ins.size()) > segInput
              ? args.ins[segInput].i32()
              : nullptr;
  return g;
}

// The key of this run's dropout draws. G: a launch geometry with rngOffset.
template <typename G>
__device__ __forceinline__ uint64_t maskKey(const G &g,
                                            const StepValues *steps) {
  return steps ? rng::dropoutKey(steps->seed, g.rngOffset, steps->step,
                                 g.microBatch)
               : rng::dropoutKey(0, g.rngOffset, 1, 0);
}

// The factor element n of the probabilities is multiplied by: kept iff the
// draw's 24 bits are >= g.threshold, kept values scaled by g.dropScale.
template <typename G>
__device__ __forceinline__ float dropFactor(const G &g, uint64_t key,
                                            int64_t n) {
  if (!g.dropout)
    return 1.0f;
  return (rng::draw(key, static_cast<uint64_t>(n)) >> 40) >= g.threshold
             ? g.dropScale
             : 0.0f;
}

// a . b over dh values, lanes over d; every lane gets the result.
template <typename T>
__device__ __forceinline__ float warpDot(const T *__restrict__ a,
                                         const T *__restrict__ b, int64_t dh) {
  const int lane = threadIdx.x & 31;
  float acc = 0.0f;
  for (int64_t d = lane; d < dh; d += 32)
    acc += load(a, d) * load(b, d);
  return warpSum(acc);
}

// Head-dimension columns a thread accumulates in the row kernels: those
// of a tile of kDTile columns from dt0 are dt0 + threadIdx.x + c * kBlock,
// c < kColsPerThread; wider heads take several tiles.
constexpr int kColsPerThread = 4;
constexpr int64_t kDTile = int64_t{rows::kBlock} * kColsPerThread;

// acc[c] = acc[c] * rescale + the sum over rows r of [r0, r1), in order, of
// coef[r - r0] * x[r * stride + d], for this thread's columns d < dh of
// the tile at dt0.
template <typename T>
__device__ __forceinline__ void
addWeightedRows(float (&acc)[kColsPerThread], float rescale,
                const float *coef, const T *__restrict__ x, int64_t stride,
                int64_t r0, int64_t r1, int64_t dt0, int64_t dh) {
  for (int c = 0; c < kColsPerThread; ++c) {
    const int64_t d = dt0 + threadIdx.x + int64_t{c} * rows::kBlock;
    if (d < dh) {
      float a = acc[c] * rescale;
      for (int64_t r = r0; r < r1; ++r)
        a += coef[r - r0] * load(x, r * stride + d);
      acc[c] = a;
    }
  }
}

// out[d] = acc[c] * factor for this thread's columns d < dh of the tile at
// dt0.
template <typename T>
__device__ __forceinline__ void storeColumns(T *out,
                                             const float (&acc)[kColsPerThread],
                                             float factor, int64_t dt0,
                                             int64_t dh) {
  for (int c = 0; c < kColsPerThread; ++c) {
    const int64_t d = dt0 + threadIdx.x + int64_t{c} * rows::kBlock;
    if (d < dh)
      rows::store(out, d, acc[c] * factor);
  }
}

// Row statistics stashed in dq's slice before dq is written: the f32 bits
// in the first element (f32) or the first two elements (bf16).
__device__ __forceinline__ void putStat(float *slot, float v) { slot[0] = v; }
__device__ __forceinline__ void putStat(Bf16 *slot, float v) {
  const uint32_t u = __float_as_uint(v);
  slot[0] = static_cast<Bf16>(u & 0xffffu);
  slot[1] = static_cast<Bf16>(u >> 16);
}
__device__ __forceinline__ float getStat(const float *slot) { return slot[0]; }
__device__ __forceinline__ float getStat(const Bf16 *slot) {
  return __uint_as_float(static_cast<uint32_t>(slot[0]) |
                         (static_cast<uint32_t>(slot[1]) << 16));
}

} // namespace braid::cuda::attention
