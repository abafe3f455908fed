//===- BraidOps.td - braid dialect ops --------------------------*- tablegen -*-===//
//
// Shapes use B (micro-batch), S (sequence), D (hidden), V (vocabulary),
// H (heads), Hkv (key/value heads), Dh (head dim), F (ffn hidden). Leading
// dimensions written `...` may be any number of batch dimensions.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_OPS_TD
#define BRAID_OPS_TD

include "BraidBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// A forward op with its gradient rule in Gradients.cpp.
defvar Braid_Differentiable =
    DeclareOpInterfaceMethods<Braid_DifferentiableOpInterface>;

class Braid_PureOp<string mnemonic, list<Trait> traits = []>
    : Braid_Op<mnemonic, !listconcat(traits, [Pure])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

def Braid_EmbeddingOp : Braid_PureOp<"embedding", [Braid_Differentiable]> {
  let summary = "Row lookup in an embedding table";
  let description = [{
    `y[b, s, :] = table[ids[b, s], :]`. With `vocab_shard` (braid-shard)
    the table is this TP rank's rows of the vocabulary; ids outside them
    give zero rows, so the ranks' results sum to the whole lookup.

    ```mlir
    %y = braid.embedding %table, %ids
        : (tensor<256x64xf32>, tensor<8x64xi32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$table, Braid_IdTensor:$ids,
                       OptionalAttr<BoolAttr>:$vocab_shard);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_EmbeddingGradWeightOp : Braid_PureOp<"embedding_grad_weight", [Braid_WeightGradient]> {
  let summary = "Gradient of an embedding table (W)";
  let description = [{
    Scatter-adds the rows of `grad` into a zero table of the result's shape:
    `dtable[ids[b, s], :] += grad[b, s, :]`.

    ```mlir
    %dt = braid.embedding_grad_weight %dy, %ids
        : (tensor<8x64x64xf32>, tensor<8x64xi32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_IdTensor:$ids,
                       OptionalAttr<BoolAttr>:$vocab_shard);
  let results = (outs Braid_FloatTensor:$table_grad);
}

def Braid_DocumentIdsOp : Braid_PureOp<"document_ids"> {
  let summary = "Document index of each position of packed token rows";
  let description = [{
    `ids[b, i]` is the number of positions j < i of row b whose token is
    `separator`: a separator ends its document and belongs to it, and each
    row's first document is 0. The segment ids of a document attention mask
    (`braid.attention` and `braid.flash_attention`).

    ```mlir
    %ids = braid.document_ids %tokens {separator = 10 : i64}
        : (tensor<8x64xi32>) -> tensor<8x64xi32>
    ```
  }];
  let arguments = (ins Braid_IdTensor:$tokens, I64Attr:$separator);
  let results = (outs Braid_IdTensor:$ids);
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

def Braid_LinearOp : Braid_PureOp<"linear", [Braid_Differentiable]> {
  let summary = "y = x W^T (+ b), W in [out, in] layout";
  let description = [{
    With `partial_bias` (braid-shard's row-parallel linear, whose result is
    one TP rank's part of a sum) only TP rank 0 adds the bias, so the sum
    over the ranks holds it once.

    ```mlir
    %y = braid.linear %x, %w, %b
        : (tensor<8x64x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<8x64x192xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Optional<Braid_FloatTensor>:$bias,
                       OptionalAttr<BoolAttr>:$partial_bias);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_LinearGradInputOp : Braid_PureOp<"linear_grad_input"> {
  let summary = "dx = dy W (B)";
  let description = [{
    ```mlir
    %dx = braid.linear_grad_input %dy, %w
        : (tensor<8x64x192xf32>, tensor<192x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$weight);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_LinearGradWeightOp : Braid_PureOp<"linear_grad_weight", [Braid_WeightGradient]> {
  let summary = "dW = dy^T x, db = sum(dy) (W)";
  let description = [{
    The bias gradient is produced when the forward linear had a bias.

    ```mlir
    %dw, %db = braid.linear_grad_weight %dy, %x
        : (tensor<8x64x192xf32>, tensor<8x64x64xf32>) -> (tensor<192x64xf32>, tensor<192xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$weight_grad,
                      Optional<Braid_FloatTensor>:$bias_grad);
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

def Braid_LayerNormOp : Braid_PureOp<"layer_norm", [Braid_Differentiable]> {
  let summary = "LayerNorm over the last dimension";
  let description = [{
    Also returns the per-row mean and reciprocal standard deviation, which the
    backward ops consume instead of recomputing them.

    ```mlir
    %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32}
        : (tensor<8x64x64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> (tensor<8x64x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_FloatTensor:$bias, F32Attr:$eps);
  let results = (outs Braid_FloatTensor:$result, Braid_StatTensor:$mean,
                      Braid_StatTensor:$rstd);
}

def Braid_LayerNormGradInputOp : Braid_PureOp<"layer_norm_grad_input"> {
  let summary = "Input gradient of LayerNorm (B)";
  let description = [{
    ```mlir
    %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<64xf32>, tensor<8x64xf32>,
           tensor<8x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_FloatTensor:$weight, Braid_StatTensor:$mean,
                       Braid_StatTensor:$rstd);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_LayerNormGradWeightOp : Braid_PureOp<"layer_norm_grad_weight", [Braid_WeightGradient]> {
  let summary = "Weight and bias gradients of LayerNorm (W)";
  let description = [{
    ```mlir
    %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>)
        -> (tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_StatTensor:$mean, Braid_StatTensor:$rstd);
  let results = (outs Braid_FloatTensor:$weight_grad, Braid_FloatTensor:$bias_grad);
}

def Braid_RMSNormOp : Braid_PureOp<"rms_norm", [Braid_Differentiable]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `y = x * rstd * weight` with `rstd = 1 / sqrt(mean(x^2) + eps)`; returns
    rstd for backward.

    ```mlir
    %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32}
        : (tensor<8x64x64xf32>, tensor<64xf32>) -> (tensor<8x64x64xf32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       F32Attr:$eps);
  let results = (outs Braid_FloatTensor:$result, Braid_StatTensor:$rstd);
}

def Braid_RMSNormGradInputOp : Braid_PureOp<"rms_norm_grad_input"> {
  let summary = "Input gradient of RMSNorm (B)";
  let description = [{
    ```mlir
    %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<64xf32>, tensor<8x64xf32>)
        -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_FloatTensor:$weight, Braid_StatTensor:$rstd);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_RMSNormGradWeightOp : Braid_PureOp<"rms_norm_grad_weight", [Braid_WeightGradient]> {
  let summary = "Weight gradient of RMSNorm (W)";
  let description = [{
    ```mlir
    %dg = braid.rms_norm_grad_weight %dy, %x, %rstd
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64xf32>) -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_StatTensor:$rstd);
  let results = (outs Braid_FloatTensor:$weight_grad);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Braid_AttentionOp : Braid_PureOp<"attention", [Braid_Differentiable]> {
  let summary = "Reference (unfused) scaled dot-product attention";
  let description = [{
    Heads are packed in the last dimension: q is [B, S, H*Dh], k and v are
    [B, S, Hkv*Dh] with Hkv dividing H (query head h reads kv head
    h / (H/Hkv)). Returns the output [B, S, H*Dh] and the softmax
    probabilities [B, H, S, S] (before dropout, in the element type of the
    activations: bf16 halves the largest saved tensor), which backward
    consumes; the
    dropout mask is regenerated from (seed, rng_offset, step, micro-batch).

    Masks, as for `braid.flash_attention`: key j is visible from query i
    when `(!causal || j <= i || j < prefix) && (no segment_ids || seg[b, i]
    == seg[b, j])`; an absent `prefix` is 0. The probabilities of keys a
    query does not see are 0.

    With `head_shard` (braid-shard) the operands hold one TP rank's
    `num_heads` heads of `num_heads` times the group's size; dropout then
    draws by the whole tensor's head index, as one rank would.

    With `cp` (braid-shard's context parallel) the queries are this CP
    rank's load-balanced part of the sequence, and the keys and values the
    whole sequence in order (S_k a multiple of S_q; the probabilities are
    [B, H, S_q, S_k]); or, with `cp_kv_step = t`, the part of CP rank
    (rank - t) mod CP (ring attention's step t, S_k = S_q). Masks, segment
    ids ([B, S], the whole sequence's) and dropout draws then go by
    positions in the whole sequence.

    ```mlir
    %o, %p = braid.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 4 : i64,
        causal = true, scale = 0.25 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64}
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x64xf32>)
        -> (tensor<8x64x64xf32>, tensor<8x4x64x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$query, Braid_FloatTensor:$key,
                       Braid_FloatTensor:$value,
                       Optional<Braid_IdTensor>:$segment_ids,
                       I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, BoolAttr:$causal, F32Attr:$scale,
                       F32Attr:$dropout, I64Attr:$rng_offset,
                       OptionalAttr<I64Attr>:$prefix,
                       OptionalAttr<BoolAttr>:$head_shard,
                       OptionalAttr<BoolAttr>:$cp,
                       OptionalAttr<I64Attr>:$cp_kv_step);
  let results = (outs Braid_FloatTensor:$result, Braid_FloatTensor:$probs);
}

def Braid_AttentionGradInputOp : Braid_PureOp<"attention_grad_input"> {
  let summary = "Gradients of reference attention w.r.t. q, k, v (B)";
  let description = [{
    Attributes (and `segment_ids`) equal those of the forward op.

    ```mlir
    %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 4 : i64,
        num_kv_heads = 4 : i64, causal = true, scale = 0.25 : f32, dropout = 0.0 : f32,
        rng_offset = 0 : i64}
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x64xf32>,
           tensor<8x4x64x64xf32>) -> (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$query,
                       Braid_FloatTensor:$key, Braid_FloatTensor:$value,
                       Braid_FloatTensor:$probs,
                       Optional<Braid_IdTensor>:$segment_ids,
                       I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, BoolAttr:$causal, F32Attr:$scale,
                       F32Attr:$dropout, I64Attr:$rng_offset,
                       OptionalAttr<I64Attr>:$prefix,
                       OptionalAttr<BoolAttr>:$head_shard,
                       OptionalAttr<BoolAttr>:$cp,
                       OptionalAttr<I64Attr>:$cp_kv_step);
  let results = (outs Braid_FloatTensor:$query_grad, Braid_FloatTensor:$key_grad,
                      Braid_FloatTensor:$value_grad);
}

def Braid_RepeatKVOp : Braid_PureOp<"repeat_kv", [Braid_Differentiable]> {
  let summary = "Materialise grouped key/value heads for every query head";
  let description = [{
    [B, S, Hkv*Dh] -> [B, S, H*Dh]: head h of the result is head
    h / (H/Hkv) of the input.

    With `tp_slice` (braid-shard, when a TP group has more ranks than the
    model has kv heads) the input holds every kv head and the result this
    TP rank's `num_heads` query heads: head h reads kv head
    (rank * num_heads + h) / `group`, `group` being the model's query heads
    per kv head. Its gradient is then one rank's part of a sum.

    ```mlir
    %y = braid.repeat_kv %k {num_heads = 4 : i64, num_kv_heads = 2 : i64}
        : (tensor<8x64x32xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, OptionalAttr<BoolAttr>:$tp_slice,
                       OptionalAttr<I64Attr>:$group);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_RepeatKVGradInputOp : Braid_PureOp<"repeat_kv_grad_input"> {
  let summary = "Sum the gradients of repeated heads back onto their kv head (B)";
  let description = [{
    ```mlir
    %dx = braid.repeat_kv_grad_input %dy {num_heads = 4 : i64, num_kv_heads = 2 : i64}
        : (tensor<8x64x64xf32>) -> tensor<8x64x32xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, OptionalAttr<BoolAttr>:$tp_slice,
                       OptionalAttr<I64Attr>:$group);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_RoPEOp : Braid_PureOp<"rope", [Braid_Differentiable]> {
  let summary = "Rotary position embedding, rotate-half layout";
  let description = [{
    On [B, S, H*Dh]: within each head, element i < Dh/2 pairs with i + Dh/2
    and both rotate by angle s * theta^(-2i/Dh), s being the sequence
    position. This is Hugging Face Llama's layout. With `cp` (context
    parallel) the sequence dimension holds this CP rank's load-balanced part
    of the sequence, and s is the position in the whole sequence.

    ```mlir
    %y = braid.rope %q {num_heads = 4 : i64, theta = 10000.0 : f32}
        : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, I64Attr:$num_heads,
                       F32Attr:$theta, OptionalAttr<BoolAttr>:$cp);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_RoPEGradInputOp : Braid_PureOp<"rope_grad_input"> {
  let summary = "Gradient of RoPE: the inverse rotation (B)";
  let description = [{
    ```mlir
    %dx = braid.rope_grad_input %dy {num_heads = 4 : i64, theta = 10000.0 : f32}
        : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, I64Attr:$num_heads,
                       F32Attr:$theta, OptionalAttr<BoolAttr>:$cp);
  let results = (outs Braid_FloatTensor:$input_grad);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Braid_GeLUOp : Braid_PureOp<"gelu", [Braid_Differentiable]> {
  let summary = "GELU, tanh approximation";
  let description = [{
    ```mlir
    %y = braid.gelu %x : (tensor<8x64x256xf32>) -> tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_GeLUGradInputOp : Braid_PureOp<"gelu_grad_input"> {
  let summary = "Gradient of GELU (B)";
  let description = [{
    ```mlir
    %dx = braid.gelu_grad_input %dy, %x
        : (tensor<8x64x256xf32>, tensor<8x64x256xf32>) -> tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_SwiGLUOp : Braid_PureOp<"swiglu", [Braid_Differentiable]> {
  let summary = "silu(gate) * up";
  let description = [{
    ```mlir
    %y = braid.swiglu %g, %u
        : (tensor<8x64x172xf32>, tensor<8x64x172xf32>) -> tensor<8x64x172xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$gate, Braid_FloatTensor:$up);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_SwiGLUGradInputOp : Braid_PureOp<"swiglu_grad_input"> {
  let summary = "Gradients of SwiGLU w.r.t. gate and up (B)";
  let description = [{
    ```mlir
    %dg, %du = braid.swiglu_grad_input %dy, %g, %u
        : (tensor<8x64x172xf32>, tensor<8x64x172xf32>, tensor<8x64x172xf32>)
        -> (tensor<8x64x172xf32>, tensor<8x64x172xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$gate,
                       Braid_FloatTensor:$up);
  let results = (outs Braid_FloatTensor:$gate_grad, Braid_FloatTensor:$up_grad);
}

def Braid_AddOp : Braid_PureOp<"add", [Commutative, Braid_Differentiable]> {
  let summary = "Elementwise sum: the residual add, and gradient accumulation";
  let description = [{
    Its backward passes the incoming gradient to both operands unchanged, so
    it has no gradient op.

    ```mlir
    %z = braid.add %x, %y
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$lhs, Braid_FloatTensor:$rhs);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_DropoutOp : Braid_PureOp<"dropout", [Braid_Differentiable]> {
  let summary = "Inverted dropout with a counter-based mask";
  let description = [{
    Keeps element i when uniform(dropoutKey(seed, rng_offset, step, micro), i)
    >= p and scales kept elements by 1/(1-p). The mask is never stored: the
    gradient op regenerates it. With `tp_dim` (braid-shard's sequence
    parallel) the input is this TP rank's part along that dimension, and i
    is the element's index in the whole tensor. With `cp_dim` (context
    parallel) that dimension holds this CP rank's load-balanced part of the
    sequence, and i is again the whole tensor's index.

    ```mlir
    %y = braid.dropout %x {p = 0.1 : f32, rng_offset = 3 : i64}
        : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, F32Attr:$p, I64Attr:$rng_offset,
                       OptionalAttr<I64Attr>:$tp_dim,
                       OptionalAttr<I64Attr>:$cp_dim);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_DropoutGradInputOp : Braid_PureOp<"dropout_grad_input"> {
  let summary = "Gradient of dropout: the same mask and scale (B)";
  let description = [{
    ```mlir
    %dx = braid.dropout_grad_input %dy {p = 0.1 : f32, rng_offset = 3 : i64}
        : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, F32Attr:$p, I64Attr:$rng_offset,
                       OptionalAttr<I64Attr>:$tp_dim,
                       OptionalAttr<I64Attr>:$cp_dim);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_SplitOp : Braid_PureOp<"split", [Braid_Differentiable]> {
  let summary = "Split the last dimension into equal parts";
  let description = [{
    GPT-2's fused q/k/v projection is split this way.

    ```mlir
    %q, %k, %v = braid.split %qkv
        : (tensor<8x64x192xf32>) -> (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input);
  let results = (outs Variadic<Braid_FloatTensor>:$parts);
}

def Braid_SplitGradInputOp : Braid_PureOp<"split_grad_input"> {
  let summary = "Gradient of split: concatenation along the last dimension (B)";
  let description = [{
    ```mlir
    %dqkv = braid.split_grad_input %dq, %dk, %dv
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64x64xf32>) -> tensor<8x64x192xf32>
    ```
  }];
  let arguments = (ins Variadic<Braid_FloatTensor>:$part_grads);
  let results = (outs Braid_FloatTensor:$input_grad);
}

//===----------------------------------------------------------------------===//
// Precision
//===----------------------------------------------------------------------===//

def Braid_CastOp : Braid_PureOp<"cast", [Braid_Differentiable]> {
  let summary = "Convert a tensor between f32 and bf16";
  let description = [{
    Same shape, other element type: f32 to bf16 rounds to nearest even (NaN
    stays NaN), bf16 to f32 is exact. In a BF16 training step each f32
    parameter is cast once, at the top of the step, and compute reads the
    bf16 value; `braid-lower-to-sched` turns such a cast into a persistent
    weight copy that the optimizer refreshes after each AdamW step.

    ```mlir
    %wb = braid.cast %w : (tensor<192x64xf32>) -> tensor<192x64xbf16>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Braid_CrossEntropyOp : Braid_PureOp<"cross_entropy", [Braid_Differentiable]> {
  let summary = "Mean softmax cross-entropy over all tokens";
  let description = [{
    Returns the mean loss over the B*S tokens and the per-token log-sum-exp of
    the logits, which backward consumes.

    ```mlir
    %loss, %lse = braid.cross_entropy %logits, %labels
        : (tensor<8x64x256xf32>, tensor<8x64xi32>) -> (tensor<f32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$logits, Braid_IdTensor:$labels);
  let results = (outs Braid_Scalar:$loss, Braid_StatTensor:$lse);
}

def Braid_CrossEntropyGradInputOp : Braid_PureOp<"cross_entropy_grad_input"> {
  let summary = "Gradient of the mean cross-entropy w.r.t. the logits (B)";
  let description = [{
    `dlogits = scale * (softmax(logits) - onehot(labels)) / (B*S)`. `scale`
    is the incoming gradient of the loss (1 for a single micro-batch; the
    lowering sets 1/num_micro_batches under gradient accumulation). With
    `vocab_shard` the logits are one TP rank's columns of the vocabulary
    and `lse` the whole vocabulary's (braid.cross_entropy_combine).

    ```mlir
    %dl = braid.cross_entropy_grad_input %logits, %labels, %lse {scale = 1.0 : f32}
        : (tensor<8x64x256xf32>, tensor<8x64xi32>, tensor<8x64xf32>) -> tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$logits, Braid_IdTensor:$labels,
                       Braid_StatTensor:$lse, F32Attr:$scale,
                       OptionalAttr<BoolAttr>:$vocab_shard);
  let results = (outs Braid_FloatTensor:$logits_grad);
}

// The vocabulary-parallel cross-entropy of braid-shard: each TP rank holds
// its columns of the logits; one all-gather of three numbers per token
// replaces the whole logits.
def Braid_CrossEntropyStatsOp : Braid_PureOp<"cross_entropy_stats"> {
  let summary = "Per-token statistics of one TP rank's logits columns";
  let description = [{
    For each token: the maximum m of this rank's logits, the sum of
    exp(x - m) over them, and the label's logit when this rank holds the
    label's column (else 0).

    ```mlir
    %st = braid.cross_entropy_stats %logits, %labels
        : (tensor<8x64x128xf32>, tensor<8x64xi32>) -> tensor<8x64x3xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$logits, Braid_IdTensor:$labels);
  let results = (outs Braid_StatTensor:$stats);
}

def Braid_CrossEntropyCombineOp : Braid_PureOp<"cross_entropy_combine"> {
  let summary = "The mean cross-entropy from every TP rank's statistics";
  let description = [{
    `stats` is the TP group's cross_entropy_stats stacked along dimension 0
    in rank order (braid.comm.all_gather). Returns the mean loss over the
    tokens and each token's log-sum-exp over the whole vocabulary, as
    braid.cross_entropy does.

    ```mlir
    %loss, %lse = braid.cross_entropy_combine %all, %labels
        : (tensor<16x64x3xf32>, tensor<8x64xi32>) -> (tensor<f32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_StatTensor:$stats, Braid_IdTensor:$labels);
  let results = (outs Braid_Scalar:$loss, Braid_StatTensor:$lse);
}

//===----------------------------------------------------------------------===//
// Collectives (inserted by braid-shard)
//===----------------------------------------------------------------------===//

def Braid_CommAllReduceOp : Braid_PureOp<"comm.all_reduce"> {
  let summary = "Sum a value over the ranks of a group along a mesh axis";
  let description = [{
    Turns a `partial` value into a `replicated` one.

    ```mlir
    %y = braid.comm.all_reduce %x {axis = #braid.axis<tp>}
        : (tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_CommAxisAttr:$axis);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_CommAllGatherOp : Braid_PureOp<"comm.all_gather"> {
  let summary = "Join a group's values along a dimension in rank order";
  let description = [{
    Along dimension `dim` (0 when absent): sequence parallel gathers the
    sequence (dimension 1) before a column-parallel linear. Along `cp` the
    parts of the sequence are the ranks' load-balanced ones, and the result
    holds the whole sequence in order (context parallel's keys and values).

    ```mlir
    %all = braid.comm.all_gather %st {axis = #braid.axis<tp>}
        : (tensor<8x64x3xf32>) -> tensor<16x64x3xf32>
    %x = braid.comm.all_gather %h {axis = #braid.axis<tp>, dim = 1 : i64}
        : (tensor<8x32x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, Braid_CommAxisAttr:$axis,
                       OptionalAttr<I64Attr>:$dim);
  let results = (outs AnyStaticShapeTensor:$result);
}

def Braid_CommReduceScatterOp : Braid_PureOp<"comm.reduce_scatter"> {
  let summary = "This rank's part, along a dimension, of a group's sum";
  let description = [{
    Turns a `partial` value into one split along `dim`: sequence parallel's
    sum after a row-parallel linear. Along `cp` each rank keeps its
    load-balanced part of the sequence (context parallel's key and value
    gradients).

    ```mlir
    %y = braid.comm.reduce_scatter %o {axis = #braid.axis<tp>, dim = 1 : i64}
        : (tensor<8x64x64xf32>) -> tensor<8x32x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_CommAxisAttr:$axis,
                       I64Attr:$dim);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_CommShiftOp : Braid_PureOp<"comm.shift"> {
  let summary = "Pass a value one step along a ring of the group's ranks";
  let description = [{
    Every rank of the group along `axis` sends its input to the rank whose
    coordinate is its own plus `offset` (modulo the group's size) and
    returns what the rank `offset` before it sent: ring attention's key and
    value blocks (offset 1) and, in backward, the blocks and their
    gradients going the other way (offset -1).

    ```mlir
    %k1 = braid.comm.shift %k0 {axis = #braid.axis<cp>, offset = 1 : i64}
        : (tensor<8x32x64xf32>) -> tensor<8x32x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_CommAxisAttr:$axis,
                       I64Attr:$offset);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_CommDispatchOp : Braid_PureOp<"comm.dispatch", [Braid_Differentiable]> {
  let summary = "Send each token row to its expert's rank of the EP group";
  let description = [{
    Expert parallel's dispatch (docs/moe.md). `rows` are this rank's token
    rows in expert-major order (moe_permute's), `counts` the EP group's
    counts gathered ([G x G x m] i32: rank s's G x m counts, the rows it
    sends each expert, expert k x m + j being rank k's local expert j).
    Every rank sends each rank the rows of its experts and receives, sender
    by sender, the rows of its own m experts; the result has room for the
    plan's bound of received rows, the rest zero. The gradient is the
    combine of the result's gradient.

    ```mlir
    %r = braid.comm.dispatch %xs, %all {axis = #braid.axis<ep>}
        : (tensor<128x64xf32>, tensor<16xi32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$rows, Braid_IdTensor:$counts,
                       Braid_CommAxisAttr:$axis);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_CommCombineOp : Braid_PureOp<"comm.combine", [Braid_Differentiable]> {
  let summary = "Return the experts' rows to the ranks that sent them";
  let description = [{
    The way back of braid.comm.dispatch with the same counts: `rows` in
    the dispatch's received layout go back to their senders, and each rank
    gets its own rows in their original (expert-major) order. The gradient
    is the dispatch of the result's gradient.

    ```mlir
    %y = braid.comm.combine %ys, %all {axis = #braid.axis<ep>}
        : (tensor<256x64xf32>, tensor<16xi32>) -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$rows, Braid_IdTensor:$counts,
                       Braid_CommAxisAttr:$axis);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_CommReplicateExpertsOp : Braid_PureOp<"comm.replicate_experts", [Braid_Differentiable]> {
  let summary = "Copy the hot experts' weights to every rank of the EP group";
  let description = [{
    Hot-expert replication (docs/moe.md): `weight` is this rank's share of
    a layer's stacked expert weights (`[m, ...]`, experts rank x m to rank
    x m + m - 1), `hot` the group's hot experts (`[H]`, -1 for an unused
    slot). Slot h of the result (`[H, ...]`) is expert hot[h]'s weight,
    sent by the rank that holds it; an unused slot is zero. The gradient
    is braid.comm.reduce_replicas of the result's gradient.

    ```mlir
    %wh = braid.comm.replicate_experts %w, %hot {axis = #braid.axis<ep>}
        : (tensor<2x32x64xf32>, tensor<1xi32>) -> tensor<1x32x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$weight, Braid_IdTensor:$hot,
                       Braid_CommAxisAttr:$axis);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_CommReduceReplicasOp : Braid_PureOp<"comm.reduce_replicas"> {
  let summary = "Sum the replicas' weight gradients into their owners";
  let description = [{
    The way back of braid.comm.replicate_experts: `grad` (`[H, ...]`) is
    each rank's gradient of the replicated weights; the result (`[m,
    ...]`, the owner's share) holds, for each hot expert this rank holds,
    the group's gradients summed in rank order (rank 0's, plus rank 1's,
    and so on: the order in which the owner's grouped weight gradient sums
    its senders' blocks), and zero for the others.

    ```mlir
    %dw = braid.comm.reduce_replicas %dwh, %hot {axis = #braid.axis<ep>}
        : (tensor<1x32x64xf32>, tensor<1xi32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_IdTensor:$hot,
                       Braid_CommAxisAttr:$axis);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_TakePartOp : Braid_PureOp<"take_part"> {
  let summary = "This rank's part of a replicated value along a dimension";
  let description = [{
    No communication: each rank keeps its part of dimension `dim`. Along
    `tp` (the default) that is part `rank` of equal consecutive parts
    (sequence parallel's position ids); along `cp` it is the rank's
    load-balanced part of the sequence: chunks `rank` and
    2 * CP - 1 - `rank` of 2 * CP (context parallel's inputs).

    ```mlir
    %p = braid.take_part %positions {dim = 1 : i64}
        : (tensor<8x64xi32>) -> tensor<8x32xi32>
    %t = braid.take_part %tokens {axis = #braid.axis<cp>, dim = 1 : i64}
        : (tensor<8x64xi32>) -> tensor<8x32xi32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, I64Attr:$dim,
                       OptionalAttr<Braid_CommAxisAttr>:$axis);
  let results = (outs AnyStaticShapeTensor:$result);
}

// Fused ops, one file per group of fusions (docs/fusion.md).
include "FusedElementwiseOps.td"
include "FusedAttentionOps.td"
include "FusedLossOps.td"
// Mixture of experts (docs/moe.md).
include "MoeOps.td"

#endif // BRAID_OPS_TD
