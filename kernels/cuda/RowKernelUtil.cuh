// Device helpers shared by the row-wise and element-wise CUDA kernels
// (Norms, Elementwise, Rope, RepeatKv, Attention, CrossEntropy): storage
// conversion with the CPU's rounding, deterministic block reductions, and
// access to the launch's stream and step values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/registry/Kernel.h"

namespace braid::cuda::rows {

// A bf16 value as its 16-bit pattern, as in TensorView::bf16.
using Bf16 = uint16_t;

// Widening is exact: the bf16 bits are the upper half of an f32.
__device__ __forceinline__ float widen(Bf16 b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// Round to nearest, ties to even; NaN stays NaN with the quiet bit set.
// Bit for bit the CPU's roundToBf16 (kernels/cpu/Storage.h).
__device__ __forceinline__ Bf16 roundToBf16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u;
  return static_cast<Bf16>((u & 0x7fffffffu) > 0x7f800000u ? quietNan
                                                            : rounded);
}

__device__ __forceinline__ float load(const float *p, int64_t i) {
  return p[i];
}
__device__ __forceinline__ float load(const Bf16 *p, int64_t i) {
  return widen(p[i]);
}
__device__ __forceinline__ void store(float *p, int64_t i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void store(Bf16 *p, int64_t i, float v) {
  p[i] = roundToBf16(v);
}

// Threads per block of these kernels, and the largest grid they launch
// (the kernels loop over their work with grid-stride loops).
inline constexpr int kBlock = 256;
inline constexpr int kWarps = kBlock / 32;
inline constexpr int64_t kGridCap = int64_t{1} << 16;

inline unsigned gridFor(int64_t work, int64_t perBlock) {
  if (work <= 0)
    return 1;
  int64_t blocks = (work + perBlock - 1) / perBlock;
  if (blocks > kGridCap)
    blocks = kGridCap;
  return static_cast<unsigned>(blocks);
}

inline cudaStream_t streamOf(const KernelArgs &args) {
  return args.ctx && args.ctx->gpu
             ? static_cast<cudaStream_t>(args.ctx->gpu->stream)
             : nullptr;
}

inline const StepValues *stepValuesOf(const KernelArgs &args) {
  return args.ctx && args.ctx->gpu ? args.ctx->gpu->stepValues : nullptr;
}

inline const KernelParams &paramsOf(const KernelArgs &args) {
  static const KernelParams kEmpty;
  return args.params ? *args.params : kEmpty;
}

inline bool isBf16(const TensorView &v) {
  return v.desc->dtype == DType::kBF16;
}

template <typename T> T *dataOf(const TensorView &v) {
  return static_cast<T *>(v.data);
}

// Warp-wide sum and maximum by a fixed butterfly: every lane ends with the
// same value, and the order of additions depends on nothing but the lane
// count, so results are the same on every run.
__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warpSum(double v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum or maximum over a block of kBlock threads: warps reduce by
// butterfly, then warp 0 adds the warps' results in warp order. Every thread
// returns the result. `scratch` holds kWarps values; the call ends with a
// barrier after which scratch may be reused.
template <typename V>
__device__ __forceinline__ V blockSum(V v, V *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSum(v);
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  V total = scratch[0];
  for (int w = 1; w < kWarps; ++w)
    total += scratch[w];
  __syncthreads();
  return total;
}

__device__ __forceinline__ float blockMax(float v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpMax(v);
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < kWarps; ++w)
    m = fmaxf(m, scratch[w]);
  __syncthreads();
  return m;
}

} // namespace braid::cuda::rows

#include <initializer_list>
#include <string_view>

#include "absl/status/status.h"
#include "kernels/checks/KernelChecks.h"

namespace braid::cuda::rows {

struct Entry {
  std::string_view name;
  void (*run)(const KernelArgs &args);
};

// Adds one Device::kCUDA entry per kernel, each with the shared load-time
// check of its name.
inline absl::Status registerEntries(KernelRegistry &registry,
                                    std::initializer_list<Entry> entries) {
  for (const Entry &e : entries) {
    KernelDef def;
    def.name = e.name;
    def.device = Device::kCUDA;
    def.check = kernelCheck(e.name);
    def.run = e.run;
    absl::Status s = registry.add(def);
    if (!s.ok())
      return s;
  }
  return absl::OkStatus();
}

} // namespace braid::cuda::rows
