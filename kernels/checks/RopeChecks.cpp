// Checks of rope and rope_grad_input.
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

absl::Status checkRopeLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "rope_grad_input" : "rope", sig);
  BRAID_KERNEL_TRY(c.inputs({grad ? "dy" : "x"}));
  BRAID_KERNEL_TRY(c.outputs({grad ? "dx" : "y"}));
  Operand x = c.in(0);
  BRAID_KERNEL_TRY(c.floatStorage(x));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), x));
  BRAID_KERNEL_TRY(c.rank(x, 3, "[B, S, H*Dh]"));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), x));
  absl::StatusOr<int64_t> h = c.intParam("num_heads", 1, INT32_MAX);
  if (!h.ok())
    return h.status();
  if (x.dim(2) % *h != 0)
    return c.error(absl::StrCat(x.label, " has shape ", shapeString(x.shape()),
                                "; its last dimension is not a multiple of "
                                "num_heads (",
                                *h, ")"));
  const int64_t dh = x.dim(2) / *h;
  if (dh % 2 != 0 || dh == 0)
    return c.error(absl::StrCat("head dimension ", x.dim(2), " / ", *h, " = ",
                                dh,
                                " is not a positive even number; rotate-half "
                                "pairs element i with i + Dh/2"));
  absl::StatusOr<double> theta = c.floatParam("theta");
  if (!theta.ok())
    return theta.status();
  if (*theta <= 0)
    return c.error(absl::StrCat("parameter 'theta' is ", *theta,
                                ", expected a positive number"));
  return absl::OkStatus();
}

absl::Status checkRope(const KernelSignature &sig) {
  return checkRopeLaunch(sig, false);
}
absl::Status checkRopeGradInput(const KernelSignature &sig) {
  return checkRopeLaunch(sig, true);
}

} // namespace

absl::Span<const NamedCheck> ropeChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"rope", checkRope},
      {"rope_grad_input", checkRopeGradInput},
  };
  return kChecks;
}

} // namespace braid::checks
