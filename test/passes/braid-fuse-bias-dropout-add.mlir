// RUN: braid-opt %s --split-input-file --braid-fuse-bias-dropout-add | FileCheck %s

// GPT-2's output projection: bias, dropout and the residual add in one op.
// Backward is untouched.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[H:.+]] = braid.linear %arg1, %arg2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[Y:.+]] = braid.fused_bias_dropout_add %[[H]], %arg3, %arg0 {p = 1.000000e-01 : f32, rng_offset = 2 : i64}
// CHECK-NEXT: braid.dropout_grad_input %arg4 {p = 1.000000e-01 : f32, rng_offset = 2 : i64}
// CHECK-NEXT: return %[[Y]]
func.func @train_step(%r: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>,
                      %dy: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {braid.stage = #braid.stage<0>} {
  %f = braid.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %d = braid.dropout %f {p = 0.1 : f32, rng_offset = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = braid.add %r, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %dd = braid.dropout_grad_input %dy {p = 0.1 : f32, rng_offset = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %s, %dd : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Without dropout (hidden_dropout 0) the bias and the add still fuse, p = 0;
// the linear may be either operand of the add.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[H:.+]] = braid.linear %arg1, %arg2 :
// CHECK-NEXT: braid.fused_bias_dropout_add %[[H]], %arg3, %arg0 {p = 0.000000e+00 : f32, rng_offset = 0 : i64}
func.func @train_step(%r: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>)
    -> tensor<4x8xf32> attributes {braid.stage = #braid.stage<0>} {
  %f = braid.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = braid.add %f, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Left alone: a dropout read twice, a linear read twice, a linear without
// bias.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: fused
func.func @train_step(%r: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) attributes {braid.stage = #braid.stage<0>} {
  %f = braid.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %d = braid.dropout %f {p = 0.1 : f32, rng_offset = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = braid.add %r, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %f2 = braid.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s2 = braid.add %r, %f2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %f3 = braid.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s3 = braid.add %r, %f3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %d, %s, %s2, %f2, %s3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
