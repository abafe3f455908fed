// RUN: braid-opt %s -split-input-file -verify-diagnostics

// Unless a case says otherwise: B = 1, S = 2, two heads of dim 2.

// attention: zero heads.
func.func @f(%t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op num_heads and num_kv_heads must be positive}}
  %o, %p = braid.attention %t, %t, %t {num_heads = 0 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: zero key/value heads is rejected before any division by it.
func.func @f(%t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op num_heads and num_kv_heads must be positive}}
  %o, %p = braid.attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 0 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: query heads are grouped evenly over key/value heads.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x2x3xf32>) {
  // expected-error @+1 {{'braid.attention' op num_kv_heads (3) must divide num_heads (4)}}
  %o, %p = braid.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 3 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x3xf32>, tensor<1x2x3xf32>) -> (tensor<1x2x4xf32>, tensor<1x4x2x2xf32>)
  return
}

// -----

// attention: the query is [B, S, H*Dh].
func.func @f(%q: tensor<2x4xf32>, %t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op query must have rank 3}}
  %o, %p = braid.attention %q, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: the key is [B, S, Hkv*Dh].
func.func @f(%t: tensor<1x2x4xf32>, %k: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention' op key must have rank 3}}
  %o, %p = braid.attention %t, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: the query width is a whole number of heads.
func.func @f(%q: tensor<1x2x5xf32>, %t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op query last dimension 5 is not a multiple of 2 heads}}
  %o, %p = braid.attention %q, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x5xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x5xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: the key width is a whole number of key/value heads.
func.func @f(%t: tensor<1x2x4xf32>, %k: tensor<1x2x3xf32>) {
  // expected-error @+1 {{'braid.attention' op key last dimension 3 is not a multiple of 2 heads}}
  %o, %p = braid.attention %t, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x3xf32>, tensor<1x2x3xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: value and key have the same shape.
func.func @f(%t: tensor<1x2x4xf32>, %v: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.attention' op value has shape [1x2x2], expected [1x2x4]}}
  %o, %p = braid.attention %t, %t, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: value and key have the same element type.
func.func @f(%t: tensor<1x2x4xf32>, %v: tensor<1x2x4xbf16>) {
  // expected-error @+1 {{'braid.attention' op value and key must have the same element type}}
  %o, %p = braid.attention %t, %t, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xbf16>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: key and query have the same element type.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xbf16>) {
  // expected-error @+1 {{'braid.attention' op key and query must have the same element type}}
  %o, %p = braid.attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xbf16>, tensor<1x2x4xbf16>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: a zero scale flattens the softmax.
func.func @f(%t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op scale must be positive}}
  %o, %p = braid.attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.0 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: dropout 1 would drop everything and scale by 1/0.
func.func @f(%t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op dropout must be in [0, 1)}}
  %o, %p = braid.attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 1.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: a negative dropout probability.
func.func @f(%t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op dropout must be in [0, 1)}}
  %o, %p = braid.attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = -0.1 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: one key/value head of dim 4 cannot serve query heads of dim 2.
func.func @f(%t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op query head dim 2 differs from key head dim 4}}
  %o, %p = braid.attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: query and key come from the same micro-batch.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<2x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op query and key batch sizes differ}}
  %o, %p = braid.attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: the causal mask is defined for equal query and key lengths only.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x3x4xf32>) {
  // expected-error @+1 {{'braid.attention' op causal attention needs equal query and key lengths}}
  %o, %p = braid.attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x3xf32>)
  return
}

// -----

// attention: probabilities are per query head, not per key/value head.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.attention' op probs has shape [1x1x2x2], expected [1x2x2x2]}}
  %o, %p = braid.attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x1x2x2xf32>)
  return
}

// -----

// attention: the output has the query's width, not the value's.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.attention' op result has shape [1x2x2], expected [1x2x4]}}
  %o, %p = braid.attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> (tensor<1x2x2xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention: the output has the query's element type.
func.func @f(%t: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.attention' op result and query must have the same element type}}
  %o, %p = braid.attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xbf16>, tensor<1x2x2x2xf32>)
  return
}

// -----

// attention_grad_input: negative key/value heads.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op num_heads and num_kv_heads must be positive}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = -2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: query heads are grouped evenly over key/value heads.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op num_kv_heads (3) must divide num_heads (2)}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 3 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: the query is [B, S, H*Dh].
func.func @f(%q: tensor<8xf32>, %t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op query must have rank 3}}
  %dq, %dk, %dv = braid.attention_grad_input %q, %q, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<8xf32>, tensor<8xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<8xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: the key is [B, S, Hkv*Dh].
