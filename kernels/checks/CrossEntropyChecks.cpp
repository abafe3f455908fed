// Checks of cross_entropy and cross_entropy_grad_input.
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

absl::Status checkLogitsAndLabels(const LaunchChecker &c, const Operand &logits,
                                  const Operand &labels) {
  BRAID_KERNEL_TRY(c.floatStorage(logits));
  BRAID_KERNEL_TRY(c.dtype(labels, DType::kI32));
  BRAID_KERNEL_TRY(c.minRank(logits, 1, "[..., V]"));
  if (logits.lastDim() == 0)
    return c.error(absl::StrCat(logits.label, " has shape ",
                                shapeString(logits.shape()),
                                "; the vocabulary V must not be empty"));
  if (logits.desc->rows() == 0)
    return c.error(absl::StrCat(logits.label, " has shape ",
                                shapeString(logits.shape()),
                                " with no rows; the mean loss of no tokens is "
                                "undefined"));
  return c.shape(labels, leadingDims(*logits.desc),
                 "(the leading dimensions of logits)");
}

absl::Status checkCrossEntropy(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "labels"}));
  BRAID_KERNEL_TRY(c.outputs({"loss", "lse"}));
  Operand logits = c.in(0);
  BRAID_KERNEL_TRY(checkLogitsAndLabels(c, logits, c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.out(0), "the loss stays f32 in every plan"));
  BRAID_KERNEL_TRY(c.f32(c.out(1), kStatistics));
  BRAID_KERNEL_TRY(c.shape(c.out(0), {}, "(a scalar)"));
  return c.shape(c.out(1), leadingDims(*logits.desc),
                 "(the leading dimensions of logits)");
}

absl::Status checkCrossEntropyGradInput(const KernelSignature &sig) {
  LaunchChecker c("cross_entropy_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "labels", "lse"}));
  BRAID_KERNEL_TRY(c.outputs({"dlogits"}));
  Operand logits = c.in(0);
  BRAID_KERNEL_TRY(checkLogitsAndLabels(c, logits, c.in(1)));
  BRAID_KERNEL_TRY(c.f32(c.in(2), kStatistics));
  BRAID_KERNEL_TRY(c.shape(c.in(2), leadingDims(*logits.desc),
                           "(the leading dimensions of logits)"));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), logits));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), logits));
  return c.floatParam("scale").status();
}

} // namespace

absl::Span<const NamedCheck> crossEntropyChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"cross_entropy", checkCrossEntropy},
      {"cross_entropy_grad_input", checkCrossEntropyGradInput},
  };
  return kChecks;
}

} // namespace braid::checks
