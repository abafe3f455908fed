// Checks of attention and attention_grad_input.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

absl::Status checkAttentionLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "attention_grad_input" : "attention", sig);
  if (grad) {
    BRAID_KERNEL_TRY(c.inputs({"do", "q", "k", "v", "probs"}));
    BRAID_KERNEL_TRY(c.outputs({"dq", "dk", "dv"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"q", "k", "v"}));
    BRAID_KERNEL_TRY(c.outputs({"o", "probs"}));
  }
  // Every operand, probs included, is an activation or its gradient: one
  // storage dtype for all.
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(i), c.in(0)));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.out(i), c.in(0)));
  const int qi = grad ? 1 : 0;
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
  const std::vector<int64_t> probsShape = {b, *h, s, s};
  if (grad) {
    BRAID_KERNEL_TRY(c.sameShape(c.in(0), q));
    BRAID_KERNEL_TRY(c.shape(c.in(4), probsShape, "([B, H, S, S])"));
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.sameShape(c.out(1), k));
    BRAID_KERNEL_TRY(c.sameShape(c.out(2), v));
  } else {
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.shape(c.out(1), probsShape, "([B, H, S, S])"));
  }

  BRAID_KERNEL_TRY(c.intParam("causal", 0, 1).status());
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

absl::Status checkAttention(const KernelSignature &sig) {
  return checkAttentionLaunch(sig, false);
}
absl::Status checkAttentionGradInput(const KernelSignature &sig) {
  return checkAttentionLaunch(sig, true);
}

} // namespace

absl::Span<const NamedCheck> attentionChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"attention", checkAttention},
      {"attention_grad_input", checkAttentionGradInput},
  };
  return kChecks;
}

} // namespace braid::checks