func.func @f(%t: tensor<1x2x4xf32>, %k: tensor<2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op key must have rank 3}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %k, %k, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

// attention_grad_input: the query width is a whole number of heads.
func.func @f(%q: tensor<1x2x3xf32>, %t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op query last dimension 3 is not a multiple of 2 heads}}
  %dq, %dk, %dv = braid.attention_grad_input %q, %q, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x3xf32>, tensor<1x2x3xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: the key width is a whole number of key/value heads.
func.func @f(%t: tensor<1x2x4xf32>, %k: tensor<1x2x5xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op key last dimension 5 is not a multiple of 2 heads}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %k, %k, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>)
  return
}

// -----

// attention_grad_input: value and key have the same shape.
func.func @f(%t: tensor<1x2x4xf32>, %v: tensor<1x3x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op value has shape [1x3x4], expected [1x2x4]}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x3x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x3x4xf32>)
  return
}

// -----

// attention_grad_input: value and key have the same element type.
func.func @f(%t: tensor<1x2x4xf32>, %v: tensor<1x2x4xbf16>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op value and key must have the same element type}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xbf16>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xbf16>)
  return
}

// -----

// attention_grad_input: key and query have the same element type.
func.func @f(%q: tensor<1x2x4xbf16>, %t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op key and query must have the same element type}}
  %dq, %dk, %dv = braid.attention_grad_input %q, %q, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xbf16>, tensor<1x2x4xbf16>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xbf16>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: a negative scale.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op scale must be positive}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = -0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: dropout above 1.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op dropout must be in [0, 1)}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 1.5 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: query and key head dims differ.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op query head dim 2 differs from key head dim 4}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: query and key batch sizes differ.
func.func @f(%t: tensor<1x2x4xf32>, %k: tensor<3x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op query and key batch sizes differ}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %k, %k, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32>)
  return
}

// -----

// attention_grad_input: causal with different query and key lengths.
func.func @f(%t: tensor<1x2x4xf32>, %k: tensor<1x3x4xf32>, %p: tensor<1x2x2x3xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op causal attention needs equal query and key lengths}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %k, %k, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>, tensor<1x2x2x3xf32>) -> (tensor<1x2x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>)
  return
}

// -----

// attention_grad_input: probs are [B, H, S, S].
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op probs has shape [1x2x2], expected [1x2x2x2]}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: the incoming gradient has the query's shape.
func.func @f(%do: tensor<1x2x8xf32>, %t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op gradient has shape [1x2x8], expected [1x2x4]}}
  %dq, %dk, %dv = braid.attention_grad_input %do, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: the incoming gradient has the query's element type.
func.func @f(%do: tensor<1x2x4xbf16>, %t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op gradient and query must have the same element type}}
  %dq, %dk, %dv = braid.attention_grad_input %do, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xbf16>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: dq has the query's shape.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op query gradient has shape [1x2x2], expected [1x2x4]}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x2xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: dq has the query's element type.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op query gradient and query must have the same element type}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xbf16>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: with grouped heads dk has the key's width, not the query's.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x2x2xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op key gradient has shape [1x2x4], expected [1x2x2]}}
  %dq, %dk, %dv = braid.attention_grad_input %q, %q, %k, %k, %p {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2xf32>)
  return
}

// -----

// attention_grad_input: dk has the key's element type.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op key gradient and key must have the same element type}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xbf16>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: with grouped heads dv has the value's width, not the query's.
func.func @f(%q: tensor<1x2x4xf32>, %k: tensor<1x2x2xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op value gradient has shape [1x2x4], expected [1x2x2]}}
  %dq, %dk, %dv = braid.attention_grad_input %q, %q, %k, %k, %p {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// attention_grad_input: dv has the value's element type.
func.func @f(%t: tensor<1x2x4xf32>, %p: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op value gradient and value must have the same element type}}
  %dq, %dk, %dv = braid.attention_grad_input %t, %t, %t, %t, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xbf16>)
  return
}

// -----

