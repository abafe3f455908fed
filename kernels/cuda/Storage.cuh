// Storage types of the CUDA kernels, as kernels/cpu/Storage.h defines them
// for the CPU: kernels compute in f32 whatever they store; a bf16 value is
// the upper half of an f32, widened exactly and rounded to nearest, ties to
// even, bit for bit as the CPU rounds.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/registry/Kernel.h"

namespace braid::cuda {

// A bf16 value as its 16-bit pattern, as in TensorView::bf16.
using Bf16 = uint16_t;

__host__ __device__ __forceinline__ uint32_t bitsOfFloat(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

// Widening is exact: the bf16 bits are the upper half of an f32.
__device__ __forceinline__ float widen(Bf16 b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// Round to nearest, ties to even; NaN stays NaN with the quiet bit set.
// Bit for bit the CPU's roundToBf16. Usable on the host too (fill values).
__host__ __device__ __forceinline__ Bf16 roundToBf16(float f) {
  const uint32_t u = bitsOfFloat(f);
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

inline bool isBf16(const TensorView &v) {
  return v.desc->dtype == DType::kBF16;
}

template <typename T> T *dataOf(const TensorView &v) {
  return static_cast<T *>(v.data);
}

// A kernel whose operands share one storage type (the checks see to it):
// runs F32 or BF16 by the dtype of its first input.
template <void (*F32)(const KernelArgs &), void (*BF16)(const KernelArgs &)>
void byStorage(const KernelArgs &args) {
  if (isBf16(args.ins[0]))
    BF16(args);
  else
    F32(args);
}

} // namespace braid::cuda
