// Device helpers shared by the reference attention (Attention.cu) and flash
// attention (FusedAttention.cu): the dropout draws, a warp dot product over
// a head, and the row statistic stashed in dq's slice during backward.
#pragma once

#include <cstdint>

#include "kernels/common/Random.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda::attention {

using rows::Bf16;
using rows::load;
using rows::warpSum;

// The key of this run's dropout draws. G: a launch geometry with rngOffset.
template <typename G>
__device__ __forceinline__ uint64_t maskKey(const G &g,
                                            const StepValues *steps) {
  return steps ? rng::dropoutKey(steps->seed, g.rngOffset, steps->step,
                                 steps->microBatch)
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
