// RUN: braid-opt %s --split-input-file --braid-fuse-moe | FileCheck %s

// The router: scores and top-k become moe_route; the backward's top-k
// gradient, its sum with the balancing loss's and the scores' gradient
// become moe_route_grad, whatever the order of the sum.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[E:.+]], %[[W:.+]], %[[S:.+]] = braid.moe_route %arg0, %arg1 {normalize = true, scale = 2.500000e+00 : f32, sigmoid = true}
// CHECK-NEXT: %[[DS:.+]] = braid.moe_aux_loss_grad %[[S]], %arg3
// CHECK-NEXT: %[[DL:.+]] = braid.moe_route_grad %arg2, %[[S]], %[[E]], %[[DS]] {normalize = true, scale = 2.500000e+00 : f32, sigmoid = true}
// CHECK-NEXT: return %[[E]], %[[W]], %[[DL]]
func.func @train_step(%logits: tensor<2x4x4xf32>, %bias: tensor<4xf32>,
                      %dw: tensor<2x4x2xf32>, %counts: tensor<4xf32>)
    -> (tensor<2x4x2xi32>, tensor<2x4x2xf32>, tensor<2x4x4xf32>) attributes {braid.stage = #braid.stage<0>} {
  %s = braid.moe_scores %logits {sigmoid = true} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e, %w = braid.moe_topk %s, %bias {normalize = true, scale = 2.5 : f32} : (tensor<2x4x4xf32>, tensor<4xf32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xf32>)
  %aux = braid.moe_aux_loss_grad %s, %counts {coeff = 1.0e-02 : f64, sigmoid = true, top_k = 2 : i64} : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %dt = braid.moe_topk_grad %dw, %s, %e {normalize = true, scale = 2.5 : f32} : (tensor<2x4x2xf32>, tensor<2x4x4xf32>, tensor<2x4x2xi32>) -> tensor<2x4x4xf32>
  %ds = braid.add %aux, %dt : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %dl = braid.moe_scores_grad %ds, %s {sigmoid = true} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %e, %w, %dl : tensor<2x4x2xi32>, tensor<2x4x2xf32>, tensor<2x4x4xf32>
}

// -----

