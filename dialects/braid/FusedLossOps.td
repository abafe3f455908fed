//===- FusedLossOps.td - fused braid ops: Loss ----------*- tablegen -*-===//
//
// Fused ops (docs/fusion.md). Each op's mnemonic is the name of the kernel
// it lowers to; verifiers live in FusedLossOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSED_LOSS_OPS_TD
#define BRAID_FUSED_LOSS_OPS_TD

//===----------------------------------------------------------------------===//
// The LM head chunked with softmax cross-entropy
//===----------------------------------------------------------------------===//

def Braid_LinearCrossEntropyOp : Braid_PureOp<"linear_cross_entropy"> {
  let summary = "Mean cross-entropy of x W^T without materialising the logits";
  let description = [{
    Computes what `braid.linear %x, %w` followed by `braid.cross_entropy`
    computes (the loss and the per-row log-sum-exp), one chunk of rows at a
    time: a chunk's logits live in kernel scratch of at most `chunk` elements
    (at least one row), never as a tensor.

    ```mlir
    %loss, %lse = braid.linear_cross_entropy %x, %w, %labels {chunk = 1048576 : i64}
        : (tensor<8x64x64xf32>, tensor<256x64xf32>, tensor<8x64xi32>) -> (tensor<f32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$labels, I64Attr:$chunk);
  let results = (outs Braid_Scalar:$loss, Braid_StatTensor:$lse);
}

def Braid_LinearCrossEntropyWithGradOp
    : Braid_PureOp<"linear_cross_entropy_with_grad"> {
  let summary = "Loss, dx and dW of the LM head and cross-entropy in one pass";
  let description = [{
    The loss of `braid.linear_cross_entropy` and, in the same pass over the
    logits, the gradients the backward needs: the loss is the last op of
    the forward, so its gradient is the constant `scale` and the logits
    gradient `scale * (softmax(x W^T) - onehot) / rows` is known as soon as
    a chunk of rows has its log-sum-exp. Per chunk of R rows, R the first
    dimension of `workspace` [R, V] (f32): the chunk's logits GEMM into the
    workspace, the row statistics and dlogits, then `dx = dlogits W` and
    `dW += dlogits^T x`. Three GEMMs over the logits, as unfused; the
    logits never exist as a tensor and the backward reads dx, not x. `dx`
    has the type of x; `dW` is f32 or the element type of x, like any
    weight gradient. The workspace is a result so that the memory planner
    places it in the arena; nothing reads it.

    ```mlir
    %loss, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %labels {scale = 1.0 : f32}
        : (tensor<8x64x64xf32>, tensor<256x64xf32>, tensor<8x64xi32>)
        -> (tensor<f32>, tensor<8x64x64xf32>, tensor<256x64xf32>, tensor<512x256xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$labels, F32Attr:$scale);
  let results = (outs Braid_Scalar:$loss, Braid_FloatTensor:$input_grad,
                      Braid_FloatTensor:$weight_grad,
                      Braid_StatTensor:$workspace);
}

//===----------------------------------------------------------------------===//
// The same, vocabulary-parallel: W is one TP rank's rows of the vocabulary
//===----------------------------------------------------------------------===//

def Braid_LinearCrossEntropyStatsOp
    : Braid_PureOp<"linear_cross_entropy_stats"> {
  let summary = "Per-token statistics of x W^T for one TP rank's vocabulary";
  let description = [{
    Computes what `braid.linear %x, %w` followed by
    `braid.cross_entropy_stats` computes: for each row, the maximum of this
    rank's logits, the sum of their exponentials shifted by it, and the
    label's logit where this rank's vocabulary shard holds it (column 0 is
    vocabulary id tpRank * V). As `braid.linear_cross_entropy`, one chunk
    of rows at a time in kernel scratch of at most `chunk` elements.

    ```mlir
    %st = braid.linear_cross_entropy_stats %x, %w, %labels {chunk = 1048576 : i64}
        : (tensor<8x64x64xf32>, tensor<128x64xf32>, tensor<8x64xi32>) -> tensor<8x64x3xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$labels, I64Attr:$chunk);
  let results = (outs Braid_StatTensor:$stats);
}

def Braid_LinearCrossEntropyGradOp : Braid_PureOp<"linear_cross_entropy_grad"> {
  let summary = "dx and dW of a vocabulary-parallel LM head and cross-entropy";
  let description = [{
    What `braid.cross_entropy_grad_input` (vocab_shard) followed by
    `braid.linear_grad_input` and `braid.linear_grad_weight` compute, from
    the whole vocabulary's per-row log-sum-exp `lse`
    (`braid.cross_entropy_combine`), without the logits or their gradient
    as tensors: per chunk of R rows (the first dimension of `workspace`
    [R, V], f32), the chunk's logits GEMM again, its dlogits
    `scale * (exp(logits - lse) - onehot) / rows` for this rank's columns,
    then `dx = dlogits W` (this rank's part of the sum the TP group makes)
    and `dW += dlogits^T x`. Four GEMMs over the logits where the unfused
    ops make three (the logits are computed again), and nothing of size
    [rows, V] but the workspace.

    ```mlir
    %dx, %dw, %ws = braid.linear_cross_entropy_grad %x, %w, %labels, %lse {scale = 1.0 : f32}
        : (tensor<8x64x64xf32>, tensor<128x64xf32>, tensor<8x64xi32>, tensor<8x64xf32>)
        -> (tensor<8x64x64xf32>, tensor<128x64xf32>, tensor<512x128xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$labels, Braid_StatTensor:$lse,
                       F32Attr:$scale);
  let results = (outs Braid_FloatTensor:$input_grad,
                      Braid_FloatTensor:$weight_grad,
                      Braid_StatTensor:$workspace);
}

#endif // BRAID_FUSED_LOSS_OPS_TD
