//===- MoeOps.td - braid ops: mixture of experts ----------*- tablegen -*-===//
//
// The ops of a mixture-of-experts layer (docs/moe.md). Each mnemonic is
// the name of the kernel it lowers to (docs/kernels.md); verifiers live in
// MoeOps.cpp, gradient rules in Gradients.cpp. N is the number of tokens
// (the product of the leading dimensions), E the experts, K the experts
// each token chooses, R the permuted rows (N * K on one rank).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_MOE_OPS_TD
#define BRAID_MOE_OPS_TD

def Braid_MoeRouteOp : Braid_PureOp<"moe_route", [Braid_Differentiable]> {
  let summary = "The router: scores, the top-k experts and their weights";
  let description = [{
    Per token, `scores` = softmax of the logits (or their sigmoid with
    `sigmoid`), `experts` = the K experts of largest score + bias (ties to
    the lower expert), `weights` = their scores, divided by the chosen
    scores' sum with `normalize`, times `scale`. The bias chooses and never
    weights; it gets no gradient. f32 in every plan.

    ```mlir
    %experts, %weights, %scores = braid.moe_route %logits
        {normalize = true, scale = 1.0 : f32, sigmoid = false}
        : (tensor<2x16x8xf32>) -> (tensor<2x16x2xi32>, tensor<2x16x2xf32>, tensor<2x16x8xf32>)
    ```
  }];
  let arguments = (ins Braid_StatTensor:$logits,
                       Optional<Braid_StatTensor>:$bias, BoolAttr:$sigmoid,
                       BoolAttr:$normalize, F32Attr:$scale);
  let results = (outs Braid_IdTensor:$experts, Braid_StatTensor:$weights,
                      Braid_StatTensor:$scores);
}

