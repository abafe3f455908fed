// Storage types of the CPU kernels (docs/kernels.md, "Storage precision").
//
// Kernels compute in f32 whatever they store. A bf16 value is the upper
// half of an f32, so reading one widens exactly (a shift) and writing one
// rounds the f32 result to nearest, ties to even, once. Kernels are
// templates over the storage type T (float or Bf16) that read through
// load() and write through store(); for float these are plain accesses, so
// the f32 instantiation compiles to the loop it replaces.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/VecMath.h"
#include "kernels/registry/Kernel.h"

namespace braid {
class ThreadPool;
} // namespace braid

namespace braid::cpu {

// A bf16 value as its 16-bit pattern (TensorView::bf16).
using Bf16 = uint16_t;

BRAID_INLINE float widen(Bf16 b) {
  return floatOf(static_cast<uint32_t>(b) << 16);
}

// Adding 0x7fff plus the lowest kept bit carries into the kept half exactly
// when the dropped half is more than one half, or one half with an odd kept
// half: round to nearest, ties to even. A finite value past the largest
// bf16 carries into the exponent and becomes inf, as rounding requires. A
// NaN could carry into inf too, so it keeps its sign and upper payload and
// gets the quiet bit instead. Branch-free, so that loops vectorise.
BRAID_INLINE Bf16 roundToBf16(float f) {
  const uint32_t u = bitsOf(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u;
  return static_cast<Bf16>((u & 0x7fffffffu) > 0x7f800000u ? quietNan
                                                            : rounded);
}

BRAID_INLINE float load(const float *p, int64_t i) { return p[i]; }
BRAID_INLINE float load(const Bf16 *p, int64_t i) { return widen(p[i]); }
BRAID_INLINE void store(float *p, int64_t i, float v) { p[i] = v; }
BRAID_INLINE void store(Bf16 *p, int64_t i, float v) { p[i] = roundToBf16(v); }

// dst[0, n) = src[0, n), widened or rounded when the types differ.
BRAID_INLINE void convert(const float *__restrict src, float *__restrict dst,
                          int64_t n) {
  std::memcpy(dst, src, n * sizeof(float));
}
BRAID_INLINE void convert(const Bf16 *__restrict src, Bf16 *__restrict dst,
                          int64_t n) {
  std::memcpy(dst, src, n * sizeof(Bf16));
}
BRAID_INLINE void convert(const Bf16 *__restrict src, float *__restrict dst,
                          int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = widen(src[i]);
}
BRAID_INLINE void convert(const float *__restrict src, Bf16 *__restrict dst,
                          int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = roundToBf16(src[i]);
}

// +0 in either type is all zero bits.
template <typename T> BRAID_INLINE void zero(T *p, int64_t n) {
  std::memset(p, 0, n * sizeof(T));
}

// src as f32: src itself when it is f32, else its widened copy in `scratch`
// (n floats).
BRAID_INLINE const float *asF32(const float *src, int64_t, float *) {
  return src;
}
BRAID_INLINE const float *asF32(const Bf16 *src, int64_t n, float *scratch) {
  convert(src, scratch, n);
  return scratch;
}

template <typename T> T *dataOf(const TensorView &v);
template <> inline float *dataOf<float>(const TensorView &v) { return v.f32(); }
template <> inline Bf16 *dataOf<Bf16>(const TensorView &v) { return v.bf16(); }

inline bool isBf16(const TensorView &v) {
  return v.desc->dtype == DType::kBF16;
}

// A kernel whose operands share one storage type (the checks see to it):
// runs F32 or BF16 by the dtype of its first input, or of its output when it
// has no input.
template <void (*F32)(const KernelArgs &), void (*BF16)(const KernelArgs &)>
void byStorage(const KernelArgs &args) {
  const TensorView &first = args.ins.empty() ? args.outs[0] : args.ins[0];
  if (isBf16(first))
    BF16(args);
  else
    F32(args);
}

// Whole matrices for the GEMMs, converted over the pool (Cast.cpp):
// dst[r * cols + c] = widen(src[r * ld + c]), and back with rounding.
void widenMatrix(ThreadPool *pool, const Bf16 *src, int64_t ld, int64_t rows,
                 int64_t cols, float *dst);
void roundMatrix(ThreadPool *pool, const float *src, int64_t rows,
                 int64_t cols, Bf16 *dst, int64_t ld);

} // namespace braid::cpu
