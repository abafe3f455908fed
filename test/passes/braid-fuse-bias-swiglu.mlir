// RUN: braid-opt %s --split-input-file --braid-fuse-bias-swiglu | FileCheck %s

// Both projections biased: the biases move into SwiGLU, forward and
// backward.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[G:.+]] = braid.linear %arg0, %arg1 : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
// CHECK-NEXT: %[[U:.+]] = braid.linear %arg0, %arg3 : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
// CHECK-NEXT: %[[Y:.+]] = braid.fused_bias_swiglu %[[G]], %[[U]], %arg2, %arg4
// CHECK-NEXT: %[[DG:.+]], %[[DU:.+]] = braid.fused_bias_swiglu_grad_input %arg5, %[[G]], %[[U]], %arg2, %arg4
// CHECK-NEXT: return %[[Y]], %[[DG]], %[[DU]]
func.func @train_step(%x: tensor<2x4x8xf32>, %wg: tensor<12x8xf32>, %bg: tensor<12xf32>,
                      %wu: tensor<12x8xf32>, %bu: tensor<12xf32>, %dy: tensor<2x4x12xf32>)
    -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) attributes {braid.stage = #braid.stage<0>} {
  %g = braid.linear %x, %wg, %bg : (tensor<2x4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<2x4x12xf32>
  %u = braid.linear %x, %wu, %bu : (tensor<2x4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<2x4x12xf32>
  %y = braid.swiglu %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %dg, %du = braid.swiglu_grad_input %dy, %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>)
  return %y, %dg, %du : tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>
}

// -----

// Llama: no biases, two separate projections. Left alone.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: fused
// CHECK: braid.swiglu %
// CHECK: braid.swiglu_grad_input
// CHECK-NOT: fused
func.func @train_step(%x: tensor<4x8xf32>, %wg: tensor<12x8xf32>, %wu: tensor<12x8xf32>, %dy: tensor<4x12xf32>)
    -> (tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>) attributes {braid.stage = #braid.stage<0>} {
  %g = braid.linear %x, %wg : (tensor<4x8xf32>, tensor<12x8xf32>) -> tensor<4x12xf32>
  %u = braid.linear %x, %wu : (tensor<4x8xf32>, tensor<12x8xf32>) -> tensor<4x12xf32>
  %y = braid.swiglu %g, %u : (tensor<4x12xf32>, tensor<4x12xf32>) -> tensor<4x12xf32>
  %dg, %du = braid.swiglu_grad_input %dy, %g, %u : (tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>) -> (tensor<4x12xf32>, tensor<4x12xf32>)
  return %y, %dg, %du : tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>
}

// -----

// Partial patterns are left alone: only the gate has a bias; or both do but
// the up projection is read elsewhere.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: fused
func.func @train_step(%x: tensor<4x8xf32>, %wg: tensor<12x8xf32>, %bg: tensor<12xf32>, %wu: tensor<12x8xf32>, %bu: tensor<12xf32>)
    -> (tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>) attributes {braid.stage = #braid.stage<0>} {
  %g = braid.linear %x, %wg, %bg : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<4x12xf32>
  %u = braid.linear %x, %wu : (tensor<4x8xf32>, tensor<12x8xf32>) -> tensor<4x12xf32>
  %y = braid.swiglu %g, %u : (tensor<4x12xf32>, tensor<4x12xf32>) -> tensor<4x12xf32>
  %g2 = braid.linear %x, %wg, %bg : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<4x12xf32>
  %u2 = braid.linear %x, %wu, %bu : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<4x12xf32>
  %y2 = braid.swiglu %g2, %u2 : (tensor<4x12xf32>, tensor<4x12xf32>) -> tensor<4x12xf32>
  return %y, %y2, %u2 : tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>
}