def Braid_MoeRouteGradOp : Braid_PureOp<"moe_route_grad"> {
  let summary = "The router logits' gradient through the weights (B)";
  let description = [{
    With `scores_grad` (the balancing loss's gradient of the scores), that
    too goes through the softmax or sigmoid.

    ```mlir
    %dl = braid.moe_route_grad %dw, %scores, %experts
        {normalize = true, scale = 1.0 : f32, sigmoid = false}
        : (tensor<2x16x2xf32>, tensor<2x16x8xf32>, tensor<2x16x2xi32>) -> tensor<2x16x8xf32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$weights_grad,
                       Braid_StatTensor:$scores, Braid_IdTensor:$experts,
                       Optional<Braid_StatTensor>:$scores_grad,
                       BoolAttr:$sigmoid, BoolAttr:$normalize, F32Attr:$scale);
  let results = (outs Braid_StatTensor:$logits_grad);
}

def Braid_MoeExpertCountsOp : Braid_PureOp<"moe_expert_counts"> {
  let summary = "The tokens each expert was chosen for";
  let description = [{
    ```mlir
    %counts = braid.moe_expert_counts %experts
        : (tensor<2x16x2xi32>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Braid_IdTensor:$experts);
  let results = (outs Braid_StatTensor:$counts);
}

def Braid_MoeAuxLossOp : Braid_PureOp<"moe_aux_loss", [Braid_Differentiable, Braid_SideLoss]> {
  let summary = "The load-balancing loss of a router";
  let description = [{
    `coeff * E / (top_k * T^2) * sum_e counts[e] * sum_t q[t, e]` over the
    T tokens, q the scores normalised per token (docs/moe.md). A side loss:
    its gradient joins the cross-entropy's. With `parts` (context
    parallel), the counts are the whole sequence's and the scores one of
    `parts` equal parts of it: the factor is divided by `parts`, so that
    the parts' losses averaged are the whole sequence's.

    ```mlir
    %aux = braid.moe_aux_loss %scores, %counts
        {coeff = 1.000000e-02 : f64, sigmoid = false, top_k = 2 : i64}
        : (tensor<2x16x8xf32>, tensor<8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$scores, Braid_StatTensor:$counts,
                       F64Attr:$coeff, I64Attr:$top_k, BoolAttr:$sigmoid,
                       OptionalAttr<I64Attr>:$parts);
  let results = (outs Braid_Scalar:$loss);
}

def Braid_MoeAuxLossGradOp : Braid_PureOp<"moe_aux_loss_grad"> {
  let summary = "The load-balancing loss's gradient of the scores (B)";
  let description = [{
    ```mlir
    %ds = braid.moe_aux_loss_grad %scores, %counts
        {coeff = 1.000000e-02 : f64, sigmoid = false, top_k = 2 : i64}
        : (tensor<2x16x8xf32>, tensor<8xf32>) -> tensor<2x16x8xf32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$scores, Braid_StatTensor:$counts,
                       F64Attr:$coeff, I64Attr:$top_k, BoolAttr:$sigmoid,
                       OptionalAttr<I64Attr>:$parts);
  let results = (outs Braid_StatTensor:$scores_grad);
}

def Braid_MoeZLossOp : Braid_PureOp<"moe_z_loss", [Braid_Differentiable, Braid_SideLoss]> {
  let summary = "The router z-loss";
  let description = [{
    `coeff / T * sum_t logsumexp(logits[t])^2`. A side loss.

    ```mlir
    %z = braid.moe_z_loss %logits {coeff = 1.000000e-03 : f64}
        : (tensor<2x16x8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$logits, F64Attr:$coeff);
  let results = (outs Braid_Scalar:$loss);
}

def Braid_MoeZLossGradOp : Braid_PureOp<"moe_z_loss_grad"> {
  let summary = "The router z-loss's gradient of the logits (B)";
  let description = [{
    ```mlir
    %dl = braid.moe_z_loss_grad %logits {coeff = 1.000000e-03 : f64}
        : (tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$logits, F64Attr:$coeff);
  let results = (outs Braid_StatTensor:$logits_grad);
}

def Braid_MoePermuteOp : Braid_PureOp<"moe_permute", [Braid_Differentiable]> {
  let summary = "The tokens' rows in expert-major order, once per choice";
  let description = [{
    Expert e's rows are `xs[offsets[e] .. offsets[e + 1])`, in token order
    then choice order; `positions[t, j]` is the row of token t's j-th
    choice. With `capacity` (capacity mode) each expert has that many rows,
    expert e's at `[e * capacity, (e + 1) * capacity)`: choices beyond it
    are dropped (position -1), unfilled rows are zero.

    ```mlir
    %xs, %positions, %offsets = braid.moe_permute %x, %experts
        : (tensor<2x16x64xf32>, tensor<2x16x2xi32>) -> (tensor<64x64xf32>, tensor<2x16x2xi32>, tensor<9xi32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_IdTensor:$experts,
                       OptionalAttr<I64Attr>:$capacity);
  let results = (outs Braid_FloatTensor:$rows, Braid_IdTensor:$positions,
                      Braid_IdTensor:$offsets);
}

def Braid_MoePermuteGradOp : Braid_PureOp<"moe_permute_grad"> {
  let summary = "Each token's gradient: the sum of its rows' (B)";
  let description = [{
    ```mlir
    %dx = braid.moe_permute_grad %dxs, %positions
        : (tensor<64x64xf32>, tensor<2x16x2xi32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$rows_grad,
                       Braid_IdTensor:$positions);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_MoeUnpermuteOp : Braid_PureOp<"moe_unpermute", [Braid_Differentiable]> {
  let summary = "The experts' rows combined back per token, weighted";
  let description = [{
    `y[t] = sum_j weights[t, j] * rows[positions[t, j]]`, in choice order.

    ```mlir
    %y = braid.moe_unpermute %ys, %positions, %weights
        : (tensor<64x64xf32>, tensor<2x16x2xi32>, tensor<2x16x2xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$rows, Braid_IdTensor:$positions,
                       Braid_StatTensor:$weights);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_MoeUnpermuteGradOp : Braid_PureOp<"moe_unpermute_grad"> {
  let summary = "Gradients of the experts' rows and of the weights (B)";
  let description = [{
    ```mlir
    %dys, %dw = braid.moe_unpermute_grad %dy, %ys, %positions, %weights
        : (tensor<2x16x64xf32>, tensor<64x64xf32>, tensor<2x16x2xi32>, tensor<2x16x2xf32>)
        -> (tensor<64x64xf32>, tensor<2x16x2xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$rows,
                       Braid_IdTensor:$positions, Braid_StatTensor:$weights);
  let results = (outs Braid_FloatTensor:$rows_grad,
                      Braid_StatTensor:$weights_grad);
}

// The unfused router and permutations: what braid-import emits, and what
// braid-fuse-moe (docs/fusion.md) rewrites into moe_route, moe_permute and
// moe_unpermute, which compute the same bits in fewer launches.

def Braid_MoeScoresOp : Braid_PureOp<"moe_scores", [Braid_Differentiable]> {
  let summary = "The router's scores: softmax (or sigmoid) of the logits";
  let description = [{
    Per token, softmax over the E logits, or each logit's sigmoid with
    `sigmoid`. f32 in every plan. moe_route's first half.

    ```mlir
    %scores = braid.moe_scores %logits {sigmoid = false}
        : (tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$logits, BoolAttr:$sigmoid);
  let results = (outs Braid_StatTensor:$scores);
}

def Braid_MoeScoresGradOp : Braid_PureOp<"moe_scores_grad"> {
  let summary = "The logits' gradient through softmax or sigmoid (B)";
  let description = [{
    ```mlir
    %dl = braid.moe_scores_grad %ds, %scores {sigmoid = false}
        : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$scores_grad,
                       Braid_StatTensor:$scores, BoolAttr:$sigmoid);
  let results = (outs Braid_StatTensor:$logits_grad);
}

def Braid_MoeTopKOp : Braid_PureOp<"moe_topk", [Braid_Differentiable]> {
  let summary = "The K experts of largest score + bias, and their weights";
  let description = [{
    Per token, `experts` = the K experts of largest score + bias (ties to
    the lower expert), `weights` = their scores, divided by the chosen
    scores' sum with `normalize`, times `scale`. moe_route's second half.

    ```mlir
    %experts, %weights = braid.moe_topk %scores
        {normalize = true, scale = 1.0 : f32}
        : (tensor<2x16x8xf32>) -> (tensor<2x16x2xi32>, tensor<2x16x2xf32>)
    ```
  }];
  let arguments = (ins Braid_StatTensor:$scores,
                       Optional<Braid_StatTensor>:$bias, BoolAttr:$normalize,
                       F32Attr:$scale);
  let results = (outs Braid_IdTensor:$experts, Braid_StatTensor:$weights);
}

def Braid_MoeTopKGradOp : Braid_PureOp<"moe_topk_grad"> {
  let summary = "The scores' gradient through the chosen weights (B)";
  let description = [{
    Zero for the experts not chosen.

    ```mlir
    %ds = braid.moe_topk_grad %dw, %scores, %experts
        {normalize = true, scale = 1.0 : f32}
        : (tensor<2x16x2xf32>, tensor<2x16x8xf32>, tensor<2x16x2xi32>) -> tensor<2x16x8xf32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$weights_grad,
                       Braid_StatTensor:$scores, Braid_IdTensor:$experts,
                       BoolAttr:$normalize, F32Attr:$scale);
  let results = (outs Braid_StatTensor:$scores_grad);
}

def Braid_MoeSortOp : Braid_PureOp<"moe_sort"> {
  let summary = "Each choice's row in expert-major order, and the experts' blocks";
  let description = [{
    moe_permute's `positions` and `offsets` without moving any row:
    expert e's rows are `[offsets[e], offsets[e + 1])`, in token order then
    choice order; with `capacity`, expert e's are `[e * capacity, (e + 1) *
    capacity)` and choices beyond it get -1.

    ```mlir
    %positions, %offsets = braid.moe_sort %experts
        : (tensor<2x16x2xi32>) -> (tensor<2x16x2xi32>, tensor<9xi32>)
    ```
  }];
  let arguments = (ins Braid_IdTensor:$experts,
                       OptionalAttr<I64Attr>:$capacity);
  let results = (outs Braid_IdTensor:$positions, Braid_IdTensor:$offsets);
}

def Braid_MoeGatherOp : Braid_PureOp<"moe_gather", [Braid_Differentiable]> {
  let summary = "The tokens' rows copied to their choices' positions";
  let description = [{
    `rows[positions[t, j]] = input[t]`; rows no choice takes are zero.
    moe_permute's copy. The gradient is braid.moe_permute_grad.

    ```mlir
    %xs = braid.moe_gather %x, %positions
        : (tensor<2x16x64xf32>, tensor<2x16x2xi32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_IdTensor:$positions);
  let results = (outs Braid_FloatTensor:$rows);
}

def Braid_MoeGatherChoicesOp : Braid_PureOp<"moe_gather_choices", [Braid_Differentiable]> {
  let summary = "Each token's K rows back from the experts' order";
  let description = [{
    `choices[t, j] = rows[positions[t, j]]`, zero for a dropped choice
    (position -1). With braid.moe_weighted_sum, moe_unpermute; the
    `[..., K, D]` result is what the fused op never holds.

    ```mlir
    %c = braid.moe_gather_choices %ys, %positions
        : (tensor<64x64xf32>, tensor<2x16x2xi32>) -> tensor<2x16x2x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$rows, Braid_IdTensor:$positions);
  let results = (outs Braid_FloatTensor:$choices);
}

def Braid_MoeGatherChoicesGradOp : Braid_PureOp<"moe_gather_choices_grad"> {
  let summary = "The rows' gradient: each choice's row written back (B)";
  let description = [{
    `rows_grad[positions[t, j]] = choices_grad[t, j]`; rows no choice takes
    are zero.

    ```mlir
    %dys = braid.moe_gather_choices_grad %dc, %positions
        : (tensor<2x16x2x64xf32>, tensor<2x16x2xi32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$choices_grad,
                       Braid_IdTensor:$positions);
  let results = (outs Braid_FloatTensor:$rows_grad);
}

def Braid_MoeWeightedSumOp : Braid_PureOp<"moe_weighted_sum", [Braid_Differentiable]> {
  let summary = "Each token's choices summed with the router's weights";
  let description = [{
    `y[t] = sum_j weights[t, j] * choices[t, j]`, in choice order, in f32.

    ```mlir
    %y = braid.moe_weighted_sum %c, %weights
        : (tensor<2x16x2x64xf32>, tensor<2x16x2xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$choices, Braid_StatTensor:$weights);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_MoeWeightedSumGradOp : Braid_PureOp<"moe_weighted_sum_grad"> {
  let summary = "Gradients of the choices and of the weights (B)";
  let description = [{
    `choices_grad[t, j] = weights[t, j] * grad[t]`; `weights_grad[t, j] =
    grad[t] . choices[t, j]`, summed in f32 in element order.

    ```mlir
    %dc, %dw = braid.moe_weighted_sum_grad %dy, %c, %weights
        : (tensor<2x16x64xf32>, tensor<2x16x2x64xf32>, tensor<2x16x2xf32>)
        -> (tensor<2x16x2x64xf32>, tensor<2x16x2xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$choices,
                       Braid_StatTensor:$weights);
  let results = (outs Braid_FloatTensor:$choices_grad,
                      Braid_StatTensor:$weights_grad);
}

def Braid_MoeBlockCountsOp : Braid_PureOp<"moe_block_counts"> {
  let summary = "The rows of each block of offsets";
  let description = [{
    What a rank sends each expert under expert parallel: moe_permute's
    offsets `[E + 1]` become `E` counts.

    ```mlir
    %c = braid.moe_block_counts %offsets : (tensor<9xi32>) -> tensor<8xi32>
    ```
  }];
  let arguments = (ins Braid_IdTensor:$offsets);
  let results = (outs Braid_IdTensor:$counts);
}

def Braid_MoeEpOffsetsOp : Braid_PureOp<"moe_ep_offsets"> {
  let summary = "The blocks of the rows this rank's experts receive";
  let description = [{
    From the expert-parallel group's gathered counts (`[G x G x m]`: rank
    s's counts of every expert), the offsets of the `G x m` blocks this
    rank receives from braid.comm.dispatch, sender by sender and, within a
    sender, by local expert: block `s x m + j` is rank s's rows of local
    expert j (docs/moe.md).

    ```mlir
    %o = braid.moe_ep_offsets %all : (tensor<16xi32>) -> tensor<9xi32>
    ```
  }];
  let arguments = (ins Braid_IdTensor:$counts);
  let results = (outs Braid_IdTensor:$offsets);
}

def Braid_MoeHotExpertsOp : Braid_PureOp<"moe_hot_experts"> {
  let summary = "The experts to replicate, and the counts left to exchange";
  let description = [{
    Hot-expert replication (docs/moe.md). From the expert-parallel group's
    gathered counts (`[G x E]`, `ranks` = G), replication is on when the
    busiest rank's rows exceed `threshold` times the mean: `hot` `[H]`
    then names the H experts of most rows (fewer when fewer have any),
    most first, and -1 fills the rest; off, every slot is -1. `cold` is
    the counts with the hot experts' rows taken out, what the exchanges
    still move. Every rank of the group computes the same.

    ```mlir
    %hot, %cold = braid.moe_hot_experts %all {ranks = 2 : i64, threshold = 1.25 : f64}
        : (tensor<16xi32>) -> (tensor<1xi32>, tensor<16xi32>)
    ```
  }];
  let arguments = (ins Braid_IdTensor:$counts, I64Attr:$ranks,
                       F64Attr:$threshold);
  let results = (outs Braid_IdTensor:$hot, Braid_IdTensor:$cold);
}

def Braid_MoeSplitRowsOp : Braid_PureOp<"moe_split_rows", [Braid_Differentiable]> {
  let summary = "Separate the rows of the hot experts from the others";
  let description = [{
    `rows` are laid out expert by expert at `offsets` (`[E + 1]`,
    moe_permute's). `cold` gets the rows of every expert not in `hot`, in
    expert order; `hot_rows` those of the hot experts, slot by slot, at
    `hot_offsets` (`[H + 1]`); zeros follow both. The gradient is
    braid.moe_merge_rows of the results' gradients.

    ```mlir
    %cold, %hr, %ho = braid.moe_split_rows %xs, %offsets, %hot
        : (tensor<64x32xf32>, tensor<9xi32>, tensor<1xi32>) -> (tensor<64x32xf32>, tensor<32x32xf32>, tensor<2xi32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$rows, Braid_IdTensor:$offsets,
                       Braid_IdTensor:$hot);
  let results = (outs Braid_FloatTensor:$cold, Braid_FloatTensor:$hot_rows,
                      Braid_IdTensor:$hot_offsets);
}

def Braid_MoeMergeRowsOp : Braid_PureOp<"moe_merge_rows", [Braid_Differentiable]> {
  let summary = "Put the hot and the other experts' rows back in expert order";
  let description = [{
    The inverse of braid.moe_split_rows with the same offsets and hot
    experts: expert by expert at `offsets`, each hot expert's rows from
    `hot_rows` and the others' from `cold`; zeros after the last offset.
    The gradient is braid.moe_split_rows of the result's gradient.

    ```mlir
    %ys = braid.moe_merge_rows %cold, %hr, %offsets, %hot
        : (tensor<64x32xf32>, tensor<32x32xf32>, tensor<9xi32>, tensor<1xi32>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$cold, Braid_FloatTensor:$hot_rows,
                       Braid_IdTensor:$offsets, Braid_IdTensor:$hot);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_MoeGroupedLinearOp : Braid_PureOp<"moe_grouped_linear", [Braid_Differentiable]> {
  let summary = "Each expert's block of rows times its weight (dropless)";
  let description = [{
    Rows `[offsets[g], offsets[g + 1])` of the input go through
    `weight[g mod E]` (`[M, K]`, the linear layout); rows from the last
    offset on are zero. One rank has a block per expert; under expert
    parallel a block per sending rank and local expert.

    With `recompute_above` (adaptive recompute's clone in the backward,
    docs/moe.md) it computes only when the last offset, the rows the rank
    received, is above it; otherwise it writes nothing and the
    braid.moe_restore_rows that reads its result gives the kept rows.

    ```mlir
    %y = braid.moe_grouped_linear %xs, %w, %offsets
        : (tensor<64x64xf32>, tensor<8x32x64xf32>, tensor<9xi32>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$offsets,
                       OptionalAttr<I64Attr>:$recompute_above);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_MoeKeepRowsOp : Braid_PureOp<"moe_keep_rows"> {
  let summary = "The rows of an expert activation a rank keeps (adaptive recompute)";
  let description = [{
    Rows `[0, n)` of the input, `n` the last offset (the rows the rank's
    experts received), when `n` is at most the result's rows; otherwise
    nothing is written: the backward then computes the activation again
    (a braid.moe_grouped_linear with `recompute_above` equal to the
    result's rows) instead of reading it here.

    ```mlir
    %k = braid.moe_keep_rows %gate, %offsets
        : (tensor<96x32xf32>, tensor<5xi32>) -> tensor<48x32xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_IdTensor:$offsets);
  let results = (outs Braid_FloatTensor:$kept);
}

def Braid_MoeRestoreRowsOp : Braid_PureOp<"moe_restore_rows"> {
  let summary = "An expert activation kept or computed again (adaptive recompute)";
  let description = [{
    With `n` (the last offset) at most the kept rows: the kept rows, then
    zeros (as braid.moe_grouped_linear leaves the rows from the last
    offset on). Otherwise `recomputed`, which the clone computed in that
    case. braid-lower-to-sched writes the result into `recomputed`'s
    buffer, so only one of the two paths writes it.

    ```mlir
    %g = braid.moe_restore_rows %k, %gate2, %offsets
        : (tensor<48x32xf32>, tensor<96x32xf32>, tensor<5xi32>) -> tensor<96x32xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$kept, Braid_FloatTensor:$recomputed,
                       Braid_IdTensor:$offsets);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_MoeBatchedLinearOp : Braid_PureOp<"moe_batched_linear", [Braid_Differentiable]> {
  let summary = "E equal blocks of rows, each times its expert's weight (capacity)";
  let description = [{
    The input is E blocks of C rows (capacity mode's slots, padding
    included); block e goes through `weight[e]`. All the experts in one
    batched GEMM.

    ```mlir
    %y = braid.moe_batched_linear %xs, %w
        : (tensor<48x64xf32>, tensor<8x32x64xf32>) -> tensor<48x32xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_MoeBatchedLinearGradInputOp : Braid_PureOp<"moe_batched_linear_grad_input"> {
  let summary = "dx = dy W[e] per block (B)";
  let description = [{
    ```mlir
    %dx = braid.moe_batched_linear_grad_input %dy, %w
        : (tensor<48x32xf32>, tensor<8x32x64xf32>) -> tensor<48x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$weight);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_MoeBatchedLinearGradWeightOp : Braid_PureOp<"moe_batched_linear_grad_weight", [Braid_WeightGradient]> {
  let summary = "dW[e] = dy[block e]^T x[block e] (W)";
  let description = [{
    ```mlir
    %dw = braid.moe_batched_linear_grad_weight %dy, %xs
        : (tensor<48x32xf32>, tensor<48x64xf32>) -> tensor<8x32x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$weight_grad);
}

def Braid_MoeGroupedLinearGradInputOp : Braid_PureOp<"moe_grouped_linear_grad_input"> {
  let summary = "dx = dy W[e] per expert's block (B)";
  let description = [{
    ```mlir
    %dx = braid.moe_grouped_linear_grad_input %dy, %w, %offsets
        : (tensor<64x32xf32>, tensor<8x32x64xf32>, tensor<9xi32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$offsets);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_MoeGroupedLinearGradWeightOp : Braid_PureOp<"moe_grouped_linear_grad_weight", [Braid_WeightGradient]> {
  let summary = "dW[e] = dy[block e]^T x[block e] (W)";
  let description = [{
    ```mlir
    %dw = braid.moe_grouped_linear_grad_weight %dy, %xs, %offsets
        : (tensor<64x32xf32>, tensor<64x64xf32>, tensor<9xi32>) -> tensor<8x32x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_IdTensor:$offsets);
  let results = (outs Braid_FloatTensor:$weight_grad);
}

def Braid_MoeBiasUpdateOp : Braid_Op<"moe_bias_update"> {
  let summary = "Moves the expert bias towards balance after the step";
  let description = [{
    Aux-loss-free balancing (DeepSeek-V3): the micro-batch's `counts` add
    to the step's load of the buffer `bias`; after the optimizer, each
    expert's bias moves by `rate` towards the mean load: up for an expert
    chosen fewer times than the mean, down for one chosen more
    (`moe_bias_update`, docs/kernels.md). No result; the lowering places
    both parts.

    ```mlir
    braid.moe_bias_update %counts, %bias {rate = 1.000000e-03 : f64}
        : tensor<8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins Braid_StatTensor:$counts, Braid_StatTensor:$bias,
                       F64Attr:$rate);
  let assemblyFormat = "operands attr-dict `:` type(operands)";
  let hasVerifier = 1;
}

// Sub-units (docs/moe.md, "Sub-units"): the tokens of a micro-batch cut
// into equal parts along the sequence, each routed, exchanged and computed
// on its own, so that one part's exchange runs beside another's experts.
def Braid_MoeTokenTensor : StaticShapeTensorOf<[F32, BF16, I32]>;

def Braid_MoeSplitTokensOp : Braid_PureOp<"moe_split_tokens", [Braid_Differentiable]> {
  let summary = "The tokens cut into equal consecutive parts along the sequence";
  let description = [{
    `parts[p][b, s] = input[b, p * S / P + s]` for input [B, S, X] and P
    parts [B, S / P, X]: token rows, router choices or weights. The
    gradient (of float parts) is braid.moe_join_tokens.

    ```mlir
    %h0, %h1 = braid.moe_split_tokens %h
        : (tensor<2x16x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_MoeTokenTensor:$input);
  let results = (outs Variadic<Braid_MoeTokenTensor>:$parts);
}

def Braid_MoeJoinTokensOp : Braid_PureOp<"moe_join_tokens", [Braid_Differentiable]> {
  let summary = "Parts of the tokens joined back along the sequence";
  let description = [{
    The inverse of braid.moe_split_tokens: P parts [B, S / P, X] make
    [B, S, X]. The gradient is braid.moe_split_tokens of the result's.

    ```mlir
    %y = braid.moe_join_tokens %y0, %y1
        : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Braid_MoeTokenTensor>:$parts);
  let results = (outs Braid_MoeTokenTensor:$result);
}

#endif // BRAID_MOE_OPS_TD
