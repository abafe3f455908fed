//===- FusedElementwiseOps.td - fused braid ops: Elementwise ----------*- tablegen -*-===//
//
// Fused ops (docs/fusion.md). Each op's mnemonic is the name of the kernel
// it lowers to; verifiers live in FusedElementwiseOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSED_ELEMENTWISE_OPS_TD
#define BRAID_FUSED_ELEMENTWISE_OPS_TD

//===----------------------------------------------------------------------===//
// add + norm (+ dropout)
//===----------------------------------------------------------------------===//

def Braid_FusedAddRMSNormOp : Braid_PureOp<"fused_add_rms_norm"> {
  let summary = "Residual add (with dropout on the branch) and RMSNorm";
  let description = [{
    `sum = residual + dropout(branch)`, then RMSNorm of `sum`: returns the sum
    (the new residual stream), the normalised rows and their rstd. With
    `p = 0` there is no dropout and `rng_offset` is unused.

    ```mlir
    %s, %y, %rstd = braid.fused_add_rms_norm %r, %x, %g
        {eps = 1.0e-05 : f32, p = 0.0 : f32, rng_offset = 0 : i64}
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<64xf32>)
        -> (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$residual, Braid_FloatTensor:$branch,
                       Braid_FloatTensor:$weight, F32Attr:$eps, F32Attr:$p,
                       I64Attr:$rng_offset,
                       OptionalAttr<I64Attr>:$tp_dim,
                       OptionalAttr<I64Attr>:$cp_dim);
  let results = (outs Braid_FloatTensor:$sum, Braid_FloatTensor:$result,
                      Braid_StatTensor:$rstd);
}

def Braid_FusedAddLayerNormOp : Braid_PureOp<"fused_add_layer_norm"> {
  let summary = "Residual add (with dropout on the branch) and LayerNorm";
  let description = [{
    `sum = residual + dropout(branch)`, then LayerNorm of `sum`.

    ```mlir
    %s, %y, %mean, %rstd = braid.fused_add_layer_norm %r, %x, %g, %b
        {eps = 1.0e-05 : f32, p = 0.1 : f32, rng_offset = 2 : i64}
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$residual, Braid_FloatTensor:$branch,
                       Braid_FloatTensor:$weight, Braid_FloatTensor:$bias,
                       F32Attr:$eps, F32Attr:$p, I64Attr:$rng_offset,
                       OptionalAttr<I64Attr>:$tp_dim,
                       OptionalAttr<I64Attr>:$cp_dim);
  let results = (outs Braid_FloatTensor:$sum, Braid_FloatTensor:$result,
                      Braid_StatTensor:$mean, Braid_StatTensor:$rstd);
}

def Braid_FusedAddRMSNormGradInputOp
    : Braid_PureOp<"fused_add_rms_norm_grad_input"> {
  let summary = "RMSNorm input gradient plus the residual's gradient (B)";
  let description = [{
    `rms_norm_grad_input(grad, input, weight, rstd) + residual_grad`: the
    gradient of the residual stream below an add+norm.

    ```mlir
    %dx = braid.fused_add_rms_norm_grad_input %dy, %x, %g, %rstd, %dr
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<64xf32>, tensor<8x64xf32>,
           tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_FloatTensor:$weight, Braid_StatTensor:$rstd,
                       Braid_FloatTensor:$residual_grad);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_FusedAddLayerNormGradInputOp
    : Braid_PureOp<"fused_add_layer_norm_grad_input"> {
  let summary = "LayerNorm input gradient plus the residual's gradient (B)";
  let description = [{
    ```mlir
    %dx = braid.fused_add_layer_norm_grad_input %dy, %x, %g, %mean, %rstd, %dr
        : (tensor<8x64x64xf32>, tensor<8x64x64xf32>, tensor<64xf32>, tensor<8x64xf32>,
           tensor<8x64xf32>, tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_FloatTensor:$weight, Braid_StatTensor:$mean,
                       Braid_StatTensor:$rstd, Braid_FloatTensor:$residual_grad);
  let results = (outs Braid_FloatTensor:$input_grad);
}

//===----------------------------------------------------------------------===//
// bias + GELU, bias + dropout + add
//===----------------------------------------------------------------------===//

def Braid_FusedBiasGeLUOp : Braid_PureOp<"fused_bias_gelu"> {
  let summary = "gelu(input + bias), the bias broadcast over rows";
  let description = [{
    ```mlir
    %y = braid.fused_bias_gelu %h, %b
        : (tensor<8x64x256xf32>, tensor<256xf32>) -> tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$bias);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_FusedBiasGeLUGradInputOp
    : Braid_PureOp<"fused_bias_gelu_grad_input"> {
  let summary = "Gradient of gelu(input + bias) w.r.t. input (B)";
  let description = [{
    The bias gradient is the row sum of this result, which the producing
    linear's weight-gradient op already computes.

    ```mlir
    %dx = braid.fused_bias_gelu_grad_input %dy, %h, %b
        : (tensor<8x64x256xf32>, tensor<8x64x256xf32>, tensor<256xf32>)
        -> tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$input,
                       Braid_FloatTensor:$bias);
  let results = (outs Braid_FloatTensor:$input_grad);
}

def Braid_FusedBiasDropoutAddOp : Braid_PureOp<"fused_bias_dropout_add"> {
  let summary = "residual + dropout(input + bias)";
  let description = [{
    The epilogue of an output projection: bias, dropout (none when `p = 0`)
    and the residual add in one pass. Its backward is that of the unfused
    ops: the incoming gradient, through the same dropout mask.

    ```mlir
    %y = braid.fused_bias_dropout_add %h, %b, %r {p = 0.1 : f32, rng_offset = 2 : i64}
        : (tensor<8x64x64xf32>, tensor<64xf32>, tensor<8x64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$bias,
                       Braid_FloatTensor:$residual, F32Attr:$p,
                       I64Attr:$rng_offset,
                       OptionalAttr<I64Attr>:$tp_dim,
                       OptionalAttr<I64Attr>:$cp_dim);
  let results = (outs Braid_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// bias + SwiGLU
//===----------------------------------------------------------------------===//

def Braid_FusedBiasSwiGLUOp : Braid_PureOp<"fused_bias_swiglu"> {
  let summary = "silu(gate + gate_bias) * (up + up_bias)";
  let description = [{
    The gate and up projections' biases, added inside SwiGLU.

    ```mlir
    %y = braid.fused_bias_swiglu %g, %u, %bg, %bu
        : (tensor<8x64x172xf32>, tensor<8x64x172xf32>, tensor<172xf32>, tensor<172xf32>)
        -> tensor<8x64x172xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$gate, Braid_FloatTensor:$up,
                       Braid_FloatTensor:$gate_bias,
                       Braid_FloatTensor:$up_bias);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_FusedBiasSwiGLUGradInputOp
    : Braid_PureOp<"fused_bias_swiglu_grad_input"> {
  let summary = "Gradients of fused_bias_swiglu w.r.t. gate and up (B)";
  let description = [{
    ```mlir
    %dg, %du = braid.fused_bias_swiglu_grad_input %dy, %g, %u, %bg, %bu
        : (tensor<8x64x172xf32>, tensor<8x64x172xf32>, tensor<8x64x172xf32>,
           tensor<172xf32>, tensor<172xf32>)
        -> (tensor<8x64x172xf32>, tensor<8x64x172xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$gate,
                       Braid_FloatTensor:$up, Braid_FloatTensor:$gate_bias,
                       Braid_FloatTensor:$up_bias);
  let results = (outs Braid_FloatTensor:$gate_grad, Braid_FloatTensor:$up_grad);
}

//===----------------------------------------------------------------------===//
// RoPE in the projection's epilogue
//===----------------------------------------------------------------------===//

def Braid_FusedLinearRoPEOp : Braid_PureOp<"fused_linear_rope"> {
  let summary = "rope(x W^T (+ b)): a q or k projection with RoPE applied";
  let description = [{
    The projection's output is rotated in place before it is stored, so the
    unrotated product never becomes a tensor of the graph.

    ```mlir
    %q = braid.fused_linear_rope %h, %wq {num_heads = 4 : i64, theta = 1.0e+04 : f32}
        : (tensor<8x64x64xf32>, tensor<64x64xf32>) -> tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Optional<Braid_FloatTensor>:$bias, I64Attr:$num_heads,
                       F32Attr:$theta, OptionalAttr<BoolAttr>:$cp);
  let results = (outs Braid_FloatTensor:$result);
}

def Braid_FusedLinearRoPEGradInputOp
    : Braid_PureOp<"fused_linear_rope_grad_input"> {
  let summary = "Input gradient through RoPE and the projection (B)";
  let description = [{
    `linear_grad = rope_grad_input(grad)`, `input_grad = linear_grad W`.
    `linear_grad` is the gradient of the unrotated product, which the
    projection's `linear_grad_weight` reads.

    ```mlir
    %dh, %dql = braid.fused_linear_rope_grad_input %dq, %wq
        {num_heads = 4 : i64, theta = 1.0e+04 : f32}
        : (tensor<8x64x64xf32>, tensor<64x64xf32>)
        -> (tensor<8x64x64xf32>, tensor<8x64x64xf32>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$grad, Braid_FloatTensor:$weight,
                       I64Attr:$num_heads, F32Attr:$theta,
                       OptionalAttr<BoolAttr>:$cp);
  let results = (outs Braid_FloatTensor:$input_grad,
                      Braid_FloatTensor:$linear_grad);
}

#endif // BRAID_FUSED_ELEMENTWISE_OPS_TD
