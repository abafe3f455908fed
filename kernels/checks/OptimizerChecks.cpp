// Checks of grad_norm, step_guard and adamw, which read and write f32 only:
// they work on the gradients, parameters and moments, f32 in every plan, and
// on f32 scalars.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

absl::Status checkGradNorm(const KernelSignature &sig) {
  LaunchChecker c("grad_norm", sig);
  BRAID_KERNEL_TRY(c.variadicInputs("grad"));
  BRAID_KERNEL_TRY(c.outputs({"norm"}));
  BRAID_KERNEL_TRY(
      c.allF32("gradients and their norm stay f32 in every plan"));
  // A rank's part of a sharded gradient's norm is [1], the element an
  // all-gather stacks.
  if (sig.outs.size() == 1 && sig.outs[0].shape == std::vector<int64_t>{1})
    return absl::OkStatus();
  return c.shape(c.out(0), {}, "(a scalar, or [1])");
}

absl::Status checkStepGuard(const KernelSignature &sig) {
  LaunchChecker c("step_guard", sig);
  BRAID_KERNEL_TRY(c.inputs({"loss_sum", "norm"}));
  BRAID_KERNEL_TRY(c.outputs({"skip"}));
  BRAID_KERNEL_TRY(c.allF32("the step's loss, norm and verdict are f32"));
  for (int i = 0; i < 2; ++i)
    BRAID_KERNEL_TRY(c.shape(c.in(i), {}, "(a scalar)"));
  return c.shape(c.out(0), {}, "(a scalar)");
}

absl::Status checkRange(const LaunchChecker &c, absl::string_view name,
                        double lo, bool loOpen, double hi, bool hiOpen) {
  absl::StatusOr<double> v = c.floatParam(name);
  if (!v.ok())
    return v.status();
  const bool tooLow = loOpen ? *v <= lo : *v < lo;
  const bool tooHigh = hiOpen ? *v >= hi : *v > hi;
  if (!tooLow && !tooHigh)
    return absl::OkStatus();
  std::string range = absl::StrCat(lo, loOpen ? " < " : " <= ", name);
  if (std::isfinite(hi))
    absl::StrAppend(&range, hiOpen ? " < " : " <= ", hi);
  return c.error(
      absl::StrCat("parameter '", name, "' is ", *v, ", expected ", range));
}

absl::Status checkAdamw(const KernelSignature &sig) {
  LaunchChecker c("adamw", sig);
  BRAID_KERNEL_TRY(c.inputs({"grad", "norm", "skip"}));
  BRAID_KERNEL_TRY(c.outputs({"param", "exp_avg", "exp_avg_sq"}));
  BRAID_KERNEL_TRY(c.allF32("gradients, parameters and AdamW moments stay "
                            "f32 in every plan"));
  BRAID_KERNEL_TRY(c.shape(c.in(1), {}, "(a scalar, from grad_norm)"));
  BRAID_KERNEL_TRY(c.shape(c.in(2), {}, "(a scalar, from step_guard)"));
  for (int i = 0; i < 3; ++i)
    BRAID_KERNEL_TRY(c.sameShape(c.out(i), c.in(0)));
  const double kInf = INFINITY;
  BRAID_KERNEL_TRY(checkRange(c, "beta1", 0, false, 1, true));
  BRAID_KERNEL_TRY(checkRange(c, "beta2", 0, false, 1, true));
  BRAID_KERNEL_TRY(checkRange(c, "eps", 0, true, kInf, false));
  BRAID_KERNEL_TRY(checkRange(c, "weight_decay", 0, false, kInf, false));
  return checkRange(c, "grad_clip", 0, false, kInf, false);
}

} // namespace

absl::Span<const NamedCheck> optimizerChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"grad_norm", checkGradNorm},
      {"step_guard", checkStepGuard},
      {"adamw", checkAdamw},
  };
  return kChecks;
}

} // namespace braid::checks
