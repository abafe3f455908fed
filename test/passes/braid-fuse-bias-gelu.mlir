// RUN: braid-opt %s --split-input-file --braid-fuse-bias-gelu | FileCheck %s

// The bias moves out of the linear into the GELU, forward and backward.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[H:.+]] = braid.linear %arg0, %arg1 : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[Y:.+]] = braid.fused_bias_gelu %[[H]], %arg2 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[DX:.+]] = braid.fused_bias_gelu_grad_input %arg3, %[[H]], %arg2
// CHECK-NEXT: return %[[Y]], %[[DX]]
func.func @train_step(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %dy: tensor<2x4x16xf32>)
    -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) attributes {braid.stage = #braid.stage<0>} {
  %f = braid.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %y = braid.gelu %f : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %dx = braid.gelu_grad_input %dy, %f : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %y, %dx : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----

// Left alone: a linear without bias, and a pre-activation read by another
// op (here returned).

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: fused
// CHECK: braid.gelu
// CHECK: braid.linear %arg0, %arg1, %arg2
// CHECK: braid.gelu
// CHECK-NOT: fused
func.func @train_step(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) attributes {braid.stage = #braid.stage<0>} {
  %f = braid.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %y = braid.gelu %f : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %f2 = braid.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y2 = braid.gelu %f2 : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y, %y2, %f2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
