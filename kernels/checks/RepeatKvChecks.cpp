// Checks of repeat_kv and repeat_kv_grad_input.
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

absl::Status checkRepeatKvLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "repeat_kv_grad_input" : "repeat_kv", sig);
  BRAID_KERNEL_TRY(c.inputs({grad ? "dy" : "x"}));
  BRAID_KERNEL_TRY(c.outputs({grad ? "dx" : "y"}));
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), c.in(0)));
  absl::StatusOr<HeadCounts> heads = checkHeadCounts(c);
  if (!heads.ok())
    return heads.status();
  const int64_t h = heads->heads, hkv = heads->kvHeads;
  // The narrow side is x (forward) or dx (backward).
  Operand wide = grad ? c.in(0) : c.out(0);
  Operand narrow = grad ? c.out(0) : c.in(0);
  BRAID_KERNEL_TRY(c.rank(narrow, 3, "[B, S, num_kv_heads*Dh]"));
  if (narrow.dim(2) % hkv != 0)
    return c.error(absl::StrCat(
        narrow.label, " has shape ", shapeString(narrow.shape()),
        "; its last dimension must be a multiple of num_kv_heads (", hkv, ")"));
  const int64_t dh = narrow.dim(2) / hkv;
  return c.shape(wide, {narrow.dim(0), narrow.dim(1), h * dh},
                 absl::StrCat("([B, S, num_heads * Dh] with Dh = ", dh, ")"));
}

absl::Status checkRepeatKv(const KernelSignature &sig) {
  return checkRepeatKvLaunch(sig, false);
}
absl::Status checkRepeatKvGradInput(const KernelSignature &sig) {
  return checkRepeatKvLaunch(sig, true);
}

} // namespace

absl::Span<const NamedCheck> repeatKvChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"repeat_kv", checkRepeatKv},
      {"repeat_kv_grad_input", checkRepeatKvGradInput},
  };
  return kChecks;
}

} // namespace braid::checks
