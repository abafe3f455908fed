// Device helpers shared by the row-wise and element-wise CUDA kernels
// (Norms, Elementwise, Rope, RepeatKv, Attention, CrossEntropy): storage
// conversion with the CPU's rounding, deterministic block reductions, and
// access to the launch's stream and step values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/Storage.cuh"
#include "kernels/registry/Kernel.h"

namespace braid::cuda::rows {

// Storage (Storage.cuh), under the names these kernels use.
using cuda::Bf16;
using cuda::dataOf;
using cuda::isBf16;
using cuda::load;
using cuda::roundToBf16;
using cuda::store;
using cuda::widen;

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

// The block's row of v values: its maximum m and the sum of exp(x - m), in
// f32 (the log-sum-exp and the vocabulary-parallel statistics).
template <typename T>
__device__ __forceinline__ float2 rowMaxAndSum(const T *__restrict__ row,
                                               int64_t v, float *red) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += kBlock)
    m = fmaxf(m, load(row, j));
  m = blockMax(m, red);
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += kBlock)
    acc += expf(load(row, j) - m);
  return make_float2(m, blockSum(acc, red));
}

} // namespace braid::cuda::rows

#include <initializer_list>
#include <string_view>

#include "absl/status/status.h"
#include "kernels/checks/KernelChecks.h"
#include "kernels/cuda/CudaKernels.h"

namespace braid::cuda::rows {

struct Entry {
  std::string_view name;
  void (*run)(const KernelArgs &args);
};

// Adds one Device::kCUDA entry per kernel, each with the load-time check of
// its name (cudaCheck: the shared one, but for the attention kernels).
inline absl::Status registerEntries(KernelRegistry &registry,
                                    std::initializer_list<Entry> entries) {
  for (const Entry &e : entries) {
    KernelDef def;
    def.name = e.name;
    def.device = Device::kCUDA;
    def.check = cudaCheck(e.name);
    def.run = e.run;
    absl::Status s = registry.add(def);
    if (!s.ok())
      return s;
  }
  return absl::OkStatus();
}

} // namespace braid::cuda::rows
