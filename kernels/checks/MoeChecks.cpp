// Checks of moe_route and moe_route_grad (docs/kernels.md): logits and
// scores [N, E], the chosen experts (i32) and their weights [N, K] with
// 1 <= K <= E, f32 in every plan.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/checks/CheckFamilies.h"
#include "kernels/checks/LaunchChecker.h"

namespace braid::checks {
namespace {

constexpr const char *kWhy = "the router scores and chooses in f32 in every "
                             "plan";

// sigmoid and normalize (0 or 1) and a finite scale.
absl::Status checkRouteParams(const LaunchChecker &c) {
  BRAID_KERNEL_TRY(c.intParamOr("sigmoid", 0, 0, 1).status());
  BRAID_KERNEL_TRY(c.intParamOr("normalize", 0, 0, 1).status());
  return c.floatParamOr("scale", 1.0).status();
}

// `experts` is [N, K] i32 with K experts of the E there are.
absl::Status checkChoice(const LaunchChecker &c, const Operand &experts,
                         const Operand &rows) {
  BRAID_KERNEL_TRY(c.dtype(experts, DType::kI32));
  BRAID_KERNEL_TRY(c.rank(experts, 2, "[N, K]"));
  const int64_t k = experts.dim(1), e = rows.dim(1);
  if (experts.dim(0) != rows.dim(0))
    return c.error(absl::StrCat(experts.label, " has ", experts.dim(0),
                                " rows, ", rows.label, " ", rows.dim(0)));
  if (k < 1 || k > e)
    return c.error(absl::StrCat(experts.label, " chooses ", k,
                                " experts per row of the ", e, " of ",
                                rows.label, ": 1 to ", e));
  return absl::OkStatus();
}

absl::Status checkMoeRoute(const KernelSignature &sig) {
  LaunchChecker c("moe_route", sig);
  BRAID_KERNEL_TRY(c.inputs({"logits", "bias"}, 1));
  BRAID_KERNEL_TRY(c.outputs({"experts", "weights", "scores"}));
  Operand logits = c.in(0), experts = c.out(0), weights = c.out(1),
          scores = c.out(2);
  BRAID_KERNEL_TRY(c.f32(logits, kWhy));
  BRAID_KERNEL_TRY(c.rank(logits, 2, "[N, E]"));
  if (c.numIns() > 1) {
    BRAID_KERNEL_TRY(c.f32(c.in(1), kWhy));
    BRAID_KERNEL_TRY(c.shape(c.in(1), {logits.dim(1)},
                             "(one bias per expert of input 0)"));
  }
  BRAID_KERNEL_TRY(checkChoice(c, experts, logits));
  BRAID_KERNEL_TRY(c.f32(weights, kWhy));
  BRAID_KERNEL_TRY(c.sameShape(weights, experts));
  BRAID_KERNEL_TRY(c.f32(scores, kWhy));
  BRAID_KERNEL_TRY(c.sameShape(scores, logits));
  return checkRouteParams(c);
}

absl::Status checkMoeRouteGrad(const KernelSignature &sig) {
  LaunchChecker c("moe_route_grad", sig);
  BRAID_KERNEL_TRY(c.inputs({"dweights", "scores", "experts"}));
  BRAID_KERNEL_TRY(c.outputs({"dlogits"}));
  Operand dweights = c.in(0), scores = c.in(1), experts = c.in(2),
          dlogits = c.out(0);
  BRAID_KERNEL_TRY(c.f32(scores, kWhy));
  BRAID_KERNEL_TRY(c.rank(scores, 2, "[N, E]"));
  BRAID_KERNEL_TRY(checkChoice(c, experts, scores));
  BRAID_KERNEL_TRY(c.f32(dweights, kWhy));
  BRAID_KERNEL_TRY(c.sameShape(dweights, experts));
  BRAID_KERNEL_TRY(c.f32(dlogits, kWhy));
  BRAID_KERNEL_TRY(c.sameShape(dlogits, scores));
  return checkRouteParams(c);
}

} // namespace

absl::Span<const NamedCheck> moeChecks() {
  static constexpr NamedCheck kChecks[] = {
      {"moe_route", checkMoeRoute},
      {"moe_route_grad", checkMoeRouteGrad},
  };
  return kChecks;
}

} // namespace braid::checks
