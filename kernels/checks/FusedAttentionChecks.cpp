// Checks of flash attention (docs/fusion.md).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

absl::Status checkFlashLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "flash_attention_grad_input" : "flash_attention", sig);
  if (grad) {
    BRAID_KERNEL_TRY(c.inputs({"do", "q", "k", "v", "o", "lse", "segment_ids"},
                              /*numOptional=*/1));
    BRAID_KERNEL_TRY(c.outputs({"dq", "dk", "dv"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"q", "k", "v", "segment_ids"},
                              /*numOptional=*/1));
    BRAID_KERNEL_TRY(c.outputs({"o", "lse"}));
  }
  const int qi = grad ? 1 : 0;
  const int numFloatIns = grad ? 5 : 3;
  const int lseIndex = grad ? 5 : -1;
  const bool hasSeg = c.numIns() > (grad ? 6 : 3);
  // Activations and their gradients share one storage dtype; the lse is
  // f32, the segment ids i32.
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  for (int i = 1; i < numFloatIns; ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(i), c.in(0)));
  const std::string statWhy = "per-row statistics stay f32 in every plan";
  if (grad) {
    BRAID_KERNEL_TRY(c.f32(c.in(lseIndex), statWhy));
    for (int i = 0; i < 3; ++i)
      BRAID_KERNEL_TRY(c.sameDtype(c.out(i), c.in(0)));
  } else {
    BRAID_KERNEL_TRY(c.sameDtype(c.out(0), c.in(0)));
    BRAID_KERNEL_TRY(c.f32(c.out(1), statWhy));
  }
  Operand q = c.in(qi), k = c.in(qi + 1), v = c.in(qi + 2);
  BRAID_KERNEL_TRY(c.rank(q, 3, "[B, S, H*Dh]"));

  absl::StatusOr<int64_t> h = c.intParam("num_heads", 1, INT32_MAX);
  if (!h.ok())
    return h.status();
  absl::StatusOr<int64_t> hkv = c.intParam("num_kv_heads", 1, INT32_MAX);
  if (!hkv.ok())
    return hkv.status();
  if (*h % *hkv != 0)
    return c.error(absl::StrCat("num_kv_heads (", *hkv,
                                ") does not divide num_heads (", *h, ")"));
  if (q.dim(2) % *h != 0 || q.dim(2) == 0)
    return c.error(absl::StrCat(q.label, " has shape ", shapeString(q.shape()),
                                "; its last dimension must be num_heads (", *h,
                                ") times a head dimension of at least 1"));
  const int64_t b = q.dim(0), s = q.dim(1), dh = q.dim(2) / *h;
  const std::vector<int64_t> kvShape = {b, s, *hkv * dh};
  const std::string kvWhy =
      absl::StrCat("([B, S, num_kv_heads * Dh] with Dh = ", dh, ")");
  BRAID_KERNEL_TRY(c.shape(k, kvShape, kvWhy));
  BRAID_KERNEL_TRY(c.shape(v, kvShape, kvWhy));
  const std::vector<int64_t> lseShape = {b, *h, s};
  if (grad) {
    BRAID_KERNEL_TRY(c.sameShape(c.in(0), q));
    BRAID_KERNEL_TRY(c.sameShape(c.in(4), q));
    BRAID_KERNEL_TRY(c.shape(c.in(5), lseShape, "([B, H, S])"));
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.sameShape(c.out(1), k));
    BRAID_KERNEL_TRY(c.sameShape(c.out(2), v));
  } else {
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.shape(c.out(1), lseShape, "([B, H, S])"));
  }
  if (hasSeg) {
    Operand seg = c.in(c.numIns() - 1);
    BRAID_KERNEL_TRY(c.dtype(seg, DType::kI32));
    BRAID_KERNEL_TRY(c.shape(seg, {b, s}, "([B, S])"));
  }

  absl::StatusOr<int64_t> causal = c.intParam("causal", 0, 1);
  if (!causal.ok())
    return causal.status();
  absl::StatusOr<int64_t> prefix = c.intParamOr("prefix", 0, 0, s);
  if (!prefix.ok())
    return prefix.status();
  if (*prefix > 0 && *causal == 0)
    return c.error("parameter 'prefix' needs causal = 1");
  BRAID_KERNEL_TRY(c.floatParam("scale").status());
  absl::StatusOr<double> p = c.floatParamOr("dropout", 0.0);
  if (!p.ok())
    return p.status();
  if (*p < 0 || *p >= 1)
    return c.error(absl::StrCat("parameter 'dropout' is ", *p,
                                ", expected 0 <= dropout < 1"));
  if (*p > 0)
    BRAID_KERNEL_TRY(c.intParam("rng_offset", 0, INT64_MAX).status());
  return absl::OkStatus();
}

absl::Status checkFlashAttention(const KernelSignature &sig) {
  return checkFlashLaunch(sig, false);
}
absl::Status checkFlashAttentionGradInput(const KernelSignature &sig) {
  return checkFlashLaunch(sig, true);
}

} // namespace

absl::Span<const NamedCheck> fusedAttentionChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"flash_attention", checkFlashAttention},
      {"flash_attention_grad_input", checkFlashAttentionGradInput},
  };
  return kChecks;
}

} // namespace braid::checks
