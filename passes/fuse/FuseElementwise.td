//===- FuseElementwise.td - fusion passes: Elementwise ------------*- tablegen -*-===//
//
// add+norm(+dropout), bias+GELU, bias+SwiGLU, bias+dropout+add, RoPE in
// the q/k projection's epilogue (docs/fusion.md).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSE_ELEMENTWISE_TD
#define BRAID_FUSE_ELEMENTWISE_TD

include "mlir/Pass/PassBase.td"

def FuseAddNormPass : Pass<"braid-fuse-add-norm", "mlir::ModuleOp"> {
  let summary = "Fuse the residual add (and its branch's dropout) into the "
                "following RMSNorm or LayerNorm";
  let description = [{
    Runs on the stage functions (those marked `braid.stage`) after
    autodiff. A norm whose input is a
    `braid.add` becomes `braid.fused_add_rms_norm` or
    `braid.fused_add_layer_norm`, which also returns the sum (the residual
    stream, still read by the next layer and by backward). An add operand
    produced by a `braid.dropout` used only by that add is the branch: the
    dropout moves into the fused op (`p`, `rng_offset`). In backward, each
    input gradient of such a norm whose only use is a `braid.add` (the
    residual's gradient sum) becomes `fused_add_*_norm_grad_input`.

    Left alone: a norm whose input is not an add; a dropout with other uses
    (the add and norm still fuse, the dropout stays).
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def FuseBiasGeluPass : Pass<"braid-fuse-bias-gelu", "mlir::ModuleOp"> {
  let summary = "Move a linear's bias into the GELU that follows it";
  let description = [{
    `gelu(linear(x, w, b))` becomes `fused_bias_gelu(linear(x, w), b)`, and
    each `gelu_grad_input` of the pre-activation becomes
    `fused_bias_gelu_grad_input` of the bias-free product. Left alone: a
    linear without bias, or a pre-activation read by anything but the GELU
    and its gradient.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def FuseBiasDropoutAddPass
    : Pass<"braid-fuse-bias-dropout-add", "mlir::ModuleOp"> {
  let summary = "Fuse an output projection's bias, dropout and residual add";
  let description = [{
    `r + dropout(linear(x, w, b))` (or `r + linear(x, w, b)` without
    dropout) becomes `fused_bias_dropout_add(linear(x, w), b, r)`. The
    linear and the dropout must have no other use. Backward is unchanged:
    the dropout gradient regenerates the same mask.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def FuseBiasSwigluPass : Pass<"braid-fuse-bias-swiglu", "mlir::ModuleOp"> {
  let summary = "Move the gate and up projections' biases into SwiGLU";
  let description = [{
    `swiglu(linear(x, wg, bg), linear(x, wu, bu))` becomes
    `fused_bias_swiglu(linear(x, wg), linear(x, wu), bg, bu)`, and its
    `swiglu_grad_input` becomes `fused_bias_swiglu_grad_input`. Both
    projections must have a bias and no reader but SwiGLU and its gradient.
    Llama's projections have no bias: its graph is left alone (its gate and
    up are two linears, not a split of one).
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def FuseRopeQkvPass : Pass<"braid-fuse-rope-qkv", "mlir::ModuleOp"> {
  let summary = "Apply RoPE in the epilogue of the q and k projections";
  let description = [{
    `rope(linear(x, w))`, the linear read by nothing else, becomes
    `fused_linear_rope(x, w)`. In backward, `rope_grad_input` followed by
    the projection's `linear_grad_input` becomes
    `fused_linear_rope_grad_input`, whose second result (the unrotated
    gradient) feeds the unchanged `linear_grad_weight`.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

#endif // BRAID_FUSE_ELEMENTWISE_TD
