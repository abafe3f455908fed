// RUN: braid-opt %s --braid-autodiff --split-input-file | FileCheck %s

// A residual block: the residual stream's gradient is summed over its two
// uses; each linear gets a B op and a W op; norms get both; the function
// returns the loss and one gradient per parameter in argument order.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {braid.loss}, tensor<16x8xf32> {braid.grad_of = "emb"}, tensor<8xf32> {braid.grad_of = "norm"}, tensor<8x8xf32> {braid.grad_of = "proj"}, tensor<16x8xf32> {braid.grad_of = "head"})
// CHECK: %[[X:.+]] = braid.embedding %[[EMB:.+]], %[[IDS:[^ ]+]] {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<forward>} :
// CHECK: %[[H:.+]], %[[RSTD:.+]] = braid.rms_norm %[[X]], %[[NORM:[^ ]+]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>
// CHECK: %[[P:.+]] = braid.linear %[[H]], %[[PROJ:[^ ]+]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>} :
// CHECK: %[[R:.+]] = braid.add %[[X]], %[[P]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
// CHECK: %[[LOGITS:.+]] = braid.linear %[[R]], %[[HEAD:[^ ]+]] {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>} :
// CHECK: %[[LOSS:.+]], %[[LSE:.+]] = braid.cross_entropy %[[LOGITS]], %[[LABELS:[^ ]+]] {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>} :
// Backward ops take the layer of the op they differentiate; W ops (and
// sums of W results) are weight_grad, every other backward op input_grad.
// CHECK: %[[DL:.+]] = braid.cross_entropy_grad_input %[[LOGITS]], %[[LABELS]], %[[LSE]] {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<input_grad>, scale = 1.000000e+00 : f32}
// CHECK: %[[DR:.+]] = braid.linear_grad_input %[[DL]], %[[HEAD]] {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<input_grad>}
// CHECK: %[[DHEAD:.+]] = braid.linear_grad_weight %[[DL]], %[[R]] {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<weight_grad>}
// CHECK: %[[DH:.+]] = braid.linear_grad_input %[[DR]], %[[PROJ]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>}
// CHECK: %[[DPROJ:.+]] = braid.linear_grad_weight %[[DR]], %[[H]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
// CHECK: %[[DXN:.+]] = braid.rms_norm_grad_input %[[DH]], %[[X]], %[[NORM]], %[[RSTD]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>}
// CHECK: %[[DX:.+]] = braid.add %[[DR]], %[[DXN]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>}
// CHECK: %[[DNORM:.+]] = braid.rms_norm_grad_weight %[[DH]], %[[X]], %[[RSTD]] {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
// CHECK: %[[DEMB:.+]] = braid.embedding_grad_weight %[[DX]], %[[IDS]] {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<weight_grad>}
// CHECK: return %[[LOSS]], %[[DEMB]], %[[DNORM]], %[[DPROJ]], %[[DHEAD]]
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                      %emb: tensor<16x8xf32> {braid.param = #braid.param<name = "emb", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %norm: tensor<8xf32> {braid.param = #braid.param<name = "norm", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>},
                      %proj: tensor<8x8xf32> {braid.param = #braid.param<name = "proj", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %head: tensor<16x8xf32> {braid.param = #braid.param<name = "head", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %emb, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h, %rstd = braid.rms_norm %x, %norm {eps = 1.0e-05 : f32, braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %p = braid.linear %h, %proj {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = braid.add %x, %p {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = braid.linear %r, %head {braid.layer = #braid.layer<loss>} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

// Tied embeddings: the table's gradient sums the LM head's W op and the
// embedding's W op; the bias of a linear gets its own gradient.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DHEAD:.+]] = braid.linear_grad_weight
// CHECK: %[[DW:.+]], %[[DB:.+]] = braid.linear_grad_weight %{{.+}}, %{{.+}} {{{.*}}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>)
// CHECK: %[[DEMB:.+]] = braid.embedding_grad_weight
// CHECK: %[[DTABLE:.+]] = braid.add %[[DHEAD]], %[[DEMB]] {braid.phase = #braid.phase<weight_grad>}
// CHECK: return %{{.+}}, %[[DTABLE]], %[[DW]], %[[DB]]
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                      %table: tensor<16x8xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %w: tensor<8x8xf32> {braid.param = #braid.param<name = "w", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %b: tensor<8xf32> {braid.param = #braid.param<name = "b", init = zeros, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %table, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %y = braid.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g = braid.gelu %y : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = braid.linear %g, %table : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

// Split (GPT-2's fused q/k/v) and attention: the three part gradients are
// concatenated by split_grad_input.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = braid.attention_grad_input
// CHECK-SAME: num_heads = 2 : i64
// CHECK: braid.split_grad_input %[[DQ]], %[[DK]], %[[DV]]
func.func @train_step(%ids: tensor<1x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<1x4xi32> {braid.input = #braid.input<labels>},
                      %table: tensor<16x8xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %qkv: tensor<24x8xf32> {braid.param = #braid.param<name = "qkv", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %table, %ids : (tensor<16x8xf32>, tensor<1x4xi32>) -> tensor<1x4x8xf32>
  %y = braid.linear %x, %qkv : (tensor<1x4x8xf32>, tensor<24x8xf32>) -> tensor<1x4x24xf32>
  %q, %k, %v = braid.split %y : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 1 : i64} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
  %logits = braid.linear %o, %table : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %loss, %lse = braid.cross_entropy %logits, %labels : (tensor<1x4x16xf32>, tensor<1x4xi32>) -> (tensor<f32>, tensor<1x4xf32>)
  return %loss : tensor<f32>
}
