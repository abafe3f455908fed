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

def Braid_LinearCrossEntropyGradInputOp
    : Braid_PureOp<"linear_cross_entropy_grad_input"> {
  let summary = "dx of the fused LM head and cross-entropy (B)";
  let description = [{
    `dx = dlogits W` with `dlogits = scale * (softmax(x W^T) - onehot) / rows`
    recomputed chunk by chunk of rows from `lse`: `cross_entropy_grad_input`
    followed by `linear_grad_input`.

    ```mlir
    %dx = braid.linear_cross_entropy_grad_input %x, %w, %labels, %lse {chunk = 1048576 : i64, scale = 1.0 : f32}
        : (tensor<8x64x64xf32>, tensor<256x64xf32>, tensor<8x64xi32>, tensor<8x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$labels, Braid_StatTensor:$lse,
                       F32Attr:$scale, I64Attr:$chunk);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_LinearCrossEntropyGradWeightOp
    : Braid_PureOp<"linear_cross_entropy_grad_weight"> {
  let summary = "dW of the fused LM head and cross-entropy (W)";
  let description = [{
    `dW = dlogits^T x`, recomputing `dlogits` chunk by chunk of vocabulary
    rows of W (each chunk over all rows of x): `cross_entropy_grad_input`
    followed by `linear_grad_weight`. The result is f32 or the element type
    of x, like any weight gradient.

    ```mlir
    %dw = braid.linear_cross_entropy_grad_weight %x, %w, %labels, %lse {chunk = 1048576 : i64, scale = 1.0 : f32}
        : (tensor<8x64x64xf32>, tensor<256x64xf32>, tensor<8x64xi32>, tensor<8x64xf32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_IdTensor:$labels, Braid_StatTensor:$lse,
                       F32Attr:$scale, I64Attr:$chunk);
  let results = (outs Braid_FloatTensor:$weight_grad);
}

#endif // BRAID_FUSED_LOSS_OPS_TD
