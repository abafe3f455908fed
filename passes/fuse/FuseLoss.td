//===- FuseLoss.td - fusion passes: Loss ------------*- tablegen -*-===//
//
// the LM head chunked with softmax+cross-entropy, multi-tensor AdamW (docs/fusion.md).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSE_LOSS_TD
#define BRAID_FUSE_LOSS_TD

include "mlir/Pass/PassBase.td"

def FuseLinearCrossEntropyPass
    : Pass<"braid-fuse-linear-cross-entropy", "mlir::ModuleOp"> {
  let summary = "Chunk the LM head with cross-entropy so logits never exist";
  let description = [{
    Rewrites `braid.linear %x, %w` (no bias) whose only readers are a
    `braid.cross_entropy` and its `braid.cross_entropy_grad_input`, whose
    logits gradient in turn feeds exactly one `linear_grad_input` (of `%w`)
    and one `linear_grad_weight` (of `%x`, no bias gradient), into one
    `braid.linear_cross_entropy_with_grad` at the place of the
    cross-entropy: loss, dx and dW in one pass over chunks of logits, three
    GEMMs as unfused. Its workspace result holds one chunk: max(chunk / V,
    min-chunk-rows) rows of V f32 logits, at most all rows. Its dW is a weight-gradient result that accumulates
    into the gradient global as `linear_grad_weight` did (tied embeddings
    included): the head's backward runs first in the backward, so moving it
    to the end of the forward leaves the order of gradient sums unchanged.
    A cross-entropy with no backward becomes `braid.linear_cross_entropy`.
    Under tensor parallel (braid-shard's vocabulary-parallel loss) the
    head's `linear` and `braid.cross_entropy_stats` become
    `braid.linear_cross_entropy_stats`, and the `cross_entropy_grad_input`
    (vocab_shard) with its two GEMMs `braid.linear_cross_entropy_grad` at
    its place, reading the group's lse (a re-gather of x for the weight
    gradient under sequence parallel is replaced by the forward's copy).
    Any other shape of the group is left alone.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
  let options = [
    Option<"chunk", "chunk", "int64_t", /*default=*/"1048576",
           "Logits elements a kernel holds at a time (at least one row)">,
    Option<"minChunkRows", "min-chunk-rows", "int64_t", /*default=*/"2048",
           "Rows the workspace of linear_cross_entropy_with_grad holds at "
           "least (or all rows, when fewer)">,
  ];
}

def FuseAdamwPass : Pass<"braid-fuse-adamw", "mlir::ModuleOp"> {
  let summary = "One multi-tensor AdamW launch instead of one per parameter";
  let description = [{
    In `@optimizer`, the `adamw` launches that share `beta1`, `beta2`,
    `eps`, `grad_clip` and the norm buffer, and whose `weight_decay` is 0
    or one common value, become one `multi_adamw` launch at the place of the
    first: decayed tensors first (parameter `decayed` counts them), then the
    others, each in launch order. The arithmetic per element is that of
    `adamw`, so results are bit for bit the same.
  }];
  let dependentDialects = ["::braid::sched::SchedDialect"];
}

#endif // BRAID_FUSE_LOSS_TD
