// Checks of the element-wise kernels: gelu, swiglu, add, accumulate, fill,
// dropout, split (with their gradients) and cast.
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

// Every input and output with the dtype and the shape of input 0.
absl::Status checkSameShapes(LaunchChecker &c) {
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(i), c.in(0)));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.out(i), c.in(0)));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameShape(c.in(i), c.in(0)));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.sameShape(c.out(i), c.in(0)));
  return absl::OkStatus();
}

absl::Status checkGelu(const KernelSignature &sig) {
  LaunchChecker c("gelu", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkSameShapes(c);
}

absl::Status checkGeluGradInput(const KernelSignature &sig) {
  LaunchChecker c("gelu_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "x"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  return checkSameShapes(c);
}

absl::Status checkSwiglu(const KernelSignature &sig) {
  LaunchChecker c("swiglu", sig);
  BRAID_KERNEL_TRY(c.inputs({"gate", "up"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkSameShapes(c);
}

absl::Status checkSwigluGradInput(const KernelSignature &sig) {
  LaunchChecker c("swiglu_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "gate", "up"}));
  BRAID_KERNEL_TRY(c.outputs({"dgate", "dup"}));
  return checkSameShapes(c);
}

absl::Status checkAdd(const KernelSignature &sig) {
  LaunchChecker c("add", sig);
  BRAID_KERNEL_TRY(c.inputs({"a", "b"}));
  BRAID_KERNEL_TRY(c.outputs({"c"}));
  return checkSameShapes(c);
}

absl::Status checkAccumulate(const KernelSignature &sig) {
  LaunchChecker c("accumulate", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  return checkSameShapes(c);
}

absl::Status checkFill(const KernelSignature &sig) {
  LaunchChecker c("fill", sig);
  BRAID_KERNEL_TRY(c.inputs({}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(c.floatStorage(c.out(0)));
  return c.floatParam("value").status();
}

// A copy of a buffer of any element type into one of the same shape and
// type (a micro-batch's own copy of its staged tokens, say).
absl::Status checkCopy(const KernelSignature &sig) {
  LaunchChecker c("copy", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(c.dtype(c.out(0), c.in(0).desc->dtype));
  return c.sameShape(c.out(0), c.in(0));
}

absl::Status checkDropoutLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "dropout_grad_input" : "dropout", sig);
  BRAID_KERNEL_TRY(c.inputs({grad ? "dy" : "x"}));
  BRAID_KERNEL_TRY(c.outputs({grad ? "dx" : "y"}));
  BRAID_KERNEL_TRY(checkSameShapes(c));
  absl::StatusOr<double> p = c.floatParam("p");
  if (!p.ok())
    return p.status();
  if (*p < 0 || *p >= 1)
    return c.error(
        absl::StrCat("parameter 'p' is ", *p, ", expected 0 <= p < 1"));
  BRAID_KERNEL_TRY(c.intParam("rng_offset", 0, INT64_MAX).status());
  BRAID_KERNEL_TRY(checkTpDim(c, c.in(0)));
  return checkCpDim(c, c.in(0));
}

absl::Status checkDropout(const KernelSignature &sig) {
  return checkDropoutLaunch(sig, false);
}
absl::Status checkDropoutGradInput(const KernelSignature &sig) {
  return checkDropoutLaunch(sig, true);
}

absl::Status checkSplit(const KernelSignature &sig) {
  LaunchChecker c("split", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.variadicOutputs("part"));
  Operand x = c.in(0), first = c.out(0);
  BRAID_KERNEL_TRY(c.floatStorage(x));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.out(i), x));
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., n*K]"));
  const int64_t k = first.rank() == 0 ? -1 : first.lastDim();
  if (k < 0 || x.lastDim() != c.numOuts() * k)
    return c.error(absl::StrCat(
        x.label, " has shape ", shapeString(x.shape()), ", expected [..., ",
        c.numOuts(), " * K]: ", c.numOuts(),
        " outputs of last dimension K = ", k < 0 ? "(none)" : absl::StrCat(k)));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.shape(c.out(i), withLastDim(*x.desc, k),
                             "(x's leading dimensions, then K)"));
  return absl::OkStatus();
}

absl::Status checkSplitGradInput(const KernelSignature &sig) {
  LaunchChecker c("split_grad_input", sig);
  BRAID_KERNEL_TRY(c.variadicInputs("dpart"));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  Operand first = c.in(0);
  BRAID_KERNEL_TRY(c.floatStorage(first));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(i), first));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), first));
  BRAID_KERNEL_TRY(c.minRank(first, 1, "[..., K]"));
  for (int i = 1; i < c.numIns(); ++i)
    BRAID_KERNEL_TRY(c.sameShape(c.in(i), first));
  return c.shape(c.out(0),
                 withLastDim(*first.desc, c.numIns() * first.lastDim()),
                 absl::StrCat("(the parts' leading dimensions, then ",
                              c.numIns(), " * K)"));
}

// Any pair of float dtypes: f32 -> bf16 rounds, bf16 -> f32 widens, and the
// same dtype on both sides copies.
absl::Status checkCast(const KernelSignature &sig) {
  LaunchChecker c("cast", sig);
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  BRAID_KERNEL_TRY(c.floatStorage(c.out(0)));
  return c.sameShape(c.out(0), c.in(0));
}

} // namespace

absl::Span<const NamedCheck> elementwiseChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"gelu", checkGelu},
      {"gelu_grad_input", checkGeluGradInput},
      {"swiglu", checkSwiglu},
      {"swiglu_grad_input", checkSwigluGradInput},
      {"add", checkAdd},
      {"accumulate", checkAccumulate},
      {"fill", checkFill},
      {"copy", checkCopy},
      {"dropout", checkDropout},
      {"dropout_grad_input", checkDropoutGradInput},
      {"split", checkSplit},
      {"split_grad_input", checkSplitGradInput},
      {"cast", checkCast},
  };
  return kChecks;
}

} // namespace braid::checks
