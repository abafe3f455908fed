// Checks of fused norm, activation, dropout and RoPE kernels (docs/fusion.md).
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {

absl::Span<const NamedCheck> fusedElementwiseChecks() {
  return {};
}

} // namespace braid::checks
