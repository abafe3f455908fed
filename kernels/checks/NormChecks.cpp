// Checks of layer_norm and rms_norm with their input and weight gradients.
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

absl::Status checkNormForward(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "layer_norm" : "rms_norm", sig);
  if (layer) {
    BRAID_KERNEL_TRY(c.inputs({"x", "gamma", "beta"}));
    BRAID_KERNEL_TRY(c.outputs({"y", "mean", "rstd"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"x", "gamma"}));
    BRAID_KERNEL_TRY(c.outputs({"y", "rstd"}));
  }
  Operand x = c.in(0);
  BRAID_KERNEL_TRY(c.floatStorage(x));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(i), x));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), x));
  BRAID_KERNEL_TRY(checkRows(c, x));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(checkNormVector(c, c.in(i), x));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), x));
  for (int i = 1; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.out(i), x));
  return checkEps(c);
}

absl::Status checkLayerNorm(const KernelSignature &sig) {
  return checkNormForward(sig, true);
}
absl::Status checkRmsNorm(const KernelSignature &sig) {
  return checkNormForward(sig, false);
}

absl::Status checkNormGradInput(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "layer_norm_grad_input" : "rms_norm_grad_input", sig);
  if (layer)
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "gamma", "mean", "rstd"}));
  else
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "gamma", "rstd"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  Operand dy = c.in(0), x = c.in(1);
  BRAID_KERNEL_TRY(c.floatStorage(dy));
  BRAID_KERNEL_TRY(c.sameDtype(x, dy));
  BRAID_KERNEL_TRY(c.sameDtype(c.in(2), dy));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), dy));
  BRAID_KERNEL_TRY(checkRows(c, x));
  BRAID_KERNEL_TRY(c.sameShape(dy, x));
  BRAID_KERNEL_TRY(checkNormVector(c, c.in(2), x));
  for (int i = 3; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.in(i), x));
  return c.sameShape(c.out(0), x);
}

absl::Status checkLayerNormGradInput(const KernelSignature &sig) {
  return checkNormGradInput(sig, true);
}
absl::Status checkRmsNormGradInput(const KernelSignature &sig) {
  return checkNormGradInput(sig, false);
}

absl::Status checkNormGradWeight(const KernelSignature &sig, bool layer) {
  LaunchChecker c(layer ? "layer_norm_grad_weight" : "rms_norm_grad_weight",
                  sig);
  if (layer) {
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "mean", "rstd"}));
    BRAID_KERNEL_TRY(c.outputs({"dgamma", "dbeta"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"dy", "x", "rstd"}));
    BRAID_KERNEL_TRY(c.outputs({"dgamma"}));
  }
  Operand dy = c.in(0), x = c.in(1);
  BRAID_KERNEL_TRY(c.floatStorage(dy));
  BRAID_KERNEL_TRY(c.sameDtype(x, dy));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.gradWeightDtype(c.out(i), dy));
  BRAID_KERNEL_TRY(c.accumulateParam());
  BRAID_KERNEL_TRY(checkRows(c, x));
  BRAID_KERNEL_TRY(c.sameShape(dy, x));
  for (int i = 2; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(checkStats(c, c.in(i), x));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(checkNormVector(c, c.out(i), x));
  return absl::OkStatus();
}

absl::Status checkLayerNormGradWeight(const KernelSignature &sig) {
  return checkNormGradWeight(sig, true);
}
absl::Status checkRmsNormGradWeight(const KernelSignature &sig) {
  return checkNormGradWeight(sig, false);
}

} // namespace

absl::Span<const NamedCheck> normChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"layer_norm", checkLayerNorm},
      {"layer_norm_grad_input", checkLayerNormGradInput},
      {"layer_norm_grad_weight", checkLayerNormGradWeight},
      {"rms_norm", checkRmsNorm},
      {"rms_norm_grad_input", checkRmsNormGradInput},
      {"rms_norm_grad_weight", checkRmsNormGradWeight},
  };
  return kChecks;
}

} // namespace braid::checks
