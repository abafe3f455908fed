// RUN: braid-opt %s --braid-fuse-flash-attention --split-input-file | FileCheck %s

// attention and its backward, linked through probs, become flash attention:
// the probabilities are gone; backward reads the output and the lse.
// CHECK-LABEL: func.func @fused
// CHECK-NOT: braid.attention
// CHECK: %[[O:.+]], %[[LSE:.+]] = braid.flash_attention %[[Q:[^ ,]+]], %[[K:[^ ,]+]], %[[V:[^ ]+]] {causal = true, dropout = 1.000000e-01 : f32, num_heads = 4 : i64, num_kv_heads = 2 : i64, prefix = 0 : i64, rng_offset = 1 : i64, scale = 3.500000e-01 : f32} : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
// CHECK-NOT: braid.attention
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = braid.flash_attention_grad_input %[[DO:[^ ,]+]], %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]] {causal = true, dropout = 1.000000e-01 : f32, num_heads = 4 : i64, num_kv_heads = 2 : i64, prefix = 0 : i64, rng_offset = 1 : i64, scale = 3.500000e-01 : f32} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @fused(%q: tensor<2x8x32xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %do: tensor<2x8x32xf32>)
    -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %o, %p = braid.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.1 : f32, rng_offset = 1 : i64} : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8x8xf32>)
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.1 : f32, rng_offset = 1 : i64} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return %o, %dq, %dk, %dv : tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// bf16 activations: the lse stays f32.
// CHECK-LABEL: func.func @bf16
// CHECK: braid.flash_attention {{.*}} -> (tensor<1x4x16xbf16>, tensor<1x2x4xf32>)
// CHECK: braid.flash_attention_grad_input {{.*}} : (tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x2x4xf32>)
func.func @bf16(%q: tensor<1x4x16xbf16>, %k: tensor<1x4x16xbf16>, %v: tensor<1x4x16xbf16>, %do: tensor<1x4x16xbf16>)
    -> (tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>) {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>) -> (tensor<1x4x16xbf16>, tensor<1x2x4x4xbf16>)
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x2x4x4xbf16>) -> (tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>)
  return %dq, %dk, %dv : tensor<1x4x16xbf16>, tensor<1x4x16xbf16>, tensor<1x4x16xbf16>
}

// -----

// Forward only: flash_attention, its lse unused.
// CHECK-LABEL: func.func @forward_only
// CHECK: braid.flash_attention
// CHECK-NOT: braid.attention
func.func @forward_only(%q: tensor<1x4x16xf32>, %k: tensor<1x4x16xf32>, %v: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  return %o : tensor<1x4x16xf32>
}

// -----

// The probabilities have another reader: they must exist, left alone.
// CHECK-LABEL: func.func @probs_returned
// CHECK-NOT: flash_attention
// CHECK: braid.attention
// CHECK: braid.attention_grad_input
func.func @probs_returned(%q: tensor<1x4x16xf32>, %k: tensor<1x4x16xf32>, %v: tensor<1x4x16xf32>, %do: tensor<1x4x16xf32>)
    -> (tensor<1x2x4x4xf32>, tensor<1x4x16xf32>) {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %p, %dq : tensor<1x2x4x4xf32>, tensor<1x4x16xf32>
}

// -----

// The backward op reads the probabilities with other attributes (causal
// differs): left alone.
// CHECK-LABEL: func.func @mismatched_attrs
// CHECK-NOT: flash_attention
// CHECK: braid.attention
func.func @mismatched_attrs(%q: tensor<1x4x16xf32>, %k: tensor<1x4x16xf32>, %v: tensor<1x4x16xf32>, %do: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %dq : tensor<1x4x16xf32>
}

// -----

// The backward op reads other queries than the forward (a partial
// pattern): left alone.
// CHECK-LABEL: func.func @other_query
// CHECK-NOT: flash_attention
// CHECK: braid.attention
func.func @other_query(%q: tensor<1x4x16xf32>, %q2: tensor<1x4x16xf32>, %k: tensor<1x4x16xf32>, %v: tensor<1x4x16xf32>, %do: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x16xf32>, tensor<1x2x4x4xf32>)
  %dq, %dk, %dv = braid.attention_grad_input %do, %q2, %k, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %dq : tensor<1x4x16xf32>
}

// -----

// The masks carry over: the segment ids become flash attention's, the
// prefix its attribute, forward and backward.
// CHECK-LABEL: func.func @masks
// CHECK: %[[O:.+]], %[[LSE:.+]] = braid.flash_attention %arg0, %arg1, %arg2, %arg4 {{{.*}}prefix = 3 : i64
// CHECK: braid.flash_attention_grad_input %arg3, %arg0, %arg1, %arg2, %[[O]], %[[LSE]], %arg4 {{{.*}}prefix = 3 : i64
func.func @masks(%q: tensor<1x8x16xf32>, %k: tensor<1x8x16xf32>, %v: tensor<1x8x16xf32>, %do: tensor<1x8x16xf32>, %seg: tensor<1x8xi32>)
    -> (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>) {
  %o, %p = braid.attention %q, %k, %v, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 3 : i64, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8xi32>) -> (tensor<1x8x16xf32>, tensor<1x2x8x8xf32>)
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 3 : i64, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x2x8x8xf32>, tensor<1x8xi32>) -> (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>)
  return %dq, %dk, %dv : tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>
}

// -----

// A backward with other masks than its forward's is not its backward:
// nothing changes.
// CHECK-LABEL: func.func @masks_differ
// CHECK: braid.attention
// CHECK: braid.attention_grad_input
// CHECK-NOT: braid.flash_attention
func.func @masks_differ(%q: tensor<1x8x16xf32>, %k: tensor<1x8x16xf32>, %v: tensor<1x8x16xf32>, %do: tensor<1x8x16xf32>, %seg: tensor<1x8xi32>)
    -> (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>) {
  %o, %p = braid.attention %q, %k, %v, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8xi32>) -> (tensor<1x8x16xf32>, tensor<1x2x8x8xf32>)
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.35 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x2x8x8xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>)
  return %dq, %dk, %dv : tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>
}
