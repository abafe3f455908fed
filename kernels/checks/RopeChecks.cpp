// Checks of rope and rope_grad_input.
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

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
  return checkRopeHeads(c, x);
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
