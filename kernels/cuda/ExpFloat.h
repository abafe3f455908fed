// The CPU kernels' exp (kernels/cpu/VecMath.h, expFloat), operation for
// operation, for CUDA device code and for the host.
//
// gelu and swiglu (and their gradients) form tanh and the sigmoid from exp
// and then cancel terms (1 + tanh near -1, 1 - tanh^2 near 0): there a
// one-ulp difference between CUDA's expf and the CPU's exp can move a result
// by far more than its own size. Evaluating the CPU's exp with the same
// correctly rounded operations in the same order (no fused multiply-adds)
// gives the CPU's bits, so those kernels agree with their CPU twins exactly.
//
// Plain C++ outside nvcc, so that a host test can compare it with the CPU
// kernels' function bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define BRAID_EXP_HD __host__ __device__
#else
#define BRAID_EXP_HD
#endif

namespace braid::cuda::expf32 {

// Single correctly rounded operations, never contracted.
BRAID_EXP_HD inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
BRAID_EXP_HD inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
BRAID_EXP_HD inline float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

BRAID_EXP_HD inline uint32_t bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}
BRAID_EXP_HD inline float fromBits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// exp(x): x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts), a degree
// 7 polynomial in r, then 2^n applied in two halves so that results near
// the subnormal range keep their bits. 0 below ln(FLT_MIN), inf above
// ln(FLT_MAX).
BRAID_EXP_HD inline float expFloat(float x) {
  const float kLo = -87.3365447505531f;  // ln(FLT_MIN)
  const float kHi = 88.8f;               // just above ln(FLT_MAX)
  // Adding 1.5 * 2^23 rounds to an integer held in the low mantissa bits.
  const float kRound = 12582912.0f;
  float xc = x > kHi ? kHi : x;
  xc = xc < kLo ? kLo : xc;
  const float t = add(mul(xc, 1.44269504088896341f), kRound);
  const float n = sub(t, kRound);
  // Unsigned arithmetic: wraps (instead of overflowing) for NaN inputs.
  const uint32_t ni = bits(t) - bits(kRound);
  float r = sub(xc, mul(n, 0.693359375f));
  r = sub(r, mul(n, -2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = add(mul(p, r), 1.3981999507e-3f);
  p = add(mul(p, r), 8.3334519073e-3f);
  p = add(mul(p, r), 4.1665795894e-2f);
  p = add(mul(p, r), 1.6666665459e-1f);
  p = add(mul(p, r), 5.0000001201e-1f);
  float y = add(add(mul(mul(p, r), r), r), 1.0f);
  const uint32_t half =
      static_cast<uint32_t>(static_cast<int32_t>(ni) >> 1);
  y = mul(y, fromBits((half + 127u) << 23));
  y = mul(y, fromBits((ni - half + 127u) << 23));
  return x < kLo ? 0.0f : y;
}

}  // namespace braid::cuda::expf32

#undef BRAID_EXP_HD
