// Checks of flash attention (docs/fusion.md).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

absl::Status checkFlashLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "flash_attention_grad_input" : "flash_attention", sig);
  if (grad) {
    BRAID_KERNEL_TRY(c.inputs({"do", "q", "k", "v", "o", "lse", "segment_ids"},
                              /*numOptional=*/1));
    BRAID_KERNEL_TRY(c.outputs({"dq", "dk", "dv"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"q", "k", "v", "segment_ids"},
                              /*numOptional=*/1));
    BRAID_KERNEL_TRY(c.outputs({"o", "lse"}));
  }
  const int qi = grad ? 1 : 0;
  const int numFloatIns = grad ? 5 : 3;
  const int lseIndex = grad ? 5 : -1;
  // Activations and their gradients share one storage dtype; the lse is
  // f32, the segment ids i32.
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  for (int i = 1; i < numFloatIns; ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(i), c.in(0)));
  if (grad) {
    BRAID_KERNEL_TRY(c.f32(c.in(lseIndex), kStatistics));
    for (int i = 0; i < 3; ++i)
      BRAID_KERNEL_TRY(c.sameDtype(c.out(i), c.in(0)));
  } else {
    BRAID_KERNEL_TRY(c.sameDtype(c.out(0), c.in(0)));
    BRAID_KERNEL_TRY(c.f32(c.out(1), kStatistics));
  }
  Operand q = c.in(qi), k = c.in(qi + 1), v = c.in(qi + 2);
  absl::StatusOr<QkvDims> dims = checkQkv(c, q, k, v);
  if (!dims.ok())
    return dims.status();
  const int64_t b = dims->batch, s = dims->seq, h = dims->heads;
  const std::vector<int64_t> lseShape = {b, h, s};
  if (grad) {
    BRAID_KERNEL_TRY(c.sameShape(c.in(0), q));
    BRAID_KERNEL_TRY(c.sameShape(c.in(4), q));
    BRAID_KERNEL_TRY(c.shape(c.in(5), lseShape, "([B, H, S])"));
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.sameShape(c.out(1), k));
    BRAID_KERNEL_TRY(c.sameShape(c.out(2), v));
  } else {
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.shape(c.out(1), lseShape, "([B, H, S])"));
  }
  BRAID_KERNEL_TRY(checkAttentionMasks(c, *dims, grad ? 6 : 3));
  BRAID_KERNEL_TRY(c.floatParam("scale").status());
  return checkAttentionDropout(c);
}

absl::Status checkFlashAttention(const KernelSignature &sig) {
  return checkFlashLaunch(sig, false);
}
absl::Status checkFlashAttentionGradInput(const KernelSignature &sig) {
  return checkFlashLaunch(sig, true);
}

// o_a, o_b [B, S, H*Dh] of one storage dtype and lse_a, lse_b [B, H, S]
// (f32) in; o and lse of the same shapes and dtypes out.
absl::Status checkAttentionMerge(const KernelSignature &sig) {
  LaunchChecker c("attention_merge", sig);
  BRAID_KERNEL_TRY(c.inputs({"o_a", "lse_a", "o_b", "lse_b"}));
  BRAID_KERNEL_TRY(c.outputs({"o", "lse"}));
  Operand oa = c.in(0);
  BRAID_KERNEL_TRY(c.floatStorage(oa));
  BRAID_KERNEL_TRY(c.sameDtype(c.in(2), oa));
  BRAID_KERNEL_TRY(c.sameDtype(c.out(0), oa));
  for (Operand lse : {c.in(1), c.in(3), c.out(1)})
    BRAID_KERNEL_TRY(c.f32(lse, kStatistics));
  BRAID_KERNEL_TRY(c.rank(oa, 3, "[B, S, H*Dh]"));
  absl::StatusOr<int64_t> h = c.intParam("num_heads", 1, INT32_MAX);
  if (!h.ok())
    return h.status();
  if (oa.dim(2) % *h != 0)
    return c.error(absl::StrCat(oa.label, " has shape ",
                                shapeString(oa.shape()),
                                "; its last dimension is not a multiple of "
                                "num_heads (",
                                *h, ")"));
  const std::vector<int64_t> lseShape = {oa.dim(0), *h, oa.dim(1)};
  BRAID_KERNEL_TRY(c.sameShape(c.in(2), oa));
  BRAID_KERNEL_TRY(c.sameShape(c.out(0), oa));
  for (Operand lse : {c.in(1), c.in(3), c.out(1)})
    BRAID_KERNEL_TRY(c.shape(lse, lseShape, "([B, H, S])"));
  return absl::OkStatus();
}

} // namespace

absl::Span<const NamedCheck> fusedAttentionChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"flash_attention", checkFlashAttention},
      {"flash_attention_grad_input", checkFlashAttentionGradInput},
      {"attention_merge", checkAttentionMerge},
  };
  return kChecks;
}

} // namespace braid::checks
