// Checks of the sequence- and context-parallel layout kernels take_part,
// stack_parts and unstack_parts (docs/kernels.md, "Sequence parallel" and
// "Context parallel"): pure copies of any dtype, so y has x's dtype,
// whatever it is.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

// "[d0, x[1] / P, d2]": `shape` with dimension `dim` written as `at`.
std::string shapeWith(const std::vector<int64_t> &shape, int64_t dim,
                      const std::string &at, int64_t dim2 = -1,
                      const std::string &at2 = "") {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      s += ", ";
    const int64_t k = static_cast<int64_t>(i);
    s += k == dim ? at : k == dim2 ? at2 : std::to_string(shape[i]);
  }
  return s + "]";
}

// The optional `balanced` (0 or 1): the parts are context parallelism's,
// two halves each, so the part length n (dimension `dim` of `part`) is
// even.
absl::Status checkBalanced(const LaunchChecker &c, const Operand &part,
                           int64_t dim) {
  absl::StatusOr<int64_t> balanced = c.intParamOr("balanced", 0, 0, 1);
  if (!balanced.ok())
    return balanced.status();
  if (*balanced == 1 && part.dim(dim) % 2 != 0)
    return c.error(absl::StrCat(
        part.label, " has shape ", shapeString(part.shape()),
        "; with balanced = 1 each part holds two halves of equal length "
        "(chunks k and 2P - 1 - k of dimension ",
        dim, "), so its length ", part.dim(dim), " must be even"));
  return absl::OkStatus();
}

// x and y of one dtype and rank, and the parameter `dim` in [lo, rank).
absl::StatusOr<int64_t> checkCopy(LaunchChecker &c, int64_t lo,
                                  absl::string_view layout) {
  BRAID_KERNEL_TRY(c.inputs({"x"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  Operand x = c.in(0), y = c.out(0);
  BRAID_KERNEL_TRY(c.dtype(y, x.desc->dtype));
  BRAID_KERNEL_TRY(c.minRank(x, lo + 1, layout));
  BRAID_KERNEL_TRY(c.rank(y, x.rank(), "(the rank of x)"));
  return c.intParam("dim", lo, x.rank() - 1);
}

absl::Status checkTakePart(const KernelSignature &sig) {
  LaunchChecker c("take_part", sig);
  absl::StatusOr<int64_t> dim = checkCopy(c, 0, "[..., P*n, ...]");
  if (!dim.ok())
    return dim.status();
  Operand x = c.in(0), y = c.out(0);
  const int64_t d = *dim, w = x.dim(d), l = y.dim(d);
  bool ok = l > 0 ? w % l == 0 : w == 0;
  for (int64_t i = 0; i < x.rank(); ++i)
    ok = ok && (i == d || y.dim(i) == x.dim(i));
  if (ok) {
    // `axis`: whose coordinate the part is, TP's (1) or CP's (2).
    BRAID_KERNEL_TRY(c.intParamOr("axis", 1, 1, 2).status());
    return checkBalanced(c, y, d);
  }
  return c.error(absl::StrCat(
      y.label, " has shape ", shapeString(y.shape()), ", expected ",
      shapeWith(x.shape(), d, absl::StrCat("x[", d, "] / P")),
      " for an integer P >= 1 (x[", d, "] = ", w,
      "): this rank's part of x along dimension ", d));
}

// stack_parts (stack) or unstack_parts: `cut` [d0, ..., P*n (at dim), ...]
// and `stacked` [P*d0, ..., n, ...].
absl::Status checkStacking(const KernelSignature &sig, bool stack) {
  LaunchChecker c(stack ? "stack_parts" : "unstack_parts", sig);
  absl::StatusOr<int64_t> dim =
      checkCopy(c, 1, stack ? "[d0, ..., P*n, ...]" : "[P*d0, ..., n, ...]");
  if (!dim.ok())
    return dim.status();
  const int64_t d = *dim;
  Operand cut = stack ? c.in(0) : c.out(0);
  Operand stacked = stack ? c.out(0) : c.in(0);
  const int64_t d0 = cut.dim(0), n = stacked.dim(d);
  // P from dimension 0 (from dimension `dim` when both are empty).
  bool ok;
  int64_t parts = 0;
  if (d0 > 0) {
    parts = stacked.dim(0) / d0;
    ok = parts >= 1 && stacked.dim(0) == parts * d0 && cut.dim(d) == parts * n;
  } else {
    ok = stacked.dim(0) == 0 && (n > 0 ? cut.dim(d) % n == 0 : cut.dim(d) == 0);
  }
  for (int64_t i = 1; i < cut.rank(); ++i)
    ok = ok && (i == d || cut.dim(i) == stacked.dim(i));
  if (ok) {
    // `ring` (0 or 1): the blocks in a ring's order from this rank's
    // coordinate on `axis` (1 TP, 2 CP), shifted by `ring_offset`; not with
    // balanced parts.
    absl::StatusOr<int64_t> ring = c.intParamOr("ring", 0, 0, 1);
    if (!ring.ok())
      return ring.status();
    BRAID_KERNEL_TRY(c.intParamOr("ring_offset", 0, -(int64_t{1} << 30),
                                  int64_t{1} << 30)
                         .status());
    BRAID_KERNEL_TRY(c.intParamOr("axis", 1, 1, 2).status());
    if (*ring == 1 && c.intParamOr("balanced", 0, 0, 1).value_or(0) == 1)
      return c.error("ring and balanced orders do not combine: a ring's "
                     "blocks are contiguous parts");
    return checkBalanced(c, stacked, d);
  }
  const std::string p = parts >= 1 ? std::to_string(parts) : "P";
  const Operand &have = stack ? stacked : cut;
  const std::string want =
      stack ? shapeWith(cut.shape(), 0, absl::StrCat(p, " * ", d0), d,
                        absl::StrCat("x[", d, "] / ", p))
            : shapeWith(stacked.shape(), 0, absl::StrCat("x[0] / ", p), d,
                        absl::StrCat(p, " * ", n));
  return c.error(absl::StrCat(
      have.label, " has shape ", shapeString(have.shape()), ", expected ", want,
      " for an integer P >= 1",
      stack ? absl::StrCat(" (P = y[0] / x[0]): part k of dimension ", d,
                           " goes to block k of dimension 0")
            : absl::StrCat(" (P = x[0] / y[0]): block k of dimension 0 goes ",
                           "to part k of dimension ", d)));
}

absl::Status checkStackParts(const KernelSignature &sig) {
  return checkStacking(sig, true);
}
absl::Status checkUnstackParts(const KernelSignature &sig) {
  return checkStacking(sig, false);
}

} // namespace

absl::Span<const NamedCheck> partsChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"take_part", checkTakePart},
      {"stack_parts", checkStackParts},
      {"unstack_parts", checkUnstackParts},
  };
  return kChecks;
}

} // namespace braid::checks
