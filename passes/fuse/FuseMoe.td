//===- FuseMoe.td - fusion passes: mixture of experts ------*- tablegen -*-===//
//
// The router's scores with its top-k, and the permutations with their
// sorts and gathers (docs/fusion.md).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSE_MOE_TD
#define BRAID_FUSE_MOE_TD

include "mlir/Pass/PassBase.td"

def FuseMoePass : Pass<"braid-fuse-moe", "mlir::ModuleOp"> {
  let summary = "The router and the tokens' permutations in one kernel each";
  let description = [{
    `moe_topk(moe_scores(logits))` becomes `moe_route`, and the backward
    `moe_scores_grad` of the top-k's gradient (plus the balancing loss's)
    `moe_route_grad`. `moe_gather(x, moe_sort(experts))` becomes
    `moe_permute`. `moe_weighted_sum(moe_gather_choices(rows))` becomes
    `moe_unpermute`, and each `moe_gather_choices_grad` of a
    `moe_weighted_sum_grad` `moe_unpermute_grad`, so that the choices'
    `[..., K, D]` rows never exist. The fused kernels compute the same bits.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

#endif // BRAID_FUSE_MOE_TD
