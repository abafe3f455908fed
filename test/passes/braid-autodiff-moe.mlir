// RUN: braid-opt %s --braid-autodiff --split-input-file --verify-diagnostics | FileCheck %s

// A mixture-of-experts block (docs/moe.md): the router, the permutation,
// a grouped expert GEMM and the weighted combination, with a load-balancing
// loss and a z-loss beside the cross-entropy. The side losses start
// gradients of their own: the scores' reaches moe_route_grad as its fourth
// operand, the z-loss's joins the logits' sum; the experts' choices take
// none; the grouped GEMM gets a B op and a W op into the stacked weight;
// the function still returns the cross-entropy.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {braid.loss}, tensor<4x8xf32> {braid.grad_of = "gate"}, tensor<4x8x8xf32> {braid.grad_of = "experts.*.w"}, tensor<16x8xf32> {braid.grad_of = "head"})
// CHECK: %[[EXPERTS:.+]], %[[WEIGHTS:.+]], %[[SCORES:.+]] = braid.moe_route %[[LOGITS:[^ ]+]]
// CHECK: %[[COUNTS:.+]] = braid.moe_expert_counts %[[EXPERTS]]
// CHECK: braid.moe_aux_loss %[[SCORES]], %[[COUNTS]]
// CHECK: braid.moe_z_loss %[[LOGITS]]
// CHECK: %[[ROWS:.+]], %[[POS:.+]], %[[OFF:.+]] = braid.moe_permute
// CHECK: %[[DYS:.+]], %[[DW:.+]] = braid.moe_unpermute_grad
// CHECK: braid.moe_grouped_linear_grad_input %[[DYS]], %{{.+}}, %[[OFF]]
// CHECK: braid.moe_grouped_linear_grad_weight %[[DYS]], %[[ROWS]], %[[OFF]] {{.*}}braid.phase = #braid.phase<weight_grad>
// CHECK: braid.moe_permute_grad %{{.+}}, %[[POS]]
// CHECK: %[[DLZ:.+]] = braid.moe_z_loss_grad %[[LOGITS]] {{.*}}braid.phase = #braid.phase<input_grad>
// CHECK: %[[DS:.+]] = braid.moe_aux_loss_grad %[[SCORES]], %[[COUNTS]] {{.*}}braid.phase = #braid.phase<input_grad>
// CHECK: %[[DLR:.+]] = braid.moe_route_grad %[[DW]], %[[SCORES]], %[[EXPERTS]], %[[DS]]
// CHECK: braid.add %[[DLZ]], %[[DLR]]
func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                      %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                      %x: tensor<2x4x8xf32> {braid.input = #braid.input<positions>},
                      %gate: tensor<4x8xf32> {braid.param = #braid.param<name = "gate", init = normal, init_std = 2.0e-02, weight_decay = true, checkpoint_transposed = false>},
                      %w: tensor<4x8x8xf32> {braid.param = #braid.param<name = "experts.*.w", init = normal, init_std = 2.0e-02, weight_decay = true, checkpoint_transposed = false>},
                      %head: tensor<16x8xf32> {braid.param = #braid.param<name = "head", init = normal, init_std = 2.0e-02, weight_decay = true, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %logits = braid.linear %x, %gate {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x4xf32>
  %experts, %weights, %scores = braid.moe_route %logits {normalize = true, scale = 1.0 : f32, sigmoid = false, braid.layer = #braid.layer<0>} : (tensor<2x4x4xf32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xf32>, tensor<2x4x4xf32>)
  %counts = braid.moe_expert_counts %experts {braid.layer = #braid.layer<0>} : (tensor<2x4x2xi32>) -> tensor<4xf32>
  %aux = braid.moe_aux_loss %scores, %counts {coeff = 1.0e-02 : f64, sigmoid = false, top_k = 2 : i64, braid.layer = #braid.layer<0>} : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<f32>
  %z = braid.moe_z_loss %logits {coeff = 1.0e-03 : f64, braid.layer = #braid.layer<0>} : (tensor<2x4x4xf32>) -> tensor<f32>
  %rows, %positions, %offsets = braid.moe_permute %x, %experts {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> (tensor<16x8xf32>, tensor<2x4x2xi32>, tensor<5xi32>)
  %ys = braid.moe_grouped_linear %rows, %w, %offsets {braid.layer = #braid.layer<0>} : (tensor<16x8xf32>, tensor<4x8x8xf32>, tensor<5xi32>) -> tensor<16x8xf32>
  %y = braid.moe_unpermute %ys, %positions, %weights {braid.layer = #braid.layer<0>} : (tensor<16x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  %out = braid.linear %y, %head {braid.layer = #braid.layer<loss>} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %out, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

func.func @bad_top_k(%logits: tensor<2x4x4xf32>) {
  // expected-error @+1 {{chooses 5 experts of 4; 1 to 4}}
  %e, %w, %s = braid.moe_route %logits {normalize = true, scale = 1.0 : f32, sigmoid = false} : (tensor<2x4x4xf32>) -> (tensor<2x4x5xi32>, tensor<2x4x5xf32>, tensor<2x4x4xf32>)
  return
}

// -----

func.func @capacity_rows(%x: tensor<2x4x8xf32>, %experts: tensor<2x4x2xi32>) {
  // expected-error @+1 {{rows has shape [16x8], expected [12x8]}}
  %rows, %p, %o = braid.moe_permute %x, %experts {capacity = 3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> (tensor<16x8xf32>, tensor<2x4x2xi32>, tensor<5xi32>)
  return
}

// -----

func.func @uneven_blocks(%x: tensor<10x8xf32>, %w: tensor<4x8x8xf32>) {
  // expected-error @+1 {{10 rows are not equal blocks of 4 experts}}
  %y = braid.moe_batched_linear %x, %w : (tensor<10x8xf32>, tensor<4x8x8xf32>) -> tensor<10x8xf32>
  return
}

// -----

// Sub-units: the split's gradient is the join of its float parts'
// gradients and the join's the split of its result's; the router's i32
// choices, split beside, take none.
// CHECK-LABEL: func.func @sub_units
// CHECK: %[[DY:.+]]:2 = braid.moe_split_tokens %{{.+}} {{.*}}braid.phase = #braid.phase<input_grad>} : (tensor<2x4x8xf32>) -> (tensor<2x2x8xf32>, tensor<2x2x8xf32>)
// CHECK-NEXT: %[[DX:.+]] = braid.moe_join_tokens %[[DY]]#0, %[[DY]]#1 {{.*}} -> tensor<2x4x8xf32>
// CHECK-NEXT: braid.linear_grad_weight %[[DX]]
// CHECK-NOT: moe_join_tokens
// CHECK: return
func.func @sub_units(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                     %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                     %x: tensor<2x4x8xf32> {braid.input = #braid.input<positions>},
                     %choices: tensor<2x4x2xi32> {braid.input = #braid.input<positions>},
                     %w: tensor<8x8xf32> {braid.param = #braid.param<name = "w", init = normal, init_std = 2.0e-02, weight_decay = true, checkpoint_transposed = false>},
                     %head: tensor<16x8xf32> {braid.param = #braid.param<name = "head", init = normal, init_std = 2.0e-02, weight_decay = true, checkpoint_transposed = false>})
    -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
  %h = braid.linear %x, %w {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h0, %h1 = braid.moe_split_tokens %h {braid.layer = #braid.layer<0>} : (tensor<2x4x8xf32>) -> (tensor<2x2x8xf32>, tensor<2x2x8xf32>)
  %c0, %c1 = braid.moe_split_tokens %choices {braid.layer = #braid.layer<0>} : (tensor<2x4x2xi32>) -> (tensor<2x2x2xi32>, tensor<2x2x2xi32>)
  %y = braid.moe_join_tokens %h0, %h1 {braid.layer = #braid.layer<0>} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %out = braid.linear %y, %head {braid.layer = #braid.layer<loss>} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss, %lse = braid.cross_entropy %out, %labels {braid.layer = #braid.layer<loss>} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}
