#include "kernels/checks/SharedChecks.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace braid::checks {

absl::Status checkEps(const LaunchChecker &c) {
  absl::StatusOr<double> eps = c.floatParam("eps");
  if (!eps.ok())
    return eps.status();
  if (*eps <= 0)
    return c.error(absl::StrCat("parameter 'eps' is ", *eps,
                                ", expected a positive number"));
  return absl::OkStatus();
}

absl::Status checkRows(const LaunchChecker &c, const Operand &x) {
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., D]"));
  if (x.lastDim() == 0)
    return c.error(absl::StrCat(x.label, " has shape ", shapeString(x.shape()),
                                "; the normalised dimension D must not be "
                                "empty"));
  return absl::OkStatus();
}

absl::Status checkNormVector(const LaunchChecker &c, const Operand &op,
                             const Operand &x) {
  return c.shape(op, {x.lastDim()}, "([D], x's last dimension)");
}

absl::Status checkStats(const LaunchChecker &c, const Operand &op,
                        const Operand &x) {
  BRAID_KERNEL_TRY(c.f32(op, kStatistics));
  return c.shape(op, leadingDims(*x.desc), "(x's leading dimensions)");
}

absl::Status checkRopeHeads(const LaunchChecker &c, const Operand &y) {
  absl::StatusOr<int64_t> h = c.intParam("num_heads", 1, INT32_MAX);
  if (!h.ok())
    return h.status();
  if (y.dim(2) % *h != 0)
    return c.error(absl::StrCat(y.label, " has shape ", shapeString(y.shape()),
                                "; its last dimension is not a multiple of "
                                "num_heads (",
                                *h, ")"));
  const int64_t dh = y.dim(2) / *h;
  if (dh % 2 != 0 || dh == 0)
    return c.error(absl::StrCat("head dimension ", y.dim(2), " / ", *h, " = ",
                                dh,
                                " is not a positive even number; rotate-half "
                                "pairs element i with i + Dh/2"));
  absl::StatusOr<double> theta = c.floatParam("theta");
  if (!theta.ok())
    return theta.status();
  if (*theta <= 0)
    return c.error(absl::StrCat("parameter 'theta' is ", *theta,
                                ", expected a positive number"));
  absl::StatusOr<int64_t> cp = c.intParamOr("cp", 0, 0, 1);
  if (!cp.ok())
    return cp.status();
  if (*cp == 1 && y.dim(1) % 2 != 0)
    return c.error(absl::StrCat(
        y.label, " has shape ", shapeString(y.shape()), "; with cp = 1 its ",
        "sequence dimension must be even: a CP rank holds two halves of "
        "equal length (chunks r and 2P - 1 - r of the sequence)"));
  return absl::OkStatus();
}

absl::StatusOr<HeadCounts> checkHeadCounts(const LaunchChecker &c) {
  absl::StatusOr<int64_t> h = c.intParam("num_heads", 1, INT32_MAX);
  if (!h.ok())
    return h.status();
  absl::StatusOr<int64_t> hkv = c.intParam("num_kv_heads", 1, INT32_MAX);
  if (!hkv.ok())
    return hkv.status();
  if (*h % *hkv != 0)
    return c.error(absl::StrCat("num_kv_heads (", *hkv,
                                ") does not divide num_heads (", *h, ")"));
  return HeadCounts{*h, *hkv};
}

absl::StatusOr<QkvDims> checkQkv(const LaunchChecker &c, const Operand &q,
                                 const Operand &k, const Operand &v) {
  BRAID_KERNEL_TRY(c.rank(q, 3, "[B, S, H*Dh]"));
  absl::StatusOr<HeadCounts> heads = checkHeadCounts(c);
  if (!heads.ok())
    return heads.status();
  const int64_t h = heads->heads, hkv = heads->kvHeads;
  if (q.dim(2) % h != 0 || q.dim(2) == 0)
    return c.error(absl::StrCat(q.label, " has shape ", shapeString(q.shape()),
                                "; its last dimension must be num_heads (", h,
                                ") times a head dimension of at least 1"));
  const int64_t b = q.dim(0), s = q.dim(1), dh = q.dim(2) / h;
  absl::StatusOr<int64_t> cp = c.intParamOr("cp", 0, 0, 1);
  if (!cp.ok())
    return cp.status();
  absl::StatusOr<int64_t> step =
      c.intParamOr("cp_kv_step", -1, INT64_MIN, INT64_MAX);
  if (!step.ok())
    return step.status();
  if (*step < -1)
    return c.error(absl::StrCat(
        "parameter 'cp_kv_step' is ", *step,
        ", expected -1 (k and v hold the whole sequence) or a ring step "
        "t >= 0 (they hold the part of CP rank cpRank - t)"));
  QkvDims dims{b, s, s, h, dh, *cp != 0, *cp != 0 && *step >= 0, s};
  if (*step >= 0 && !dims.cp)
    return c.error(absl::StrCat("parameter 'cp_kv_step' is ", *step,
                                ", which needs cp = 1"));
  if (dims.cp && s % 2 != 0)
    return c.error(absl::StrCat(
        q.label, " has shape ", shapeString(q.shape()), "; with cp = 1 its ",
        "sequence dimension must be even: a CP rank holds two halves of "
        "equal length (chunks r and 2P - 1 - r of the sequence)"));
  std::string kvWhy =
      absl::StrCat("([B, S, num_kv_heads * Dh] with Dh = ", dh, ")");
  if (dims.ring)
    kvWhy = absl::StrCat("([B, Sq, num_kv_heads * Dh] with Dh = ", dh,
                         ": in a ring step (cp_kv_step >= 0) k and v hold "
                         "one CP rank's part, as long as q's)");
  if (dims.cp && !dims.ring) {
    // All-gathered k and v: the whole sequence, P times q's part.
    BRAID_KERNEL_TRY(c.rank(k, 3, "[B, Sk, num_kv_heads*Dh]"));
    const int64_t sk = k.dim(1);
    if (s > 0 ? sk <= 0 || sk % s != 0 : sk != 0)
      return c.error(absl::StrCat(
          k.label, " has shape ", shapeString(k.shape()), ", expected [", b,
          ", P * ", s, ", ", hkv * dh,
          "] for an integer P >= 1: with cp = 1 and cp_kv_step = -1 k and v "
          "hold the whole sequence, P times q's ",
          s, " positions"));
    dims.keys = dims.positions = sk;
    kvWhy = absl::StrCat("([B, Sk, num_kv_heads * Dh] with Dh = ", dh,
                         ": the whole sequence)");
  }
  const std::vector<int64_t> kvShape = {b, dims.keys, hkv * dh};
  BRAID_KERNEL_TRY(c.shape(k, kvShape, kvWhy));
  BRAID_KERNEL_TRY(c.shape(v, kvShape, kvWhy));
  if (dims.ring)
    dims.positions = 0;
  return dims;
}

