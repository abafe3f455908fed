// Checks of attention and attention_grad_input.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/checks/SharedChecks.h"

namespace braid::checks {
namespace {

absl::Status checkAttentionLaunch(const KernelSignature &sig, bool grad) {
  LaunchChecker c(grad ? "attention_grad_input" : "attention", sig);
  if (grad) {
    BRAID_KERNEL_TRY(c.inputs({"do", "q", "k", "v", "probs", "segment_ids"},
                              /*numOptional=*/1));
    BRAID_KERNEL_TRY(c.outputs({"dq", "dk", "dv"}));
  } else {
    BRAID_KERNEL_TRY(c.inputs({"q", "k", "v", "segment_ids"},
                              /*numOptional=*/1));
    BRAID_KERNEL_TRY(c.outputs({"o", "probs"}));
  }
  const int numFloatIns = grad ? 5 : 3;
  // Every float operand, probs included, is an activation or its gradient:
  // one storage dtype for all. The segment ids are i32.
  BRAID_KERNEL_TRY(c.floatStorage(c.in(0)));
  for (int i = 1; i < numFloatIns; ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.in(i), c.in(0)));
  for (int i = 0; i < c.numOuts(); ++i)
    BRAID_KERNEL_TRY(c.sameDtype(c.out(i), c.in(0)));
  const int qi = grad ? 1 : 0;
  Operand q = c.in(qi), k = c.in(qi + 1), v = c.in(qi + 2);
  absl::StatusOr<QkvDims> dims = checkQkv(c, q, k, v);
  if (!dims.ok())
    return dims.status();
  if (dims->ring)
    return c.error(
        "parameter 'cp_kv_step' must be -1 (k and v of the whole sequence): "
        "the steps of a ring (cp_kv_step >= 0) are merged by their lse, which "
        "only flash_attention returns");
  const int64_t b = dims->batch, h = dims->heads;
  const std::vector<int64_t> probsShape = {b, h, dims->seq, dims->keys};
  const absl::string_view probsWhy =
      dims->cp ? "([B, H, Sq, Sk])" : "([B, H, S, S])";
  if (grad) {
    BRAID_KERNEL_TRY(c.sameShape(c.in(0), q));
    BRAID_KERNEL_TRY(c.shape(c.in(4), probsShape, probsWhy));
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.sameShape(c.out(1), k));
    BRAID_KERNEL_TRY(c.sameShape(c.out(2), v));
  } else {
    BRAID_KERNEL_TRY(c.sameShape(c.out(0), q));
    BRAID_KERNEL_TRY(c.shape(c.out(1), probsShape, probsWhy));
  }

  // The masks index queries and keys by their positions (checkQkv).
  BRAID_KERNEL_TRY(checkAttentionMasks(c, *dims, numFloatIns));
  BRAID_KERNEL_TRY(c.floatParam("scale").status());
  return checkAttentionDropout(c);
}

absl::Status checkAttention(const KernelSignature &sig) {
  return checkAttentionLaunch(sig, false);
}
absl::Status checkAttentionGradInput(const KernelSignature &sig) {
  return checkAttentionLaunch(sig, true);
}

} // namespace

absl::Span<const NamedCheck> attentionChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"attention", checkAttention},
      {"attention_grad_input", checkAttentionGradInput},
  };
  return kChecks;
}

} // namespace braid::checks
