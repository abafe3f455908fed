// The sizes and parameters that attention and flash_attention read once per
// launch: q [B, S, H*Dh], k and v [B, S, Hkv*Dh].
#pragma once

#include <cstdint>

#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {

// n rounded up to a multiple of m.
inline int64_t roundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

struct AttentionGeometry {
  int64_t b, s, h, hkv, dh, group;
  int64_t qStride, kvStride; // floats between consecutive positions
  int64_t sPad;              // s rounded up to kLanes
  int64_t dPad;              // dh rounded up to kLanes
  bool causal;
  float scale;
  DropoutMask mask;

  AttentionGeometry(const KernelArgs &args, const TensorDesc &q) {
    const KernelParams &p = paramsOf(args);
    b = q.shape[0];
    s = q.shape[1];
    h = p.intOr("num_heads", 1);
    hkv = p.intOr("num_kv_heads", 1);
    dh = q.shape[2] / h;
    group = h / hkv;
    qStride = h * dh;
    kvStride = hkv * dh;
    sPad = roundUp(s, kLanes);
    dPad = roundUp(dh, kLanes);
    causal = p.intOr("causal", 0) != 0;
    scale = static_cast<float>(p.floatOr("scale", 1.0));
    mask = DropoutMask::make(p.floatOr("dropout", 0.0),
                             p.intOr("rng_offset", 0), contextOf(args));
  }
  // Element index of probs[b, h, i, 0] and of its dropout draw.
  int64_t probsRow(int64_t bi, int64_t hi, int64_t i) const {
    return ((bi * h + hi) * s + i) * s;
  }
};

// Copies dh values to `out` and zeroes it up to dPad.
template <typename T>
BRAID_INLINE void padRow(const T *src, const AttentionGeometry &g, float *out) {
  convert(src, out, g.dh);
  for (int64_t d = g.dh; d < g.dPad; ++d)
    out[d] = 0.0f;
}

} // namespace braid::cpu