absl::Status checkAttentionDropout(const LaunchChecker &c) {
  absl::StatusOr<double> p = c.floatParamOr("dropout", 0.0);
  if (!p.ok())
    return p.status();
  if (*p < 0 || *p >= 1)
    return c.error(absl::StrCat("parameter 'dropout' is ", *p,
                                ", expected 0 <= dropout < 1"));
  if (*p > 0)
    BRAID_KERNEL_TRY(c.intParam("rng_offset", 0, INT64_MAX).status());
  return c.intParamOr("head_shard", 0, 0, 1).status();
}

absl::Status checkTpDim(const LaunchChecker &c, const Operand &x,
                        int64_t limit, absl::string_view why) {
  const int64_t hi = (limit < 0 ? x.rank() : limit) - 1;
  absl::StatusOr<int64_t> dim =
      c.intParamOr("tp_dim", -1, INT64_MIN, INT64_MAX);
  if (!dim.ok())
    return dim.status();
  if (*dim < -1 || *dim > hi)
    return c.error(absl::StrCat("parameter 'tp_dim' is ", *dim,
                                ", expected -1 or a dimension of ", x.label,
                                " (rank ", x.rank(), ") below ", hi + 1, why));
  return absl::OkStatus();
}

absl::Status checkCpDim(const LaunchChecker &c, const Operand &x, int64_t limit,
                        absl::string_view why) {
  const int64_t hi = (limit < 0 ? x.rank() : limit) - 1;
  absl::StatusOr<int64_t> dim =
      c.intParamOr("cp_dim", -1, INT64_MIN, INT64_MAX);
  if (!dim.ok())
    return dim.status();
  if (*dim < -1 || *dim > hi)
    return c.error(absl::StrCat("parameter 'cp_dim' is ", *dim,
                                ", expected -1 or a dimension of ", x.label,
                                " (rank ", x.rank(), ") below ", hi + 1, why));
  if (*dim < 0)
    return absl::OkStatus();
  const int64_t tpDim =
      c.intParamOr("tp_dim", -1, INT64_MIN, INT64_MAX).value_or(-1);
  if (tpDim >= 0 && tpDim != *dim)
    return c.error(absl::StrCat(
        "parameters 'cp_dim' (", *dim, ") and 'tp_dim' (", tpDim,
        ") name different dimensions; a TP rank's part of a CP rank's part "
        "of the sequence is cut along the same dimension"));
  if (tpDim < 0 && x.dim(*dim) % 2 != 0)
    return c.error(absl::StrCat(
        x.label, " has shape ", shapeString(x.shape()),
        "; with cp_dim = ", *dim,
        " that dimension must be even: a CP rank holds two halves of "
        "equal length (chunks r and 2P - 1 - r of the whole)"));
  return absl::OkStatus();
}

absl::Status checkAttentionMasks(const LaunchChecker &c, const QkvDims &dims,
                                 int insWithoutSegments) {
  // The positions the masks index; in a ring step those of the segment ids
  // when given (any multiple of Sq), else unbounded.
  int64_t positions = dims.ring ? INT64_MAX : dims.positions;
  if (c.numIns() > insWithoutSegments) {
    Operand seg = c.in(c.numIns() - 1);
    BRAID_KERNEL_TRY(c.dtype(seg, DType::kI32));
    if (dims.ring) {
      BRAID_KERNEL_TRY(c.rank(seg, 2, "[B, S]"));
      const int64_t n = seg.dim(1), sq = dims.seq;
      if (seg.dim(0) != dims.batch || (sq > 0 ? n <= 0 || n % sq != 0 : n != 0))
        return c.error(absl::StrCat(
            seg.label, " has shape ", shapeString(seg.shape()), ", expected [",
            dims.batch, ", P * ", sq,
            "] for an integer P >= 1: in a ring step (cp_kv_step >= 0) the "
            "ids of the whole sequence, P times q's ",
            sq, " positions"));
      positions = n;
    } else {
      BRAID_KERNEL_TRY(
          c.shape(seg, {dims.batch, dims.positions},
                  dims.cp ? "([B, S], the whole sequence's)" : "([B, S])"));
    }
  }
  absl::StatusOr<int64_t> causal = c.intParam("causal", 0, 1);
  if (!causal.ok())
    return causal.status();
  absl::StatusOr<int64_t> prefix = c.intParamOr("prefix", 0, 0, positions);
  if (!prefix.ok())
    return prefix.status();
  if (*prefix > 0 && *causal == 0)
    return c.error("parameter 'prefix' needs causal = 1");
  return absl::OkStatus();
}

} // namespace braid::checks
