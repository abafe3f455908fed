// One token row of moe_route and moe_route_grad (docs/kernels.md,
// docs/moe.md), shared by the CPU kernels (kernels/cpu/Moe.cpp) and the
// CUDA ones (kernels/cuda/Moe.cu), which run it one row per thread: both
// choose the same experts the same way (ties to the lower expert).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/HostDevice.h"

namespace braid::moe {

struct RouteParams {
  int sigmoid = 0, normalize = 0;
  float scale = 1.0f;
};

// Scores of the row's e logits, then its k experts by score plus bias
// (bias may be null) and their weights.
BRAID_HOST_DEVICE inline void routeRow(const float *logits, const float *bias,
                                       int64_t e, int64_t k, RouteParams p,
                                       float *scores, int32_t *experts,
                                       float *weights) {
  if (p.sigmoid) {
    for (int64_t i = 0; i < e; ++i)
      scores[i] = 1.0f / (1.0f + expf(-logits[i]));
  } else {
    float m = logits[0];
    for (int64_t i = 1; i < e; ++i)
      m = fmaxf(m, logits[i]);
    float sum = 0.0f;
    for (int64_t i = 0; i < e; ++i) {
      scores[i] = expf(logits[i] - m);
      sum += scores[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < e; ++i)
      scores[i] *= inv;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    float bestKey = 0.0f;
    for (int64_t i = 0; i < e; ++i) {
      bool taken = false;
      for (int64_t c = 0; c < j; ++c)
        taken |= experts[c] == i;
      const float key = bias ? scores[i] + bias[i] : scores[i];
      if (!taken && (best < 0 || key > bestKey)) {
        best = i;
        bestKey = key;
      }
    }
    experts[j] = static_cast<int32_t>(best);
    weights[j] = scores[best];
    sum += weights[j];
  }
  const float factor = p.normalize ? p.scale / sum : p.scale;
  for (int64_t j = 0; j < k; ++j)
    weights[j] *= factor;
}

// The row's dlogits from its weights' gradient: through the weights to the
// chosen scores, plus the scores' own gradient `dscores` (the balancing
// loss's; may be null), then through softmax or sigmoid. An expert id
// outside [0, e) contributes nothing.
BRAID_HOST_DEVICE inline void
routeGradRow(const float *dweights, const float *scores, const int32_t *experts,
             int64_t e, int64_t k, RouteParams p, const float *dscores,
             float *dlogits) {
  for (int64_t i = 0; i < e; ++i)
    dlogits[i] = dscores ? dscores[i] : 0.0f;
  // dlogits holds the scores' gradient first.
  float z = 0.0f, dot = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    const int32_t c = experts[j];
    if (c < 0 || c >= e)
      continue;
    z += scores[c];
    dot += dweights[j] * scores[c];
  }
  for (int64_t j = 0; j < k; ++j) {
    const int32_t c = experts[j];
    if (c < 0 || c >= e)
      continue;
    dlogits[c] += p.normalize ? p.scale * (dweights[j] / z - dot / (z * z))
                              : p.scale * dweights[j];
  }
  if (p.sigmoid) {
    for (int64_t i = 0; i < e; ++i)
      dlogits[i] *= scores[i] * (1.0f - scores[i]);
    return;
  }
  float inner = 0.0f;
  for (int64_t i = 0; i < e; ++i)
    inner += scores[i] * dlogits[i];
  for (int64_t i = 0; i < e; ++i)
    dlogits[i] = scores[i] * (dlogits[i] - inner);
}

} // namespace braid::moe
