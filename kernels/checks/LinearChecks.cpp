// Checks of linear, linear_grad_input and linear_grad_weight.
#include <climits>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

// The product of all dimensions but the last. Unlike TensorDesc::rows this
// is not 0 when the last dimension is: x [3, 0] still has 3 rows of y.
int64_t rowsOf(const TensorDesc &d) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < d.shape.size(); ++i)
    n *= d.shape[i];
  return n;
}

// sgemm takes int sizes.
absl::Status fitsBlas(const LaunchChecker &c, const Operand &op, int64_t rows) {
  if (rows <= INT_MAX && op.lastDim() <= INT_MAX)
    return absl::OkStatus();
  return c.error(absl::StrCat(op.label, " has shape ", shapeString(op.shape()),
                              "; the CPU GEMM takes at most ", INT_MAX,
                              " rows and columns"));
}

absl::Status checkLinear(const KernelSignature &sig) {
  LaunchChecker c("linear", sig);
  BRAID_KERNEL_TRY(c.inputs({"x", "weight", "bias"}, 1));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  Operand x = c.in(0), w = c.in(1), y = c.out(0);
  BRAID_KERNEL_TRY(c.floatStorage(x));
  BRAID_KERNEL_TRY(c.sameDtype(w, x));
  if (c.numIns() == 3)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(2), x));
  BRAID_KERNEL_TRY(c.sameDtype(y, x));
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., K]"));
  BRAID_KERNEL_TRY(c.rank(w, 2, "[M, K]"));
  const int64_t k = x.lastDim(), m = w.dim(0);
  if (w.dim(1) != k)
    return c.error(absl::StrCat(w.label, " has shape ", shapeString(w.shape()),
                                ", expected [M, ", k,
                                "] to match input 0's "
                                "last dimension ",
                                k));
  if (c.numIns() == 3)
    BRAID_KERNEL_TRY(
        c.shape(c.in(2), {m}, "to match input 1 (weight)'s first dimension"));
  absl::StatusOr<int64_t> partialBias = c.intParamOr("partial_bias", 0, 0, 1);
  if (!partialBias.ok())
    return partialBias.status();
  if (*partialBias == 1 && c.numIns() != 3)
    return c.error("partial_bias = 1 needs a bias (input 2)");
  BRAID_KERNEL_TRY(c.shape(y, withLastDim(*x.desc, m),
                           "(x's leading dimensions, then weight's M)"));
  BRAID_KERNEL_TRY(fitsBlas(c, x, rowsOf(*x.desc)));
  return fitsBlas(c, w, m);
}

absl::Status checkLinearGradInput(const KernelSignature &sig) {
  LaunchChecker c("linear_grad_input", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "weight"}));
  BRAID_KERNEL_TRY(c.outputs({"dx"}));
  Operand dy = c.in(0), w = c.in(1), dx = c.out(0);
  BRAID_KERNEL_TRY(c.floatStorage(dy));
  BRAID_KERNEL_TRY(c.sameDtype(w, dy));
  BRAID_KERNEL_TRY(c.sameDtype(dx, dy));
  BRAID_KERNEL_TRY(c.accumulateParam());
  BRAID_KERNEL_TRY(c.minRank(dy, 1, "[..., M]"));
  BRAID_KERNEL_TRY(c.rank(w, 2, "[M, K]"));
  const int64_t m = dy.lastDim(), k = w.dim(1);
  if (w.dim(0) != m)
    return c.error(absl::StrCat(w.label, " has shape ", shapeString(w.shape()),
                                ", expected [", m,
                                ", K] to match input 0's "
                                "last dimension ",
                                m));
  BRAID_KERNEL_TRY(c.shape(dx, withLastDim(*dy.desc, k),
                           "(dy's leading dimensions, then weight's K)"));
  BRAID_KERNEL_TRY(fitsBlas(c, dy, rowsOf(*dy.desc)));
  return fitsBlas(c, w, m);
}

absl::Status checkLinearGradWeight(const KernelSignature &sig) {
  LaunchChecker c("linear_grad_weight", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "x"}));
  BRAID_KERNEL_TRY(c.outputs({"dweight", "dbias"}, 1));
  Operand dy = c.in(0), x = c.in(1);
  BRAID_KERNEL_TRY(c.floatStorage(dy));
  BRAID_KERNEL_TRY(c.sameDtype(x, dy));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.gradWeightDtype(c.out(i), dy));
  BRAID_KERNEL_TRY(c.accumulateParam());
  BRAID_KERNEL_TRY(c.minRank(dy, 1, "[..., M]"));
  BRAID_KERNEL_TRY(c.minRank(x, 1, "[..., K]"));
  if (leadingDims(*x.desc) != leadingDims(*dy.desc))
    return c.error(
        absl::StrCat(x.label, " has shape ", shapeString(x.shape()),
                     ", expected the leading dimensions of input 0 (dy) ",
                     shapeString(dy.shape())));
  const int64_t m = dy.lastDim(), k = x.lastDim();
  BRAID_KERNEL_TRY(c.shape(c.out(0), {m, k}, "([dy's M, x's K])"));
  if (c.numOuts() == 2)
    BRAID_KERNEL_TRY(c.shape(c.out(1), {m}, "(dy's last dimension)"));
  BRAID_KERNEL_TRY(fitsBlas(c, dy, rowsOf(*dy.desc)));
  return fitsBlas(c, x, rowsOf(*x.desc));
}

} // namespace

absl::Span<const NamedCheck> linearChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"linear", checkLinear},
      {"linear_grad_input", checkLinearGradInput},
      {"linear_grad_weight", checkLinearGradWeight},
  };
  return kChecks;
}

} // namespace braid::checks
