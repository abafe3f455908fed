// Checks of the LM head fused with cross-entropy, and multi-tensor AdamW (docs/fusion.md).
#include <climits>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

// x [..., D], weight [V, D], labels [...] and an optional positive `chunk`:
// what the linear_cross_entropy kernels share.
absl::Status checkHead(const LaunchChecker &c) {
  Operand x = c.in(0), w = c.in(1), labels = c.in(2);
  BRAID_KERNEL_TRY(c.floatStorage(x));
  BRAID_KERNEL_TRY(c.sameDtype(w, x));
  BRAID_KERNEL_TRY(c.dtype(labels, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., D]"));
  BRAID_KERNEL_TRY(c.rank(w, 2, "[V, D]"));
  const int64_t d = x.lastDim(), v = w.dim(0);
  if (w.dim(1) != d)
    return c.error(absl::StrCat(w.label, " has shape ", shapeString(w.shape()),
                                ", expected [V, ", d,
                                "] to match input 0's last dimension ", d));
  if (v == 0)
    return c.error(absl::StrCat(w.label, " has shape ", shapeString(w.shape()),
                                "; the vocabulary V must not be empty"));
  const std::vector<int64_t> rows = leadingDims(*x.desc);
  int64_t n = 1;
  for (int64_t r : rows)
    n *= r;
  if (n == 0)
    return c.error(absl::StrCat(x.label, " has shape ", shapeString(x.shape()),
                                " with no rows; the mean loss of no tokens is "
                                "undefined"));
  if (n > INT_MAX || v > INT_MAX || d > INT_MAX)
    return c.error(absl::StrCat(
        "the CPU GEMM takes at most ", INT_MAX, " rows and columns; ",
        x.label, " has shape ", shapeString(x.shape()), " and ", w.label,
        " has shape ", shapeString(w.shape())));
  BRAID_KERNEL_TRY(
      c.shape(labels, rows, "(the leading dimensions of input 0)"));
  return c.intParamOr("chunk", 1, 1, INT64_MAX).status();
}

absl::Status checkLinearCrossEntropy(const KernelSignature &sig) {
  LaunchChecker c("linear_cross_entropy", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "weight", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"loss", "lse"}));
  BRAID_KERNEL_TRY(checkHead(c));
  BRAID_KERNEL_TRY(c.f32(c.out(0), "the loss stays f32 in every plan"));
  BRAID_KERNEL_TRY(c.f32(c.out(1), kStatistics));
  BRAID_KERNEL_TRY(c.shape(c.out(0), {}, "(a scalar)"));
  return c.shape(c.out(1), leadingDims(*c.in(0).desc),
                 "(the leading dimensions of input 0)");
}

// Outputs dx, dW and the workspace from index `out`, and the parameters
// of the kernels with the gradient.
absl::Status checkHeadGrads(const LaunchChecker &c, int out) {
  BRAID_KERNEL_TRY(c.sameDtype(c.out(out), c.in(0)));
  BRAID_KERNEL_TRY(c.sameShape(c.out(out), c.in(0)));
  BRAID_KERNEL_TRY(c.gradWeightDtype(c.out(out + 1), c.in(0)));
  BRAID_KERNEL_TRY(c.sameShape(c.out(out + 1), c.in(1)));
  // One chunk of R rows of f32 logits, 1 <= R <= the rows of x.
  Operand ws = c.out(out + 2);
  BRAID_KERNEL_TRY(c.f32(ws, "the logits of a chunk are f32"));
  BRAID_KERNEL_TRY(c.rank(ws, 2, "[R, V]"));
  int64_t rows = 1;
  for (int64_t r : leadingDims(*c.in(0).desc))
    rows *= r;
  if (ws.dim(1) != c.in(1).dim(0) || ws.dim(0) < 1 || ws.dim(0) > rows)
    return c.error(absl::StrCat(ws.label, " has shape ",
                                shapeString(ws.shape()), ", expected [R, ",
                                c.in(1).dim(0), "] with 1 <= R <= ", rows,
                                " (the rows of input 0)"));
  BRAID_KERNEL_TRY(c.accumulateParam());
  return c.floatParam("scale").status();
}

