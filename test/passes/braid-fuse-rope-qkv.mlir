// RUN: braid-opt %s --split-input-file --braid-fuse-rope-qkv | FileCheck %s

// Llama's q and k projections (4 query heads, 2 key/value heads): RoPE
// moves into each projection's epilogue; in backward the rotation back
// joins the projection's input gradient, and its second result feeds the
// unchanged weight gradient. v has no RoPE and stays a linear.

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[V:.+]] = braid.linear %arg0, %arg3
// CHECK-NEXT: %[[Q:.+]] = braid.fused_linear_rope %arg0, %arg1 {num_heads = 4 : i64, theta = 1.000000e+04 : f32} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
// CHECK-NEXT: %[[K:.+]] = braid.fused_linear_rope %arg0, %arg2 {num_heads = 2 : i64, theta = 1.000000e+04 : f32} : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[DHQ:.+]], %[[DQ:.+]] = braid.fused_linear_rope_grad_input %arg4, %arg1 {num_heads = 4 : i64, theta = 1.000000e+04 : f32}
// CHECK-NEXT: braid.linear_grad_weight %[[DQ]], %arg0
// CHECK-NEXT: %[[DHK:.+]], %[[DK:.+]] = braid.fused_linear_rope_grad_input %arg5, %arg2 {num_heads = 2 : i64, theta = 1.000000e+04 : f32}
// CHECK-NEXT: braid.linear_grad_weight %[[DK]], %arg0
// CHECK-NEXT: braid.add %[[DHQ]], %[[DHK]]
// CHECK-NEXT: return %[[Q]], %[[K]], %[[V]]
// CHECK-NOT: braid.rope
func.func @train_step(%h: tensor<2x4x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<16x32xf32>, %wv: tensor<16x32xf32>,
                      %dq: tensor<2x4x32xf32>, %dk: tensor<2x4x16xf32>)
    -> (tensor<2x4x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<32x32xf32>, tensor<16x32xf32>, tensor<2x4x32xf32>) attributes {braid.stage = #braid.stage<0>} {
  %q0 = braid.linear %h, %wq : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %k0 = braid.linear %h, %wk : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
  %v = braid.linear %h, %wv : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
  %q = braid.rope %q0 {num_heads = 4 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %k = braid.rope %k0 {num_heads = 2 : i64, theta = 10000.0 : f32} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %dq0 = braid.rope_grad_input %dq {num_heads = 4 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %dhq = braid.linear_grad_input %dq0, %wq : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %dwq = braid.linear_grad_weight %dq0, %h : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<32x32xf32>
  %dk0 = braid.rope_grad_input %dk {num_heads = 2 : i64, theta = 10000.0 : f32} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %dhk = braid.linear_grad_input %dk0, %wk : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %dwk = braid.linear_grad_weight %dk0, %h : (tensor<2x4x16xf32>, tensor<2x4x32xf32>) -> tensor<16x32xf32>
  %dh = braid.add %dhq, %dhk : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  return %q, %k, %v, %dwq, %dwk, %dh : tensor<2x4x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<32x32xf32>, tensor<16x32xf32>, tensor<2x4x32xf32>
}

// -----

// Left alone: a projection read by something besides its RoPE, and a RoPE
// of a value that is not a projection.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: fused
func.func @train_step(%h: tensor<2x4x32xf32>, %wq: tensor<32x32xf32>)
    -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>) attributes {braid.stage = #braid.stage<0>} {
  %q0 = braid.linear %h, %wq : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %q = braid.rope %q0 {num_heads = 4 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %r = braid.rope %h {num_heads = 4 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  return %q, %q0, %r : tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>
}

// -----

// The backward rotation with other readers stays unfused (the forward
// still fuses).

// CHECK-LABEL: func.func @train_step
// CHECK: braid.fused_linear_rope %arg0, %arg1
// CHECK: braid.rope_grad_input
// CHECK: braid.linear_grad_input
// CHECK-NOT: fused_linear_rope_grad_input
func.func @train_step(%h: tensor<2x4x32xf32>, %wq: tensor<32x32xf32>, %dq: tensor<2x4x32xf32>)
    -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>) attributes {braid.stage = #braid.stage<0>} {
  %q0 = braid.linear %h, %wq : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %q = braid.rope %q0 {num_heads = 4 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %dq0 = braid.rope_grad_input %dq {num_heads = 4 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %dh = braid.linear_grad_input %dq0, %wq : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  return %q, %dh, %dq0 : tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>
}

// -----

// A rotation back with other parameters (here 2 heads instead of 4) is not
// this projection's RoPE gradient: the backward stays unfused.

// CHECK-LABEL: func.func @train_step
// CHECK: braid.fused_linear_rope %arg0, %arg1
// CHECK: braid.rope_grad_input %arg2 {num_heads = 2 : i64
// CHECK: braid.linear_grad_input
// CHECK-NOT: fused_linear_rope_grad_input
func.func @train_step(%h: tensor<2x4x32xf32>, %wq: tensor<32x32xf32>, %dq: tensor<2x4x32xf32>)
    -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>) attributes {braid.stage = #braid.stage<0>} {
  %q0 = braid.linear %h, %wq : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %q = braid.rope %q0 {num_heads = 4 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %dq0 = braid.rope_grad_input %dq {num_heads = 2 : i64, theta = 10000.0 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %dh = braid.linear_grad_input %dq0, %wq : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  return %q, %dh : tensor<2x4x32xf32>, tensor<2x4x32xf32>
}
