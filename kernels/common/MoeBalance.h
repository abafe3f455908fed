// One token row of the router's balancing losses (docs/kernels.md,
// docs/moe.md), shared by the CPU kernels (kernels/cpu/Moe.cpp) and the
// CUDA ones (kernels/cuda/Moe.cu).
//
// Load balancing (Switch Transformer, as Megatron-Core computes it): over
// the T tokens of a launch with K choices each,
//   aux = coeff * E / (K * T^2) * sum_e counts[e] * sum_t q[t, e],
// counts[e] the choices of expert e and q a row's scores normalised to sum
// 1 (softmax scores already do; sigmoid scores are divided by their sum).
// Router z-loss (ST-MoE): z = coeff / T * sum_t logsumexp(logits[t])^2.
// The expert bias's update (DeepSeek-V3's aux-loss-free balancing).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/HostDevice.h"

namespace braid::moe {

// counts[i] = the choices naming expert i, in f32 (exact: the checks keep
// a launch's choices below 2^24); ids outside [0, e) count nowhere.
BRAID_HOST_DEVICE inline void countExperts(const int32_t *experts,
                                           int64_t choices, int64_t e,
                                           float *counts) {
  for (int64_t i = 0; i < e; ++i)
    counts[i] = 0.0f;
  for (int64_t a = 0; a < choices; ++a)
    if (experts[a] >= 0 && experts[a] < e)
      counts[experts[a]] += 1.0f;
}

// aux's factor coeff * E / (K * T^2) over T rows; 0 without rows. Under
// context parallel the rows are one of `parts` equal parts of the sequence
// whose counts the launch reads, and the factor is divided by `parts`: the
// parts' losses averaged (as the CP group averages its losses) give the
// whole sequence's.
BRAID_HOST_DEVICE inline double auxFactor(double coeff, int64_t e, int64_t topK,
                                          int64_t t, int64_t parts = 1) {
  const double rows = static_cast<double>(t);
  return t == 0 ? 0.0
                : coeff * static_cast<double>(e) /
                      (static_cast<double>(topK) * rows * rows *
                       static_cast<double>(parts));
}

// z's factor coeff / T; 0 without rows.
BRAID_HOST_DEVICE inline double zFactor(double coeff, int64_t t) {
  return t == 0 ? 0.0 : coeff / static_cast<double>(t);
}

// sum_e counts[e] * q[e] of one row.
BRAID_HOST_DEVICE inline double
auxRowTerm(const float *scores, const float *counts, int64_t e, int sigmoid) {
  double sum = 1.0;
  if (sigmoid) {
    sum = 0.0;
    for (int64_t i = 0; i < e; ++i)
      sum += scores[i];
  }
  double term = 0.0;
  for (int64_t i = 0; i < e; ++i)
    term += double{counts[i]} * scores[i];
  return sum > 0.0 ? term / sum : 0.0;
}

// sum over the n rows, in order, of auxRowTerm: aux = auxFactor * this.
BRAID_HOST_DEVICE inline double auxSum(const float *scores, const float *counts,
                                       int64_t n, int64_t e, int sigmoid) {
  double sum = 0.0;
  for (int64_t r = 0; r < n; ++r)
    sum += auxRowTerm(scores + r * e, counts, e, sigmoid);
  return sum;
}

// The row's dscores (times `scale`) for aux's factor coeff * E / (K T^2).
BRAID_HOST_DEVICE inline void auxGradRow(const float *scores,
                                         const float *counts, int64_t e,
                                         int sigmoid, double factor,
                                         float *dscores) {
  if (!sigmoid) {
    for (int64_t i = 0; i < e; ++i)
      dscores[i] = static_cast<float>(factor * counts[i]);
    return;
  }
  // q = s / S: dq/ds_i = (g_i - sum_j g_j q_j) / S.
  double sum = 0.0, dot = 0.0;
  for (int64_t i = 0; i < e; ++i)
    sum += scores[i];
  if (!(sum > 0.0)) {
    for (int64_t i = 0; i < e; ++i)
      dscores[i] = 0.0f;
    return;
  }
  for (int64_t i = 0; i < e; ++i)
    dot += double{counts[i]} * scores[i] / sum;
  for (int64_t i = 0; i < e; ++i)
    dscores[i] = static_cast<float>(factor * (counts[i] - dot) / sum);
}

// logsumexp of one row, in double.
BRAID_HOST_DEVICE inline double logSumExpRow(const float *logits, int64_t e) {
  double m = logits[0];
  for (int64_t i = 1; i < e; ++i)
    m = logits[i] > m ? logits[i] : m;
  double sum = 0.0;
  for (int64_t i = 0; i < e; ++i)
    sum += exp(double{logits[i]} - m);
  return m + log(sum);
}

// sum over the n rows, in order, of logsumexp^2: z = zFactor * this.
BRAID_HOST_DEVICE inline double zSum(const float *logits, int64_t n,
                                     int64_t e) {
  double sum = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const double lse = logSumExpRow(logits + r * e, e);
    sum += lse * lse;
  }
  return sum;
}

// The row's dlogits of z for z's factor coeff / T (times `scale`):
// 2 * factor * lse * softmax(logits).
BRAID_HOST_DEVICE inline void zGradRow(const float *logits, int64_t e,
                                       double factor, float *dlogits) {
  const double lse = logSumExpRow(logits, e);
  for (int64_t i = 0; i < e; ++i)
    dlogits[i] =
        static_cast<float>(2.0 * factor * lse * exp(double{logits[i]} - lse));
}

// Aux-loss-free balancing: expert i's bias moves by `rate` towards the
// mean of the step's loads (up when chosen fewer times than the mean, down
// when more, not at all when equal). The sum runs in double, in order.
BRAID_HOST_DEVICE inline void biasUpdate(const float *load, int64_t e,
                                         double rate, float *bias) {
  double total = 0.0;
  for (int64_t i = 0; i < e; ++i)
    total += load[i];
  const double mean = e > 0 ? total / static_cast<double>(e) : 0.0;
  for (int64_t i = 0; i < e; ++i) {
    const double gap = mean - load[i];
    const double step = gap > 0 ? rate : (gap < 0 ? -rate : 0.0);
    bias[i] = static_cast<float>(bias[i] + step);
  }
}

} // namespace braid::moe