// Without a balancing loss the scores' gradient is the top-k's alone.
// A backward of other scores fuses the forward only: its gradients read
// moe_route's scores and choices.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[E:.+]], %[[W:.+]], %[[S:.+]] = braid.moe_route %arg0 {normalize = false, scale = 1.000000e+00 : f32, sigmoid = false}
// CHECK-NEXT: %[[DL:.+]] = braid.moe_route_grad %arg1, %[[S]], %[[E]] {normalize = false, scale = 1.000000e+00 : f32, sigmoid = false}
// CHECK-NEXT: %[[DT:.+]] = braid.moe_topk_grad %arg1, %[[S]], %[[E]]
// CHECK-NEXT: %[[DO:.+]] = braid.moe_scores_grad %[[DT]], %arg0 {sigmoid = false}
// CHECK-NEXT: return %[[DL]], %[[DO]]
func.func @train_step(%logits: tensor<2x4x4xf32>, %dw: tensor<2x4x2xf32>)
    -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) attributes {braid.stage = #braid.stage<0>} {
  %s = braid.moe_scores %logits {sigmoid = false} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e, %w = braid.moe_topk %s {normalize = false, scale = 1.0 : f32} : (tensor<2x4x4xf32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xf32>)
  %dt = braid.moe_topk_grad %dw, %s, %e {normalize = false, scale = 1.0 : f32} : (tensor<2x4x2xf32>, tensor<2x4x4xf32>, tensor<2x4x2xi32>) -> tensor<2x4x4xf32>
  %dl = braid.moe_scores_grad %dt, %s {sigmoid = false} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %dt2 = braid.moe_topk_grad %dw, %s, %e {normalize = false, scale = 1.0 : f32} : (tensor<2x4x2xf32>, tensor<2x4x4xf32>, tensor<2x4x2xi32>) -> tensor<2x4x4xf32>
  %do = braid.moe_scores_grad %dt2, %logits {sigmoid = false} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %dl, %do : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// The permutation: the sort and the gather become moe_permute (capacity
// carried); its gradient is unchanged.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[R:.+]], %[[P:.+]], %[[O:.+]] = braid.moe_permute %arg0, %arg1 {capacity = 6 : i64}
// CHECK-NEXT: %[[DX:.+]] = braid.moe_permute_grad %arg2, %[[P]]
// CHECK-NEXT: return %[[R]], %[[O]], %[[DX]]
func.func @train_step(%x: tensor<2x4x8xf32>, %experts: tensor<2x4x2xi32>, %drows: tensor<24x8xf32>)
    -> (tensor<24x8xf32>, tensor<5xi32>, tensor<2x4x8xf32>) attributes {braid.stage = #braid.stage<0>} {
  %p, %o = braid.moe_sort %experts {capacity = 6 : i64} : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<5xi32>)
  %rows = braid.moe_gather %x, %p : (tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<24x8xf32>
  %dx = braid.moe_permute_grad %drows, %p : (tensor<24x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  return %rows, %o, %dx : tensor<24x8xf32>, tensor<5xi32>, tensor<2x4x8xf32>
}

// -----

// Two gathers of one sort: the sort stays, and so do they.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: moe_permute
// CHECK: braid.moe_sort
// CHECK-COUNT-2: braid.moe_gather %
func.func @train_step(%x: tensor<2x4x8xf32>, %x2: tensor<2x4x8xf32>, %experts: tensor<2x4x2xi32>)
    -> (tensor<16x8xf32>, tensor<16x8xf32>) attributes {braid.stage = #braid.stage<0>} {
  %p, %o = braid.moe_sort %experts : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<5xi32>)
  %a = braid.moe_gather %x, %p : (tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<16x8xf32>
  %b = braid.moe_gather %x2, %p : (tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<16x8xf32>
  return %a, %b : tensor<16x8xf32>, tensor<16x8xf32>
}

// -----

// The combine: the choices' gather and their weighted sum become
// moe_unpermute, and the weighted sum's gradient with the rows' scatter
// moe_unpermute_grad, so the [2, 4, 2, 8] choices never exist.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[Y:.+]] = braid.moe_unpermute %arg0, %arg1, %arg2
// CHECK-NEXT: %[[DR:.+]], %[[DW:.+]] = braid.moe_unpermute_grad %arg3, %arg0, %arg1, %arg2
// CHECK-NEXT: return %[[Y]], %[[DR]], %[[DW]]
// CHECK-NOT: 2x4x2x8
func.func @train_step(%rows: tensor<16x8xf32>, %p: tensor<2x4x2xi32>, %w: tensor<2x4x2xf32>, %dy: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4x2xf32>) attributes {braid.stage = #braid.stage<0>} {
  %c = braid.moe_gather_choices %rows, %p : (tensor<16x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x2x8xf32>
  %y = braid.moe_weighted_sum %c, %w : (tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  %dc, %dw = braid.moe_weighted_sum_grad %dy, %c, %w : (tensor<2x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x4x2xf32>)
  %dr = braid.moe_gather_choices_grad %dc, %p : (tensor<2x4x2x8xf32>, tensor<2x4x2xi32>) -> tensor<16x8xf32>
  return %y, %dr, %dw : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4x2xf32>
}

// -----

// Capacity mode with more slots (24) than choices (16): the fused
// gradient would keep the 24 rows for the backward instead of the 16
// choices, so the combine stays unfused.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: moe_unpermute
// CHECK: braid.moe_gather_choices %
// CHECK: braid.moe_weighted_sum %
func.func @train_step(%rows: tensor<24x8xf32>, %p: tensor<2x4x2xi32>, %w: tensor<2x4x2xf32>)
    -> tensor<2x4x8xf32> attributes {braid.stage = #braid.stage<0>} {
  %c = braid.moe_gather_choices %rows, %p : (tensor<24x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x2x8xf32>
  %y = braid.moe_weighted_sum %c, %w : (tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Choices read by anything but the weighted sum and its gradient: left
// alone.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: moe_unpermute
// CHECK: braid.moe_weighted_sum %
func.func @train_step(%rows: tensor<16x8xf32>, %p: tensor<2x4x2xi32>, %w: tensor<2x4x2xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x2x8xf32>) attributes {braid.stage = #braid.stage<0>} {
  %c = braid.moe_gather_choices %rows, %p : (tensor<16x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x2x8xf32>
  %y = braid.moe_weighted_sum %c, %w : (tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  %c2 = braid.add %c, %c : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return %y, %c2 : tensor<2x4x8xf32>, tensor<2x4x2x8xf32>
}
