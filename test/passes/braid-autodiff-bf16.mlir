// RUN: braid-opt %s --braid-autodiff --split-input-file | FileCheck %s

// Mixed precision: weights are bf16 casts of f32 parameters. Each W op
// produces the parameter's f32 gradient directly (no bf16 weight gradient,
// no cast back); the tied table sums its two contributions in f32; B ops
// stay bf16. The f32 logits cast passes its gradient back to bf16.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {braid.loss}, tensor<16x8xf32> {braid.grad_of = "table"}, tensor<8x8xf32> {braid.grad_of = "w"}, tensor<8xf32> {braid.grad_of = "b"})
// CHECK: %[[TB:.+]] = braid.cast %[[TABLE:[^ ]+]]{{.*}}{{.*}} : (tensor<16x8xf32>) -> tensor<16x8xbf16>
// CHECK: %[[WB:.+]] = braid.cast %[[W:[^ ]+]]{{.*}}{{.*}} : (tensor<8x8xf32>) -> tensor<8x8xbf16>
// CHECK: %[[X:.+]] = braid.embedding %[[TB]], %[[IDS:[^ ]+]]{{.*}} :
// CHECK: %[[R:.+]] = braid.add
// CHECK: %[[LOGITS:.+]] = braid.linear %[[R]], %[[TB]]{{.*}} :
// CHECK: %[[LF:.+]] = braid.cast %[[LOGITS]]{{.*}}{{.*}} : (tensor<2x4x16xbf16>) -> tensor<2x4x16xf32>
// CHECK: %[[DLF:.+]] = braid.cross_entropy_grad_input %[[LF]], {{.+}} -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[DL:.+]] = braid.cast %[[DLF]]{{.*}}{{.*}} : (tensor<2x4x16xf32>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[DR:.+]] = braid.linear_grad_input %[[DL]], %[[TB]]{{.*}}{{.*}} : (tensor<2x4x16xbf16>, tensor<16x8xbf16>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[DHEAD:.+]] = braid.linear_grad_weight %[[DL]], %[[R]]{{.*}}{{.*}} : (tensor<2x4x16xbf16>, tensor<2x4x8xbf16>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[DX:.+]] = braid.linear_grad_input %[[DR]], %[[WB]]{{.*}}{{.*}} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[DXS:.+]] = braid.add %[[DR]], %[[DX]]{{.*}}{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[DW:.+]], %[[DB:.+]] = braid.linear_grad_weight %[[DR]], %[[X]]{{.*}}{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> (tensor<8x8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[DEMB:.+]] = braid.embedding_grad_weight %[[DXS]], %[[IDS]]{{.*}}{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[DTABLE:.+]] = braid.add %[[DHEAD]], %[[DEMB]]{{.*}}{{.*}} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: return %{{.+}}, %[[DTABLE]], %[[DW]], %[[DB]]
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                      %table: tensor<16x8xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %w: tensor<8x8xf32> {braid.param = #braid.param<name = "w", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %b: tensor<8xf32> {braid.param = #braid.param<name = "b", init = zeros, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %tb = braid.cast %table : (tensor<16x8xf32>) -> tensor<16x8xbf16>
  %wb = braid.cast %w : (tensor<8x8xf32>) -> tensor<8x8xbf16>
  %bb = braid.cast %b : (tensor<8xf32>) -> tensor<8xbf16>
  %x = braid.embedding %tb, %ids : (tensor<16x8xbf16>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
  %y = braid.linear %x, %wb, %bb : (tensor<2x4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<2x4x8xbf16>
  %r = braid.add %x, %y : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  %logits = braid.linear %r, %tb : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %lf = braid.cast %logits : (tensor<2x4x16xbf16>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %lf, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

// Norm weights (and the LayerNorm bias) read through casts also get f32
// gradients from bf16 inputs; the input gradients stay bf16.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8xf32> {braid.grad_of = "g"}, tensor<8xf32> {braid.grad_of = "ln.w"}, tensor<8xf32> {braid.grad_of = "ln.b"}
// CHECK: braid.layer_norm_grad_input {{.+}} -> tensor<2x4x8xbf16>
// CHECK: %[[DLW:.+]], %[[DLB:.+]] = braid.layer_norm_grad_weight {{.+}}{{.*}}{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<8xf32>, tensor<8xf32>)
// CHECK: braid.rms_norm_grad_input {{.+}} -> tensor<2x4x8xbf16>
// CHECK: %[[DG:.+]] = braid.rms_norm_grad_weight {{.+}}{{.*}}{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4xf32>) -> tensor<8xf32>
// CHECK: return %{{.+}}, %{{.+}}, %[[DG]], %[[DLW]], %[[DLB]]
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %table: tensor<16x8xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %g: tensor<8xf32> {braid.param = #braid.param<name = "g", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>},
                      %lw: tensor<8xf32> {braid.param = #braid.param<name = "ln.w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>},
                      %lb: tensor<8xf32> {braid.param = #braid.param<name = "ln.b", init = zeros, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %tb = braid.cast %table : (tensor<16x8xf32>) -> tensor<16x8xbf16>
  %gb = braid.cast %g : (tensor<8xf32>) -> tensor<8xbf16>
  %lwb = braid.cast %lw : (tensor<8xf32>) -> tensor<8xbf16>
  %lbb = braid.cast %lb : (tensor<8xf32>) -> tensor<8xbf16>
  %x = braid.embedding %tb, %ids : (tensor<16x8xbf16>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
  %h, %rstd = braid.rms_norm %x, %gb {eps = 1.0e-05 : f32} : (tensor<2x4x8xbf16>, tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
  %n, %mean, %rstd2 = braid.layer_norm %h, %lwb, %lbb {eps = 1.0e-05 : f32} : (tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4xf32>)
  %logits = braid.linear %n, %tb : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %loss, %lse = braid.cross_entropy %logits, %ids : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

// A parameter cast and used as an activation, not as a weight, follows the
// general rule: its bf16 gradient is cast back to f32.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[PB:.+]] = braid.cast %[[POS:[^ ]+]]{{.*}}{{.*}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xbf16>
// CHECK: %[[DS:.+]] = braid.linear_grad_input
// CHECK: %[[DPOS:.+]] = braid.cast %[[DS]]{{.*}}{{.*}} : (tensor<2x4x8xbf16>) -> tensor<2x4x8xf32>
// CHECK: return %{{.+}}, %{{.+}}, %[[DPOS]]{{.*}} :
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %table: tensor<16x8xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %pos: tensor<2x4x8xf32> {braid.param = #braid.param<name = "pos", init = zeros, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %tb = braid.cast %table : (tensor<16x8xf32>) -> tensor<16x8xbf16>
  %pb = braid.cast %pos : (tensor<2x4x8xf32>) -> tensor<2x4x8xbf16>
  %x = braid.embedding %tb, %ids : (tensor<16x8xbf16>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
  %s = braid.add %x, %pb : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  %logits = braid.linear %s, %tb : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %loss, %lse = braid.cross_entropy %logits, %ids : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}
