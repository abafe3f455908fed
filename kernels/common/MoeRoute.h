// One token row of the router's kernels (docs/kernels.md, docs/moe.md):
// the unfused moe_scores and moe_topk (and their gradients) and the fused
// moe_route and moe_route_grad, which call the unfused rows' functions in
// turn, so that fused and unfused compute the same bits. Shared by the CPU
// kernels (kernels/cpu/Moe.cpp) and the CUDA ones (kernels/cuda/Moe.cu),
// which run a row per thread: both choose the same experts the same way
// (ties to the lower expert).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/HostDevice.h"

namespace braid::moe {

struct RouteParams {
  int sigmoid = 0, normalize = 0;
  float scale = 1.0f;
};

// The row's e scores: softmax of its logits, or each one's sigmoid
// (moe_scores; moe_route's first half).
BRAID_HOST_DEVICE inline void scoresRow(const float *logits, int64_t e,
                                        int sigmoid, float *scores) {
  if (sigmoid) {
    for (int64_t i = 0; i < e; ++i)
      scores[i] = 1.0f / (1.0f + expf(-logits[i]));
    return;
  }
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

// The row's k experts by score plus bias (bias may be null) and their
// weights (moe_topk; moe_route's second half).
BRAID_HOST_DEVICE inline void topkRow(const float *scores, const float *bias,
                                      int64_t e, int64_t k, RouteParams p,
                                      int32_t *experts, float *weights) {
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

// moe_route: the scores, then the choice.
BRAID_HOST_DEVICE inline void routeRow(const float *logits, const float *bias,
                                       int64_t e, int64_t k, RouteParams p,
                                       float *scores, int32_t *experts,
                                       float *weights) {
  scoresRow(logits, e, p.sigmoid, scores);
  topkRow(scores, bias, e, k, p, experts, weights);
}

// Adds the weights' gradient, through the weights, to the chosen scores'
// entries of `dscores` (moe_topk_grad starts from zeros). An expert id
// outside [0, e) contributes nothing.
BRAID_HOST_DEVICE inline void addTopkGradRow(const float *dweights,
                                             const float *scores,
                                             const int32_t *experts, int64_t e,
                                             int64_t k, RouteParams p,
                                             float *dscores) {
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
    dscores[c] += p.normalize ? p.scale * (dweights[j] / z - dot / (z * z))
                              : p.scale * dweights[j];
  }
}

// The logits' gradient from the scores' (moe_scores_grad), through the
// sigmoid or the softmax; `dlogits` may be `dscores`.
BRAID_HOST_DEVICE inline void scoresGradRow(const float *dscores,
                                            const float *scores, int64_t e,
                                            int sigmoid, float *dlogits) {
  if (sigmoid) {
    for (int64_t i = 0; i < e; ++i)
      dlogits[i] = dscores[i] * (scores[i] * (1.0f - scores[i]));
    return;
  }
  float inner = 0.0f;
  for (int64_t i = 0; i < e; ++i)
    inner += scores[i] * dscores[i];
  for (int64_t i = 0; i < e; ++i)
    dlogits[i] = scores[i] * (dscores[i] - inner);
}

// moe_route_grad: the row's dlogits from its weights' gradient and the
// scores' own gradient `dscores` (the balancing loss's; may be null), as
// moe_topk_grad, the sum with dscores and moe_scores_grad compute them.
BRAID_HOST_DEVICE inline void
routeGradRow(const float *dweights, const float *scores, const int32_t *experts,
             int64_t e, int64_t k, RouteParams p, const float *dscores,
             float *dlogits) {
  // dlogits holds the scores' gradient first.
  for (int64_t i = 0; i < e; ++i)
    dlogits[i] = 0.0f;
  addTopkGradRow(dweights, scores, experts, e, k, p, dlogits);
  if (dscores)
    for (int64_t i = 0; i < e; ++i)
      dlogits[i] += dscores[i];
  scoresGradRow(dlogits, scores, e, p.sigmoid, dlogits);
}

} // namespace braid::moe
