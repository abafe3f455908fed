// Checks that several kernel families share: norm rows and statistics, RoPE
// heads, attention heads and the q/k/v layout, attention dropout.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {

inline constexpr absl::string_view kStatistics =
    "per-row statistics stay f32 in every plan";

// The required parameter `eps`, above 0.
absl::Status checkEps(const LaunchChecker &c);
// x [..., D] with a non-empty D.
absl::Status checkRows(const LaunchChecker &c, const Operand &x);
// A gamma-like operand of x [..., D]: shape [D].
absl::Status checkNormVector(const LaunchChecker &c, const Operand &op,
                             const Operand &x);
// Per-row statistics of x: f32, shaped as x's leading dimensions.
absl::Status checkStats(const LaunchChecker &c, const Operand &op,
                        const Operand &x);

// With `y` of rank 3 [B, S, H*Dh]: the parameter num_heads divides the last
// dimension into an even, non-empty head dimension, and theta is positive.
// The optional `cp` (0 or 1) says S is a CP rank's part of the sequence:
// then S is even.
absl::Status checkRopeHeads(const LaunchChecker &c, const Operand &y);

struct HeadCounts {
  int64_t heads = 0;
  int64_t kvHeads = 0;
};
// The parameters num_heads and num_kv_heads; the second divides the first.
absl::StatusOr<HeadCounts> checkHeadCounts(const LaunchChecker &c);

struct QkvDims {
  int64_t batch = 0;
  int64_t seq = 0;  // query rows Sq
  int64_t keys = 0; // keys Sk: Sq unless k and v hold the whole sequence
  int64_t heads = 0;
  int64_t headDim = 0;
  bool cp = false;   // the parameter `cp`
  bool ring = false; // cp with cp_kv_step >= 0: k and v hold one rank's part
  // The positions the masks index (segment ids [B, positions], prefix in
  // [0, positions]): Sq, or Sk with cp; unknown (0) in a ring step, where it
  // is Sq times the CP size.
  int64_t positions = 0;
};
// q [B, Sq, H*Dh] with k and v [B, Sk, num_kv_heads*Dh], Sk = Sq. With the
// optional `cp` = 1 (docs/kernels.md, "Context parallel") Sq is even (a CP
// rank's two halves), and with the optional `cp_kv_step` = -1 (its
// default) k and v hold the whole sequence: Sk a positive multiple of Sq;
// with cp_kv_step >= 0 they hold another rank's part, Sk = Sq.
absl::StatusOr<QkvDims> checkQkv(const LaunchChecker &c, const Operand &q,
                                 const Operand &k, const Operand &v);

// The optional parameter `dropout` in [0, 1); rng_offset is required when it
// is above 0. Also the optional `head_shard` (0 or 1): q/k/v hold one TP
// rank's slice of the heads, num_heads and num_kv_heads count the slice,
// and the dropout draws use the whole tensor's head index (which the check
// cannot verify: it knows no TP coordinate).
absl::Status checkAttentionDropout(const LaunchChecker &c);

// The optional `tp_dim` (default -1) of a kernel with dropout draws over
// `x`: -1 (x is the whole tensor) or a dimension d of x, below `limit`
// (x's rank when absent), along which x is one TP rank's part of the whole
// tensor; the draws use the whole tensor's element index (docs/kernels.md,
// "Sequence parallel"). The check cannot know the TP size.
absl::Status checkTpDim(const LaunchChecker &c, const Operand &x,
                        int64_t limit = -1, absl::string_view why = "");

// The optional `cp_dim` (default -1) of a kernel with dropout draws over
// `x`: -1, or a dimension d of x below `limit` (x's rank when absent) along
// which x holds this CP rank's load-balanced part of the whole tensor
// (docs/kernels.md, "Context parallel"), so of even length (its two
// halves). With `tp_dim` also set the two name the same dimension: x is then
// a TP rank's contiguous part of the CP rank's part, whose length the check
// cannot know.
absl::Status checkCpDim(const LaunchChecker &c, const Operand &x,
                        int64_t limit = -1, absl::string_view why = "");

// The masks of attention and flash_attention: `causal` (0 or 1), the
// optional `prefix` in [0, positions] (causal only) and, when `numIns`
// exceeds `insWithoutSegments`, segment ids [B, positions] (i32) as the
// last input; in a ring step, whose sequence length the check cannot know,
// [B, n * Sq] for any n >= 1.
absl::Status checkAttentionMasks(const LaunchChecker &c, const QkvDims &dims,
                                 int insWithoutSegments);

} // namespace braid::checks
