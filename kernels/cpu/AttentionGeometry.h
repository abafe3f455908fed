// The sizes and parameters that attention and flash_attention read once per
// launch: q [B, Sq, H*Dh], k and v [B, Sk, Hkv*Dh] (Sq = Sk without `cp`).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/SequenceLayout.h"
#include "kernels/cpu/DropoutMask.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {

// n rounded up to a multiple of m.
inline int64_t roundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Masks act on positions in the whole sequence of `seq` positions: query
// row i lies at qmap.at(i), key j at kmap.at(j) (both i and j without `cp`).
// Key j is visible from query i iff (!causal || kpos <= qpos || kpos <
// prefix) and, with segment ids (the launch's input `segInput`, when
// present, [B, seq]), seg[b, qpos] == seg[b, kpos].
//
// With `cp` the queries are this CP rank's part of the sequence
// (SequenceLayout.h), and the keys either the whole sequence (cp_kv_step
// -1, after an all-gather) or the part of CP rank (cpRank - t) mod cpSize
// (cp_kv_step t, step t of a ring). Both maps are ascending, so the keys a
// causal query may see are still a prefix [0, rowEnd(i)) of the local keys
// and the queries that may see a key a suffix [firstRowSeeing(j), sq).
struct AttentionGeometry {
  int64_t b, sq, sk, h, hkv, dh, group;
  int64_t qStride, kvStride; // floats between consecutive positions
  int64_t sPad;              // sk rounded up to kLanes
  int64_t dPad;              // dh rounded up to kLanes
  bool causal;
  int64_t prefix;               // 0 unless causal
  int64_t seq;                  // positions of the whole sequence
  SequenceMap qmap, kmap;       // positions of query rows and keys
  const int32_t *seg = nullptr; // [B, seq] or null
  float scale;
  DropoutMask mask;
  // The heads of the whole tensor and the first of them this launch holds:
  // h and 0, unless `head_shard` says q/k/v are one TP rank's slice of the
  // heads (docs/kernels.md, "Tensor parallel"). The dropout draws are keyed
  // by the whole tensor's element index, so that every rank drops exactly
  // what the unsharded kernel would.
  int64_t dropHeads, dropHead0;

  AttentionGeometry(const KernelArgs &args, const TensorDesc &q,
                    const TensorDesc &k, int segInput) {
    const KernelParams &p = paramsOf(args);
    b = q.shape[0];
    sq = q.shape[1];
    sk = k.shape[1];
    h = p.intOr("num_heads", 1);
    hkv = p.intOr("num_kv_heads", 1);
    dh = q.shape[2] / h;
    group = h / hkv;
    qStride = h * dh;
    kvStride = hkv * dh;
    sPad = roundUp(sk, kLanes);
    dPad = roundUp(dh, kLanes);
    causal = p.intOr("causal", 0) != 0;
    prefix = causal ? p.intOr("prefix", 0) : 0;
    seq = sq;
    qmap = kmap = SequenceMap::whole(sq);
    if (p.intOr("cp", 0) != 0) {
      const KernelContext &ctx = contextOf(args);
      const int64_t size = std::max<int64_t>(ctx.cpSize, 1);
      const int64_t step = p.intOr("cp_kv_step", -1);
      qmap = SequenceMap::part(sq, ctx.cpRank, size);
      if (step < 0) {
        seq = sk;
        kmap = SequenceMap::whole(sk);
      } else {
        seq = sq * size;
        kmap = SequenceMap::part(sk, ((ctx.cpRank - step) % size + size) % size,
                                 size);
      }
    }
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
      return sk;
    return kmap.countAtOrBelow(std::max(qmap.at(i), prefix - 1));
  }
  // The first query row that may see key j.
  int64_t firstRowSeeing(int64_t j) const {
    const int64_t pos = kmap.at(j);
    return !causal || pos < prefix ? 0 : qmap.firstAtOrAbove(pos);
  }
  // The segment ids of batch row bi, indexed by position.
  const int32_t *segments(int64_t bi) const { return seg + bi * seq; }
  // Element index of probs[b, h, i, 0] in this launch's tensor.
  int64_t probsRow(int64_t bi, int64_t hi, int64_t i) const {
    return ((bi * h + hi) * sq + i) * sk;
  }
  // Element index of the dropout draw of query row i and the key at
  // position 0: the index that probability has in the whole (unsharded,
  // whole-sequence) tensor [B, H, seq, seq]; probsRow without head_shard
  // and cp.
  int64_t dropRow(int64_t bi, int64_t hi, int64_t i) const {
    return ((bi * dropHeads + dropHead0 + hi) * seq + qmap.at(i)) * seq;
  }
  // Calls fn(j - j0, n) for the keys j in [j0, j1), n being the draw index
  // of key j in the row whose dropRow is `row`. Inside each run of the key
  // map the index is a plain j + offset, which keeps the loops as simple as
  // they were without cp (one run there).
  template <typename F>
  BRAID_INLINE void forKeyDraws(int64_t row, int64_t j0, int64_t j1,
                                F &&fn) const {
    for (int64_t j = j0; j < j1;) {
      const int64_t stop = std::min(j1, kmap.runEnd(j));
      const int64_t offset = row + kmap.at(j) - j;
      for (; j < stop; ++j)
        fn(j - j0, offset + j);
    }
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