// repeat_kv: zero heads.
func.func @f(%x: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.repeat_kv' op num_heads and num_kv_heads must be positive}}
  %y = braid.repeat_kv %x {num_heads = 0 : i64, num_kv_heads = 1 : i64} : (tensor<1x2x2xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// repeat_kv: query heads are grouped evenly over key/value heads.
func.func @f(%x: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.repeat_kv' op num_kv_heads (2) must divide num_heads (3)}}
  %y = braid.repeat_kv %x {num_heads = 3 : i64, num_kv_heads = 2 : i64} : (tensor<1x2x4xf32>) -> tensor<1x2x6xf32>
  return
}

// -----

// repeat_kv: a rank-0 input has no heads.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'braid.repeat_kv' op input must have rank >= 1}}
  %y = braid.repeat_kv %x {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<f32>) -> tensor<2xf32>
  return
}

// -----

// repeat_kv: the input width is a whole number of key/value heads.
func.func @f(%x: tensor<1x2x3xf32>) {
  // expected-error @+1 {{'braid.repeat_kv' op input last dimension 3 is not a multiple of 2 heads}}
  %y = braid.repeat_kv %x {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<1x2x3xf32>) -> tensor<1x2x6xf32>
  return
}

// -----

// repeat_kv: the result has the input's element type.
func.func @f(%x: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.repeat_kv' op result and input must have the same element type}}
  %y = braid.repeat_kv %x {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x2x2xf32>) -> tensor<1x2x4xbf16>
  return
}

// -----

// repeat_kv: the result is num_heads heads wide.
func.func @f(%x: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.repeat_kv' op result has shape [1x2x2], expected [1x2x4]}}
  %y = braid.repeat_kv %x {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  return
}

// -----

// repeat_kv_grad_input: zero key/value heads.
func.func @f(%dy: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.repeat_kv_grad_input' op num_heads and num_kv_heads must be positive}}
  %dx = braid.repeat_kv_grad_input %dy {num_heads = 2 : i64, num_kv_heads = 0 : i64} : (tensor<1x2x4xf32>) -> tensor<1x2x2xf32>
  return
}

// -----

// repeat_kv_grad_input: query heads are grouped evenly over key/value heads.
func.func @f(%dy: tensor<1x2x6xf32>) {
  // expected-error @+1 {{'braid.repeat_kv_grad_input' op num_kv_heads (2) must divide num_heads (3)}}
  %dx = braid.repeat_kv_grad_input %dy {num_heads = 3 : i64, num_kv_heads = 2 : i64} : (tensor<1x2x6xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// repeat_kv_grad_input: a rank-0 input gradient has no heads.
func.func @f(%dy: tensor<2xf32>) {
  // expected-error @+1 {{'braid.repeat_kv_grad_input' op input gradient must have rank >= 1}}
  %dx = braid.repeat_kv_grad_input %dy {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2xf32>) -> tensor<f32>
  return
}

// -----

// repeat_kv_grad_input: the input gradient is a whole number of key/value heads.
func.func @f(%dy: tensor<1x2x6xf32>) {
  // expected-error @+1 {{'braid.repeat_kv_grad_input' op input gradient last dimension 3 is not a multiple of 2 heads}}
  %dx = braid.repeat_kv_grad_input %dy {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<1x2x6xf32>) -> tensor<1x2x3xf32>
  return
}

// -----

// repeat_kv_grad_input: the gradient and the input gradient share an element type.
func.func @f(%dy: tensor<1x2x4xbf16>) {
  // expected-error @+1 {{'braid.repeat_kv_grad_input' op gradient and input gradient must have the same element type}}
  %dx = braid.repeat_kv_grad_input %dy {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x2x4xbf16>) -> tensor<1x2x2xf32>
  return
}

// -----

// repeat_kv_grad_input: the gradient is num_heads heads wide.
func.func @f(%dy: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.repeat_kv_grad_input' op gradient has shape [1x2x4], expected [1x2x8]}}
  %dx = braid.repeat_kv_grad_input %dy {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// rope: the input is [B, S, H*Dh].
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.rope' op input must have rank 3}}
  %y = braid.rope %x {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// rope: zero heads.
func.func @f(%x: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope' op num_heads must be positive}}
  %y = braid.rope %x {num_heads = 0 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// rope: the input width is a whole number of heads.
func.func @f(%x: tensor<1x2x6xf32>) {
  // expected-error @+1 {{'braid.rope' op input last dimension 6 is not a multiple of 4 heads}}
  %y = braid.rope %x {num_heads = 4 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x6xf32>) -> tensor<1x2x6xf32>
  return
}

// -----

// rope: theta is a positive base.
func.func @f(%x: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope' op theta must be positive}}
  %y = braid.rope %x {num_heads = 2 : i64, theta = 0.0 : f32} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// rope: the result has the input's shape.
func.func @f(%x: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope' op result has shape [1x4x2], expected [1x2x4]}}
  %y = braid.rope %x {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<1x4x2xf32>
  return
}

// -----

// rope: the result has the input's element type.
func.func @f(%x: tensor<1x2x4xbf16>) {
  // expected-error @+1 {{'braid.rope' op result and input must have the same element type}}
  %y = braid.rope %x {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x4xbf16>) -> tensor<1x2x4xf32>
  return
}

// -----

// rope: rotate-half pairs need an even head dim.
func.func @f(%x: tensor<1x2x6xf32>) {
  // expected-error @+1 {{'braid.rope' op rope needs an even head dim}}
  %y = braid.rope %x {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x6xf32>) -> tensor<1x2x6xf32>
  return
}

// -----

// rope_grad_input: the gradient is [B, S, H*Dh].
func.func @f(%dy: tensor<1x1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope_grad_input' op gradient must have rank 3}}
  %dx = braid.rope_grad_input %dy {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  return
}

// -----

// rope_grad_input: negative heads.
func.func @f(%dy: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope_grad_input' op num_heads must be positive}}
  %dx = braid.rope_grad_input %dy {num_heads = -2 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// rope_grad_input: the gradient width is a whole number of heads.
func.func @f(%dy: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope_grad_input' op gradient last dimension 4 is not a multiple of 3 heads}}
  %dx = braid.rope_grad_input %dy {num_heads = 3 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// rope_grad_input: a negative theta.
func.func @f(%dy: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope_grad_input' op theta must be positive}}
  %dx = braid.rope_grad_input %dy {num_heads = 2 : i64, theta = -1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// rope_grad_input: the input gradient has the gradient's shape.
func.func @f(%dy: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope_grad_input' op input gradient has shape [2x2x4], expected [1x2x4]}}
  %dx = braid.rope_grad_input %dy {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

// rope_grad_input: the input gradient has the gradient's element type.
func.func @f(%dy: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.rope_grad_input' op input gradient and gradient must have the same element type}}
  %dx = braid.rope_grad_input %dy {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<1x2x4xbf16>
  return
}

// -----

// rope_grad_input: rotate-half pairs need an even head dim.
func.func @f(%dy: tensor<1x2x2xf32>) {
  // expected-error @+1 {{'braid.rope_grad_input' op rope needs an even head dim}}
  %dx = braid.rope_grad_input %dy {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  return
}

// -----

// Masks: segment ids [B, S] and a prefix, round-tripped.
func.func @f(%q: tensor<2x4x8xf32>, %seg: tensor<2x4xi32>) {
  %o, %p = braid.attention %q, %q, %q, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 2 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x8xf32>, %seg: tensor<2x3xi32>) {
  // expected-error @+1 {{'braid.attention' op segment_ids has shape [2x3], expected [2x4]}}
  %o, %p = braid.attention %q, %q, %q, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x3xi32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'braid.attention' op prefix needs causal attention}}
  %o, %p = braid.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, prefix = 2 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x8xf32>, %do: tensor<2x4x8xf32>, %p: tensor<2x2x4x4xf32>) {
  // expected-error @+1 {{'braid.attention_grad_input' op prefix (5) must be in [0, sequence length]}}
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %q, %q, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 5 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>) {
  %ids = braid.document_ids %t {separator = 10 : i64} : (tensor<2x4xi32>) -> tensor<2x4xi32>
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>) {
  // expected-error @+1 {{'braid.document_ids' op separator -1 is not a token id (0 .. 2^31 - 1)}}
  %ids = braid.document_ids %t {separator = -1 : i64} : (tensor<2x4xi32>) -> tensor<2x4xi32>
  return
}

// -----

func.func @f(%t: tensor<2x4xi32>) {
  // expected-error @+1 {{'braid.document_ids' op ids has shape [2x5], expected [2x4]}}
  %ids = braid.document_ids %t {separator = 1 : i64} : (tensor<2x4xi32>) -> tensor<2x5xi32>
  return
}
