// Checks of layer_norm and rms_norm with their input and weight gradients.
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

constexpr absl::string_view kStatistics =
    "per-row statistics stay f32 in every plan";

absl::Status checkEps(const LaunchChecker &c) {
  absl::StatusOr<double> eps = c.floatParam("eps");
  if (!eps.ok())
    return eps.status();
  if (*eps <= 0)
    return c.error(absl::StrCat("parameter 'eps' is ", *eps,
                                ", expected a positive number"));
  return absl::OkStatus();
}

// With x [..., D]: gamma-like operands are [D], statistics are x's leading
// dimensions.
absl::Status checkVector(const LaunchChecker &c, const Operand &op,
                         const Operand &x) {
  return c.shape(op, {x.lastDim()}, "([D], x's last dimension)");
}
// Statistics are f32 in every plan.
absl::Status checkStats(const LaunchChecker &c, const Operand &op,
                        const Operand &x) {
  BRAID_KERNEL_TRY(c.f32(op, kStatistics));
  return c.shape(op, leadingDims(*x.desc), "(x's leading dimensions)");
}

absl::Status checkRows(const LaunchChecker &c, const Operand &x) {
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., D]"));
  if (x.lastDim() == 0)
    return c.error(absl::StrCat(x.label, " has shape ", shapeString(x.shape()),
                                "; the normalised dimension D must not be "
                                "empty"));
  return absl::OkStatus();
}

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
    BRAID_KERNEL_TRY(checkVector(c, c.in(i), x));
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
  BRAID_KERNEL_TRY(checkVector(c, c.in(2), x));
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
    BRAID_KERNEL_TRY(checkVector(c, c.out(i), x));
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
