//===- FuseAttention.td - fusion passes: Attention ------------*- tablegen -*-===//
//
// grouped-query attention without repeated K/V, flash attention (docs/fusion.md).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSE_ATTENTION_TD
#define BRAID_FUSE_ATTENTION_TD

include "mlir/Pass/PassBase.td"

def FuseGqaPass : Pass<"braid-fuse-gqa", "mlir::ModuleOp"> {
  let summary = "Attention reads grouped K/V heads in place (no repeat_kv)";
  let description = [{
    `attention(q, repeat_kv(k), repeat_kv(v))` becomes `attention(q, k, v)`
    with `num_kv_heads` set to the grouped count, and each
    `attention_grad_input` linked to it through `probs` writes the grouped
    key/value gradients directly, replacing the `repeat_kv_grad_input` that
    summed its repeated ones. The attention kernels read kv head
    h / (H / Hkv) for query head h, as repeat_kv does.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def FuseFlashAttentionPass : Pass<"braid-fuse-flash-attention", "mlir::ModuleOp"> {
  let summary = "attention + attention_grad_input become flash attention";
  let description = [{
    An `attention` whose probabilities are read only by matching
    `attention_grad_input` ops becomes `flash_attention` (output and per-row
    log-sum-exp), and those backward ops `flash_attention_grad_input`, which
    recompute the probabilities tile by tile: O(S) activation memory per
    head instead of O(S^2).
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

#endif // BRAID_FUSE_ATTENTION_TD
