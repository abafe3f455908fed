//===- FusedAttentionOps.td - fused braid ops: Attention ----------*- tablegen -*-===//
//
// Fused ops (docs/fusion.md). Each op's mnemonic is the name of the kernel
// it lowers to; verifiers live in FusedAttentionOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSED_ATTENTION_OPS_TD
#define BRAID_FUSED_ATTENTION_OPS_TD

def Braid_FlashAttentionOp : Braid_PureOp<"flash_attention"> {
  let summary = "Attention by tiles with an online softmax: no probabilities stored";
  let description = [{
    Computes the output of `braid.attention` (same heads, scale, dropout
    draws) without materialising the [B, H, S, S] probabilities; instead it
    returns the per-row log-sum-exp of the scaled, masked scores, lse
    [B, H, S] in f32, from which backward recomputes the probabilities.

    Key j is visible from query i when
    `(!causal || j <= i || j < prefix) && (no segment_ids || seg[b, i] == seg[b, j])`:
    `prefix` > 0 makes the first `prefix` positions a bidirectional prefix
    (prefix-LM); the optional `segment_ids` [B, S] (i32) keep attention
    inside each packed document. `cp` and `cp_kv_step` are those of
    `braid.attention`; a query that sees no key of the block (ring
    attention) gets output 0 and lse -inf.

    ```mlir
    %o, %lse = braid.flash_attention %q, %k, %v {num_heads = 4 : i64,
        num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64,
        scale = 0.25 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64}
        : (tensor<8x64x64xf32>, tensor<8x64x32xf32>, tensor<8x64x32xf32>)
        -> (tensor<8x64x64xf32>, tensor<8x4x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$query, Braid_FloatTensor:$key,
                       Braid_FloatTensor:$value,
                       Optional<Braid_IdTensor>:$segment_ids,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       BoolAttr:$causal, I64Attr:$prefix, F32Attr:$scale,
                       F32Attr:$dropout, I64Attr:$rng_offset,
                       OptionalAttr<BoolAttr>:$head_shard,
                       OptionalAttr<BoolAttr>:$cp,
                       OptionalAttr<I64Attr>:$cp_kv_step);
  let results = (outs Braid_FloatTensor:$result, Braid_StatTensor:$lse);
}

def Braid_AttentionMergeOp : Braid_PureOp<"attention_merge"> {
  let summary = "Join two key blocks' attention outputs by their log-sum-exp";
  let description = [{
    Given the outputs and lse of the same queries over two disjoint sets of
    keys, returns those over their union: lse = log(exp(lse_a) +
    exp(lse_b)) and result = exp(lse_a - lse) * a + exp(lse_b - lse) * b,
    computed in f32 (ring attention joins its steps this way). A row with
    both lse -inf gets 0 and -inf.

    ```mlir
    %o, %lse = braid.attention_merge %oa, %la, %ob, %lb {num_heads = 4 : i64}
        : (tensor<8x32x64xf32>, tensor<8x4x32xf32>, tensor<8x32x64xf32>,
           tensor<8x4x32xf32>) -> (tensor<8x32x64xf32>, tensor<8x4x32xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$a, Braid_StatTensor:$lse_a,
                       Braid_FloatTensor:$b, Braid_StatTensor:$lse_b,
                       I64Attr:$num_heads);
  let results = (outs Braid_FloatTensor:$result, Braid_StatTensor:$lse);
}

def Braid_FlashAttentionGradInputOp : Braid_PureOp<"flash_attention_grad_input"> {
  let summary = "Gradients of flash attention w.r.t. q, k, v (B)";
  let description = [{
    Reads the output gradient, q, k, v, the forward output and its lse, and
    recomputes the probabilities tile by tile. Attributes (and
    `segment_ids`) equal those of the forward op.

    ```mlir
    %dq, %dk, %dv = braid.flash_attention_grad_input %do, %q, %k, %v, %o, %lse
        {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true,
         prefix = 0 : i64, scale = 0.25 : f32, dropout = 0.0 : f32,
         rng_offset = 0 : i64}
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x32xf32>,
           tensor<8x64x32xf32>, tensor<8x64x64xf32>, tensor<8x4x64xf32>)
        -> (tensor<8x64x64xf32>, tensor<8x64x32xf32>, tensor<8x64x32xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$query,
                       Braid_FloatTensor:$key, Braid_FloatTensor:$value,
                       Braid_FloatTensor:$output, Braid_StatTensor:$lse,
                       Optional<Braid_IdTensor>:$segment_ids,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       BoolAttr:$causal, I64Attr:$prefix, F32Attr:$scale,
                       F32Attr:$dropout, I64Attr:$rng_offset,
                       OptionalAttr<BoolAttr>:$head_shard,
                       OptionalAttr<BoolAttr>:$cp,
                       OptionalAttr<I64Attr>:$cp_kv_step);
  let results = (outs Braid_FloatTensor:$query_grad, Braid_FloatTensor:$key_grad,
                      Braid_FloatTensor:$value_grad);
}

#endif // BRAID_FUSED_ATTENTION_OPS_TD
