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

// Masks: key j is visible from query i iff (!causal || j <= i || j < prefix)
// and, with segment ids (the launch's input `segInput`, when present),
// seg[b, i] == seg[b, j].
struct AttentionGeometry {
  int64_t b, s, h, hkv, dh, group;
  int64_t qStride, kvStride; // floats between consecutive positions
  int64_t sPad;              // s rounded up to kLanes
  int64_t dPad;              // dh rounded up to kLanes
  bool causal;
  int64_t prefix;               // 0 unless causal
  const int32_t *seg = nullptr; // [B, S] or null
  float scale;
  DropoutMask mask;
  // The heads of the whole tensor and the first of them this launch holds:
  // h and 0, unless `head_shard` says q/k/v are one TP rank's slice of the
  // heads (docs/kernels.md, "Tensor parallel"). The dropout draws are keyed
  // by the whole tensor's element index, so that every rank drops exactly
  // what the unsharded kernel would.
  int64_t dropHeads, dropHead0;

  AttentionGeometry(const KernelArgs &args, const TensorDesc &q,
                    int segInput) {
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
    prefix = causal ? p.intOr("prefix", 0) : 0;
    if (static_cast<int>(args.ins.size()) > segInput)
      seg = args.ins[segInput].i32();
    scale = static_cast<float>(p.floatOr("scale", 1.0));
    mask = DropoutMask::make(p.floatOr("dropout", 0.0),
                             p.intOr("rng_offset", 0), args);
    dropHeads = h;
    dropHead0 = 0;
    if (p.intOr("head_shard", 0) != 0) {
      const KernelContext &ctx = contextOf(args);
      dropHeads = h * ctx.tpSize;
      dropHead0 = h * ctx.tpRank;
    }
  }
  // Keys [0, rowEnd(i)) may be visible from query i (segments aside).
  int64_t rowEnd(int64_t i) const {
    if (!causal)
      return s;
    return i + 1 > prefix ? i + 1 : prefix;
  }
  // The first query row that may see key j.
  int64_t firstRowSeeing(int64_t j) const {
    return !causal || j < prefix ? 0 : j;
  }
  // Element index of probs[b, h, i, 0] in this launch's tensor.
  int64_t probsRow(int64_t bi, int64_t hi, int64_t i) const {
    return ((bi * h + hi) * s + i) * s;
  }
  // Element index of the dropout draw of probs[b, h, i, 0]: the index of
  // that probability in the whole (unsharded) tensor; probsRow without
  // head_shard.
  int64_t dropRow(int64_t bi, int64_t hi, int64_t i) const {
    return ((bi * dropHeads + dropHead0 + hi) * s + i) * s;
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
