// Inner loops of the CPU kernels, written so that the compiler vectorises
// them at the project's portable baseline flags.
//
// Without -ffast-math a compiler may not reorder a float sum, so a plain
// `s += a[i] * b[i]` runs one element at a time. Reductions here keep kLanes
// independent partial sums (element i goes to lane i % kLanes) and combine
// them in a fixed tree, which vectorises and gives the same bits on every
// run and every thread count. Element-wise loops are plain loops over
// restrict-qualified pointers.
#pragma once

#include <cstdint>
#include <cstring>

// Hot loops are compiled three times, for the portable baseline, AVX2 and
// AVX-512, and the loader picks one by the CPU (ifunc), so binaries run on
// any x86-64 yet use wide vectors where they exist. Only the instructions
// differ: the kernels build with -ffp-contract=off, so no path fuses a
// multiply and an add and every path gives the same bits. A
// ThreadSanitizer build (BRAID_SANITIZE=thread) keeps the baseline only: it
// would instrument the ifunc resolvers, which run before its runtime starts.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&       \
    !defined(BRAID_TSAN)
#define BRAID_VECTOR_CLONES                                                    \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BRAID_VECTOR_CLONES
#endif

// Helpers called from a cloned loop must be inlined into it to be compiled
// for its instruction set.
#if defined(__GNUC__) || defined(__clang__)
#define BRAID_INLINE inline __attribute__((always_inline))
#else
#define BRAID_INLINE inline
#endif

namespace braid::cpu {

inline constexpr int kLanes = 16;

// kLanes floats as one value, for loops whose partial sums must stay in
// registers: the compiler lowers it to one AVX-512, two AVX2 or four SSE
// registers, whichever the clone targets. Loads and stores are unaligned.
typedef float Vec16 __attribute__((vector_size(kLanes * sizeof(float))));

BRAID_INLINE Vec16 load16(const float *p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

BRAID_INLINE void store16(float *p, Vec16 v) { std::memcpy(p, &v, sizeof v); }

BRAID_INLINE Vec16 broadcast16(float x) {
  Vec16 v;
  for (int l = 0; l < kLanes; ++l)
    v[l] = x;
  return v;
}

// A lane mask, as Vec16 comparisons give it: each lane all ones or zero.
// `mask ? a : b` picks lanes of a or b.
typedef int32_t Mask16 __attribute__((vector_size(kLanes * sizeof(int32_t))));

// Lanes [0, k) set, for 0 <= k <= kLanes.
BRAID_INLINE Mask16 firstLanes(int k) {
  const Mask16 index = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return index < k;
}

// Combines kLanes partial sums pairwise in a fixed order.
BRAID_INLINE float sumLanes(float *acc) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  return acc[0];
}

BRAID_INLINE float dot(const float *__restrict a, const float *__restrict b,
                       int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l)
    acc[l] += a[i] * b[i];
  return sumLanes(acc);
}

BRAID_INLINE float sum(const float *__restrict a, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      acc[l] += a[i + l];
  for (int l = 0; i < n; ++i, ++l)
    acc[l] += a[i];
  return sumLanes(acc);
}

// Combines kLanes running maxima pairwise in a fixed order.
BRAID_INLINE float maxLanes(float *acc) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l)
      acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
  return acc[0];
}

// The same trees over the lanes of a Vec16.
BRAID_INLINE float sumLanes(Vec16 v) {
  float acc[kLanes];
  store16(acc, v);
  return sumLanes(acc);
}
BRAID_INLINE float maxLanes(Vec16 v) {
  float acc[kLanes];
  store16(acc, v);
  return maxLanes(acc);
}

// The largest element of a[0, n), n >= 1; NaN-free input assumed.
BRAID_INLINE float maxOf(const float *__restrict a, int64_t n) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l)
    acc[l] = a[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      acc[l] = a[i + l] > acc[l] ? a[i + l] : acc[l];
  for (int l = 0; i < n; ++i, ++l)
    acc[l] = a[i] > acc[l] ? a[i] : acc[l];
  return maxLanes(acc);
}

// y += a * x.
BRAID_INLINE void axpy(float a, const float *__restrict x, float *__restrict y,
                       int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

BRAID_INLINE void scaleInPlace(float *__restrict y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] *= a;
}

BRAID_INLINE uint32_t bitsOf(float f) {
  uint32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

BRAID_INLINE float floatOf(uint32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

// exp(x) for float, within 1 ulp where the result is a normal float; 0
// below that range (no denormals, which are slow), +inf above it, NaN for
// NaN. Branch-free so that loops calling it vectorise, which glibc's expf
// does not at baseline flags. Cephes' expf: x = n ln2 + r with
// |r| <= ln2 / 2, a polynomial for exp(r), and 2^n built from exponent bits
// in two halves so that n = 128 (results near FLT_MAX) needs no special case.
BRAID_INLINE float expFloat(float x) {
  constexpr float kLo = -87.3365447505531f; // ln(FLT_MIN)
  constexpr float kHi = 88.8f;              // just above ln(FLT_MAX)
  // Adding 1.5 * 2^23 rounds to an integer that sits in the low mantissa
  // bits, which gives n without a float-to-int conversion.
  constexpr float kRound = 12582912.0f;
  float xc = x > kHi ? kHi : x;
  xc = xc < kLo ? kLo : xc;
  float t = xc * 1.44269504088896341f + kRound;
  float n = t - kRound;
  // Unsigned arithmetic: wraps (instead of overflowing) for NaN inputs.
  const uint32_t ni = bitsOf(t) - bitsOf(kRound);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = (p * r * r + r) + 1.0f;
  const uint32_t half = static_cast<uint32_t>(static_cast<int32_t>(ni) >> 1);
  y *= floatOf((half + 127u) << 23);
  y *= floatOf((ni - half + 127u) << 23);
  return x < kLo ? 0.0f : y;
}

// dst[i] = exp(src[i] - shift) * factor.
BRAID_INLINE void expShiftScale(const float *__restrict src, float shift,
                                float factor, float *__restrict dst,
                                int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = expFloat(src[i] - shift) * factor;
}

// x[i] = exp(x[i] - shift).
BRAID_INLINE void expShiftInPlace(float *__restrict x, float shift, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = expFloat(x[i] - shift);
}

} // namespace braid::cpu
