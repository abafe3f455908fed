// Row and element loops that more than one kernel family runs, kept in one
// place so that fused and unfused kernels do the same operations in the
// same order.
#pragma once

#include <cstdint>

#include "kernels/cpu/VecMath.h"

namespace braid::cpu {

// lse[r] = log(sum(exp(row r))) of rows [r0, r1) of logits [..., v], the
// maximum subtracted first; `e` holds v floats. cross_entropy and the fused
// LM head (defined in CrossEntropy.cpp).
void logSumExpRows(const float *logits, int64_t v, int64_t r0, int64_t r1,
                   float *e, float *lse);

// stats[r] = (max m, sum of exp(x - m), the target logit or 0) of rows
// [r0, r1) of logits [..., v] whose column 0 is vocabulary id `first`:
// cross_entropy_stats and the fused vocabulary-parallel LM head (defined in
// CrossEntropy.cpp); `e` holds v floats.
void statsRows(const float *logits, const int32_t *labels, int64_t v,
               int64_t first, int64_t r0, int64_t r1, float *e, float *stats);

// Sum of (x - m)^2 in fixed lanes: the variance pass of layer_norm and of
// fused_add_layer_norm.
BRAID_INLINE float sumSqDiff(const float *__restrict x, float m, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      float t = x[i + l] - m;
      acc[l] += t * t;
    }
  for (int l = 0; i < n; ++i, ++l) {
    float t = x[i] - m;
    acc[l] += t * t;
  }
  return sumLanes(acc);
}

// The two row means of the norm backward, with g = dy * gamma and
// xhat = (x - m) * s: *meanG = mean(g) (0 unless `centred`, layer norm) and
// *meanGX = mean(g * xhat). Element j goes to lane j % kLanes, as in
// VecMath's reductions. Written with Vec16: in a cloned caller the vectoriser
// otherwise picks an outer-loop form that ran 3x slower than the plain SSE
// loop.
BRAID_INLINE void normGradMeans(const float *__restrict dy,
                                const float *__restrict x,
                                const float *__restrict gamma, float m, float s,
                                bool centred, int64_t d, float invD,
                                float *meanG, float *meanGX) {
  Vec16 vG = {}, vGX = {};
  int64_t j = 0;
  for (; j + kLanes <= d; j += kLanes) {
    const Vec16 g = load16(dy + j) * load16(gamma + j);
    vG += g;
    vGX += g * ((load16(x + j) - m) * s);
  }
  float accG[kLanes], accGX[kLanes];
  store16(accG, vG);
  store16(accGX, vGX);
  for (int l = 0; j < d; ++j, ++l) {
    float g = dy[j] * gamma[j];
    accG[l] += g;
    accGX[l] += g * ((x[j] - m) * s);
  }
  *meanG = centred ? sumLanes(accG) * invD : 0.0f;
  *meanGX = sumLanes(accGX) * invD;
}

// The per-step scalars of adamw, computed in double and rounded once.
struct AdamwCoefficients {
  float clip, decay, b1, c1, b2, c2, bc2Sqrt, stepSize, eps;
};

// The element-wise AdamW update of docs/kernels.md, operation for operation,
// over n contiguous elements; adamw and multi_adamw both run it.
void adamwUpdate(AdamwCoefficients k, const float *grad, float *param, float *m,
                 float *v, int64_t n);

} // namespace braid::cpu
