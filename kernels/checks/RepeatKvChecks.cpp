// Checks of repeat_kv and repeat_kv_grad_input.
#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

// The head counts of a tp_slice launch: num_heads query heads of this TP
// rank, all num_kv_heads kv heads, `group` query heads per kv head in the
// whole model. The whole model's query heads, num_kv_heads * group, must
// split into whole ranks of num_heads; which rank runs is not known here.
absl::StatusOr<HeadCounts> checkSliceHeads(const LaunchChecker &c) {
  absl::StatusOr<int64_t> h = c.intParam("num_heads", 1, INT32_MAX);
  if (!h.ok())
    return h.status();
  absl::StatusOr<int64_t> hkv = c.intParam("num_kv_heads", 1, INT32_MAX);
  if (!hkv.ok())
    return hkv.status();
  absl::StatusOr<int64_t> group = c.intParam("group", 1, INT32_MAX);
  if (!group.ok())
    return group.status();
  if (*hkv * *group % *h != 0)
    return c.error(absl::StrCat(
        "num_heads (", *h, ") does not divide the whole model's query heads, "
        "num_kv_heads * group = ", *hkv * *group,
        ", into a whole number of tensor-parallel ranks"));
  return HeadCounts{*h, *hkv};
}

// Without tp_slice: num_kv_heads divides num_heads, and an optional `group`
// can only say what they do.
absl::StatusOr<HeadCounts> checkWholeHeads(const LaunchChecker &c) {
  absl::StatusOr<HeadCounts> heads = checkHeadCounts(c);
  if (!heads.ok())
    return heads.status();
  const int64_t want = heads->heads / heads->kvHeads;
  absl::StatusOr<int64_t> group = c.intParamOr("group", want, 1, INT32_MAX);
  if (!group.ok())
    return group.status();
  if (*group != want)
    return c.error(absl::StrCat("parameter 'group' is ", *group,
                                "; without tp_slice it must be num_heads / "
                                "num_kv_heads = ",
                                want));
  return heads;
}

absl::Status checkRepeatKvLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "repeat_kv_grad_input" : "repeat_kv", sig);
  BRAID_KERNEL_TRY(c.inputs({grad ? "dy" : "x"}));
  BRAID_KERNEL_TRY(c.outputs({grad ? "dx" : "y"}));
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), c.in(0)));
  absl::StatusOr<int64_t> slice = c.intParamOr("tp_slice", 0, 0, 1);
  if (!slice.ok())
    return slice.status();
  absl::StatusOr<HeadCounts> heads =
      *slice ? checkSliceHeads(c) : checkWholeHeads(c);
  if (!heads.ok())
    return heads.status();
  const int64_t h = heads->heads, hkv = heads->kvHeads;
  // The narrow side is x (forward) or dx (backward).
  Operand wide = grad ? c.in(0) : c.out(0);
  Operand narrow = grad ? c.out(0) : c.in(0);
  BRAID_KERNEL_TRY(c.rank(narrow, 3, "[B, S, num_kv_heads*Dh]"));
  if (narrow.dim(2) % hkv != 0)
    return c.error(absl::StrCat(
        narrow.label, " has shape ", shapeString(narrow.shape()),
        "; its last dimension must be a multiple of num_kv_heads (", hkv, ")"));
  const int64_t dh = narrow.dim(2) / hkv;
  return c.shape(wide, {narrow.dim(0), narrow.dim(1), h * dh},
                 absl::StrCat("([B, S, num_heads * Dh] with Dh = ", dh, ")"));
}

absl::Status checkRepeatKv(const KernelSignature &sig) {
  return checkRepeatKvLaunch(sig, false);
}
absl::Status checkRepeatKvGradInput(const KernelSignature &sig) {
  return checkRepeatKvLaunch(sig, true);
}

} // namespace

absl::Span<const NamedCheck> repeatKvChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"repeat_kv", checkRepeatKv},
      {"repeat_kv_grad_input", checkRepeatKvGradInput},
  };
  return kChecks;
}

} // namespace braid::checks
