// RUN: braid-opt %s -split-input-file -verify-diagnostics

// B = 1, S = 4, two heads of dim 2 unless a case says otherwise.

// Valid: a prefix-LM mask over packed documents (segment ids), both ops.
func.func @f(%t: tensor<1x4x4xf32>, %seg: tensor<1x4xi32>) {
  %o, %lse = braid.flash_attention %t, %t, %t, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 2 : i64, scale = 0.5 : f32, dropout = 0.1 : f32, rng_offset = 3 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4xi32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = braid.flash_attention_grad_input %t, %t, %t, %t, %o, %lse, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 2 : i64, scale = 0.5 : f32, dropout = 0.1 : f32, rng_offset = 3 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x2x4xf32>, tensor<1x4xi32>) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
  return
}

// -----

// Valid: grouped kv heads (one kv head for two query heads), bf16, no mask.
func.func @f(%q: tensor<1x4x4xbf16>, %k: tensor<1x4x2xbf16>) {
  %o, %lse = braid.flash_attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = false, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x4xbf16>, tensor<1x4x2xbf16>, tensor<1x4x2xbf16>) -> (tensor<1x4x4xbf16>, tensor<1x2x4xf32>)
  return
}

// -----

// The lse is per (batch, head, row).
func.func @f(%t: tensor<1x4x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op lse has shape [1x4x2], expected [1x2x4]}}
  %o, %lse = braid.flash_attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x4x2xf32>)
  return
}

// -----

// The lse is f32 whatever the activations are.
func.func @f(%t: tensor<1x4x4xbf16>) {
  // expected-error @+1 {{'braid.flash_attention' op result #1 must be statically shaped tensor of 32-bit float values}}
  %o, %lse = braid.flash_attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x4xbf16>, tensor<1x4x4xbf16>, tensor<1x4x4xbf16>) -> (tensor<1x4x4xbf16>, tensor<1x2x4xbf16>)
  return
}

// -----

// A prefix longer than the sequence.
func.func @f(%t: tensor<1x4x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op prefix (5) must be in [0, sequence length]}}
  %o, %lse = braid.flash_attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 5 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// A prefix only relaxes a causal mask.
func.func @f(%t: tensor<1x4x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op prefix needs causal attention}}
  %o, %lse = braid.flash_attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, prefix = 2 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Segment ids are [B, S].
func.func @f(%t: tensor<1x4x4xf32>, %seg: tensor<1x3xi32>) {
  // expected-error @+1 {{'braid.flash_attention' op segment_ids has shape [1x3], expected [1x4]}}
  %o, %lse = braid.flash_attention %t, %t, %t, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x3xi32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Backward: the forward output has the query's shape.
func.func @f(%t: tensor<1x4x4xf32>, %o: tensor<1x4x2xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention_grad_input' op output has shape [1x4x2], expected [1x4x4]}}
  %dq, %dk, %dv = braid.flash_attention_grad_input %t, %t, %t, %t, %o, %lse {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x2xf32>, tensor<1x2x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>)
  return
}

// -----

// Valid: context parallel. Ring step 1 (the queries' part against another
// rank's, of equal length, segment ids of the whole sequence), all-gather
// (the whole sequence's keys), and the merge of two steps.
func.func @f(%q: tensor<1x4x4xf32>, %whole: tensor<1x8x4xf32>, %seg: tensor<1x8xi32>) {
  %o, %lse = braid.flash_attention %q, %q, %q, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 3 : i64, scale = 0.5 : f32, dropout = 0.1 : f32, rng_offset = 3 : i64, cp = true, cp_kv_step = 1 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x8xi32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  %o2, %lse2 = braid.flash_attention %q, %whole, %whole, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 3 : i64, cp = true} : (tensor<1x4x4xf32>, tensor<1x8x4xf32>, tensor<1x8x4xf32>, tensor<1x8xi32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  %m, %l = braid.attention_merge %o, %lse, %o2, %lse2 {num_heads = 2 : i64} : (tensor<1x4x4xf32>, tensor<1x2x4xf32>, tensor<1x4x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// A ring step's keys are one rank's part: as long as the queries.
func.func @f(%q: tensor<1x4x4xf32>, %k: tensor<1x8x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op a ring step's keys are one rank's part of the sequence: as long as the queries}}
  %o, %lse = braid.flash_attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64, cp = true, cp_kv_step = 0 : i64} : (tensor<1x4x4xf32>, tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// A context-parallel query part is two chunks of the sequence.
func.func @f(%q: tensor<1x3x4xf32>, %k: tensor<1x6x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op a context-parallel query part holds two chunks of the sequence, so its length must be even, not 3}}
  %o, %lse = braid.flash_attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64, cp = true} : (tensor<1x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x4xf32>) -> (tensor<1x3x4xf32>, tensor<1x2x3xf32>)
  return
}

// -----

// The keys of the all-gather are the whole sequence, a multiple of the part.
func.func @f(%q: tensor<1x4x4xf32>, %k: tensor<1x6x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op context-parallel keys are the whole sequence, a multiple of the query part's 4 positions, not 6}}
  %o, %lse = braid.flash_attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64, cp = true} : (tensor<1x4x4xf32>, tensor<1x6x4xf32>, tensor<1x6x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// A ring step needs cp.
func.func @f(%t: tensor<1x4x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op cp_kv_step needs cp}}
  %o, %lse = braid.flash_attention %t, %t, %t {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64, cp_kv_step = 1 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Context-parallel segment ids are the whole sequence's.
func.func @f(%q: tensor<1x4x4xf32>, %seg: tensor<1x4xi32>, %k: tensor<1x8x4xf32>) {
  // expected-error @+1 {{'braid.flash_attention' op context-parallel segment_ids are the whole sequence's, [batch, a multiple of the query part], not 'tensor<1x4xi32>'}}
  %o, %lse = braid.flash_attention %q, %k, %k, %seg {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, prefix = 0 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64, cp = true} : (tensor<1x4x4xf32>, tensor<1x8x4xf32>, tensor<1x8x4xf32>, tensor<1x4xi32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// A merge joins the outputs and lse of the same queries.
func.func @f(%o: tensor<1x4x4xf32>, %l: tensor<1x2x4xf32>, %bad: tensor<1x4x2xf32>) {
  // expected-error @+1 {{'braid.attention_merge' op lse_b has shape [1x4x2], expected [1x2x4]}}
  %m, %ml = braid.attention_merge %o, %l, %o, %bad {num_heads = 2 : i64} : (tensor<1x4x4xf32>, tensor<1x2x4xf32>, tensor<1x4x4xf32>, tensor<1x4x2xf32>) -> (tensor<1x4x4xf32>, tensor<1x2x4xf32>)
  return
}
