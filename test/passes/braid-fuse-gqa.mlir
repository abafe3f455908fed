// RUN: braid-opt %s --braid-fuse-gqa --split-input-file | FileCheck %s

// The pattern autodiff produces: repeat_kv before attention and
// repeat_kv_grad_input after its backward. Both disappear; the attention
// ops read the two kv heads in place and write their gradients directly.
// CHECK-LABEL: func.func @grouped
// CHECK-NOT: braid.repeat_kv
// CHECK: %[[O:.+]], %[[P:.+]] = braid.attention %[[Q:[^ ,]+]], %[[K:[^ ,]+]], %[[V:[^ ]+]] {{{.*}}num_kv_heads = 2 : i64{{.*}}} : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8x8xf32>)
// CHECK-NOT: braid.repeat_kv
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = braid.attention_grad_input %[[DO:[^ ,]+]], %[[Q]], %[[K]], %[[V]], %[[P]] {{{.*}}num_kv_heads = 2 : i64{{.*}}} : {{.*}} -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
// CHECK-NOT: braid.repeat_kv
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @grouped(%q: tensor<2x8x32xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %do: tensor<2x8x32xf32>)
    -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %kw = braid.repeat_kv %k {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x32xf32>
  %vw = braid.repeat_kv %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x32xf32>
  %o, %p = braid.attention %q, %kw, %vw {num_heads = 4 : i64, num_kv_heads = 4 : i64, causal = true, scale = 0.35 : f32, dropout = 0.1 : f32, rng_offset = 1 : i64} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8x8xf32>)
  %dq, %dkw, %dvw = braid.attention_grad_input %do, %q, %kw, %vw, %p {num_heads = 4 : i64, num_kv_heads = 4 : i64, causal = true, scale = 0.35 : f32, dropout = 0.1 : f32, rng_offset = 1 : i64} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  %dk = braid.repeat_kv_grad_input %dkw {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x8x32xf32>) -> tensor<2x8x16xf32>
  %dv = braid.repeat_kv_grad_input %dvw {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x8x32xf32>) -> tensor<2x8x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Forward only (no backward reads probs): the forward still reads in place.
// CHECK-LABEL: func.func @forward_only
// CHECK-NOT: braid.repeat_kv
// CHECK: braid.attention %{{[^ ,]+}}, %arg1, %arg2 {{{.*}}num_kv_heads = 1 : i64
func.func @forward_only(%q: tensor<1x4x16xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x16xf32> {
  %kw = braid.repeat_kv %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %vw = braid.repeat_kv %v {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %o, %p = braid.attention %q, %kw, %vw {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  return %o : tensor<1x4x16xf32>
}

// -----

// The widened key gradient is also read elsewhere: the group is left alone.
// CHECK-LABEL: func.func @wide_grad_used
// CHECK: braid.repeat_kv
// CHECK: braid.repeat_kv
// CHECK: braid.attention {{.*}}num_kv_heads = 2 : i64
// CHECK: braid.attention_grad_input {{.*}}num_kv_heads = 2 : i64
// CHECK: braid.repeat_kv_grad_input
// CHECK: braid.repeat_kv_grad_input
func.func @wide_grad_used(%q: tensor<1x4x16xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>, %do: tensor<1x4x16xf32>)
    -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x16xf32>) {
  %kw = braid.repeat_kv %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %vw = braid.repeat_kv %v {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %o, %p = braid.attention %q, %kw, %vw {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  %dq, %dkw, %dvw = braid.attention_grad_input %do, %q, %kw, %vw, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  %dk = braid.repeat_kv_grad_input %dkw {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x16xf32>) -> tensor<1x4x8xf32>
  %dv = braid.repeat_kv_grad_input %dvw {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x16xf32>) -> tensor<1x4x8xf32>
  %s = braid.add %dkw, %dq : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return %dk, %dv, %s : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x16xf32>
}

// -----

// Only the key is repeated (partial pattern): left alone.
// CHECK-LABEL: func.func @key_only
// CHECK: braid.repeat_kv
// CHECK: braid.attention {{.*}}num_kv_heads = 2 : i64
func.func @key_only(%q: tensor<1x4x16xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %kw = braid.repeat_kv %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %o, %p = braid.attention %q, %kw, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  return %o : tensor<1x4x16xf32>
}

// -----

// The repeat widens to a different head count than attention uses (here
// attention already groups): mismatched attributes, left alone.
// CHECK-LABEL: func.func @mismatched_heads
// CHECK: braid.repeat_kv
// CHECK: braid.repeat_kv
// CHECK: braid.attention {{.*}}num_kv_heads = 2 : i64
func.func @mismatched_heads(%q: tensor<1x4x32xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x32xf32> {
  %kw = braid.repeat_kv %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %vw = braid.repeat_kv %v {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %o, %p = braid.attention %q, %kw, %vw {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x4x4xf32>)
  return %o : tensor<1x4x32xf32>
}

// -----

// A backward op with other attributes than the forward (a different
// dropout offset) reads the probabilities: the group is left alone.
// CHECK-LABEL: func.func @mismatched_backward
// CHECK: braid.repeat_kv
// CHECK: braid.attention {{.*}}num_kv_heads = 2 : i64
// CHECK: braid.repeat_kv_grad_input
func.func @mismatched_backward(%q: tensor<1x4x16xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>, %do: tensor<1x4x16xf32>)
    -> (tensor<1x4x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) {
  %kw = braid.repeat_kv %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %vw = braid.repeat_kv %v {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  %o, %p = braid.attention %q, %kw, %vw {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.1 : f32, rng_offset = 1 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  %dq, %dkw, %dvw = braid.attention_grad_input %do, %q, %kw, %vw, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.1 : f32, rng_offset = 2 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  %dk = braid.repeat_kv_grad_input %dkw {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x16xf32>) -> tensor<1x4x8xf32>
  %dv = braid.repeat_kv_grad_input %dvw {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x16xf32>) -> tensor<1x4x8xf32>
  return %dq, %dk, %dv : tensor<1x4x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
}
