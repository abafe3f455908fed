// The dropout mask shared by `dropout`, `dropout_grad_input`, `attention`
// and `attention_grad_input`: regenerated from the counter-based RNG in
// backward, never stored (docs/numerics.md, "Random numbers").
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/Random.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/registry/Kernel.h"

namespace braid::cpu {

struct DropoutMask {
  uint64_t key = 0;
  // Element n is kept iff uniform24(key, n) >= p, i.e. iff its 24 random
  // bits, read as an integer, are >= ceil(p * 2^24): an exact test.
  uint64_t threshold = 0;
  float scale = 1.0f; // 1 / (1 - p), computed in fp32
  bool active = false;

  // The mask of launch `args` (its step, seed and micro-batch).
  static DropoutMask make(double p, int64_t rngOffset, const KernelArgs &args) {
    DropoutMask m;
    m.active = p > 0;
    const KernelContext &ctx = contextOf(args);
    m.key = rng::dropoutKey(ctx.seed, rngOffset, ctx.step, args.microBatch);
    m.threshold = static_cast<uint64_t>(std::ceil(p * 16777216.0));
    m.scale = 1.0f / (1.0f - static_cast<float>(p));
    return m;
  }

  // The factor element n is multiplied by: `scale` if kept, else 0.
  float factor(uint64_t n) const {
    return (rng::draw(key, n) >> 40) >= threshold ? scale : 0.0f;
  }
};

} // namespace braid::cpu