absl::Status checkLinearCrossEntropyWithGrad(const KernelSignature &sig) {
  LaunchChecker c("linear_cross_entropy_with_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "weight", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"loss", "dx", "dweight", "workspace"}));
  BRAID_KERNEL_TRY(checkHead(c));
  BRAID_KERNEL_TRY(c.f32(c.out(0), "the loss stays f32 in every plan"));
  BRAID_KERNEL_TRY(c.shape(c.out(0), {}, "(a scalar)"));
  return checkHeadGrads(c, 1);
}

absl::Status checkLinearCrossEntropyStats(const KernelSignature &sig) {
  LaunchChecker c("linear_cross_entropy_stats", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "weight", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"stats"}));
  BRAID_KERNEL_TRY(checkHead(c));
  BRAID_KERNEL_TRY(c.f32(c.out(0), kStatistics));
  std::vector<int64_t> shape = leadingDims(*c.in(0).desc);
  shape.push_back(3);
  return c.shape(c.out(0), shape,
                 "(the leading dimensions of input 0, then 3)");
}

absl::Status checkLinearCrossEntropyGrad(const KernelSignature &sig) {
  LaunchChecker c("linear_cross_entropy_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "weight", "labels", "lse"}));
  BRAID_KERNEL_TRY(c.outputs({"dx", "dweight", "workspace"}));
  BRAID_KERNEL_TRY(checkHead(c));
  BRAID_KERNEL_TRY(c.f32(c.in(3), kStatistics));
  BRAID_KERNEL_TRY(c.shape(c.in(3), leadingDims(*c.in(0).desc),
                           "(the leading dimensions of input 0)"));
  return checkHeadGrads(c, 0);
}

absl::Status checkRange(const LaunchChecker &c, absl::string_view name,
                        double lo, bool loOpen) {
  absl::StatusOr<double> v = c.floatParam(name);
  if (!v.ok())
    return v.status();
  if (loOpen ? *v > lo : *v >= lo)
    return absl::OkStatus();
  return c.error(absl::StrCat("parameter '", name, "' is ", *v, ", expected ",
                              lo, loOpen ? " < " : " <= ", name));
}

absl::Status checkMultiAdamw(const KernelSignature &sig) {
  LaunchChecker c("multi_adamw", sig);
  const int n = c.numIns() - 2;
  if (n < 1 || c.numOuts() != 3 * n)
    return c.error(absl::StrCat(
        "expected n gradients, the norm and the skip flag as inputs and n "
        "parameters, n exp_avg and n exp_avg_sq as outputs (n >= 1); got ",
        c.numIns(), " inputs and ", c.numOuts(), " outputs"));
  BRAID_KERNEL_TRY(c.variadicInputs("grad, norm or skip"));
  BRAID_KERNEL_TRY(c.variadicOutputs("param, exp_avg or exp_avg_sq"));
  BRAID_KERNEL_TRY(c.allF32("gradients, parameters and AdamW moments stay "
                            "f32 in every plan"));
  BRAID_KERNEL_TRY(c.shape(c.in(n), {}, "(a scalar, from grad_norm)"));
  BRAID_KERNEL_TRY(c.shape(c.in(n + 1), {}, "(a scalar, from step_guard)"));
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k)
      BRAID_KERNEL_TRY(c.sameShape(c.out(k * n + i), c.in(i)));
  BRAID_KERNEL_TRY(checkRange(c, "beta1", 0, false));
  BRAID_KERNEL_TRY(checkRange(c, "beta2", 0, false));
  for (absl::string_view beta : {"beta1", "beta2"})
    if (*c.floatParam(beta) >= 1)
      return c.error(absl::StrCat("parameter '", beta, "' is ",
                                  *c.floatParam(beta), ", expected 0 <= ",
                                  beta, " < 1"));
  BRAID_KERNEL_TRY(checkRange(c, "eps", 0, true));
  BRAID_KERNEL_TRY(checkRange(c, "weight_decay", 0, false));
  BRAID_KERNEL_TRY(checkRange(c, "grad_clip", 0, false));
  return c.intParam("decayed", 0, n).status();
}

} // namespace

absl::Span<const NamedCheck> fusedLossChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"linear_cross_entropy", checkLinearCrossEntropy},
      {"linear_cross_entropy_with_grad", checkLinearCrossEntropyWithGrad},
      {"linear_cross_entropy_stats", checkLinearCrossEntropyStats},
      {"linear_cross_entropy_grad", checkLinearCrossEntropyGrad},
      {"multi_adamw", checkMultiAdamw},
  };
  return kChecks;
}

} // namespace braid::checks
