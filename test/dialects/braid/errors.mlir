// RUN: braid-opt %s -split-input-file -verify-diagnostics

// Type and attribute constraints of the op definitions. Each op's own
// verifier is tested in errors-<family>.mlir.

// Activations are f32 or bf16: f64 is rejected.
func.func @f64_operand(%x: tensor<4xf64>) {
  // expected-error @+1 {{'braid.gelu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xf64>'}}
  %y = braid.gelu %x : (tensor<4xf64>) -> tensor<4xf64>
  return
}

// -----

// Results obey the same element types as operands: f16 is rejected.
func.func @f16_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{'braid.gelu' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4xf16>'}}
  %y = braid.gelu %x : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Shapes must be ranked.
func.func @unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{'braid.gelu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<*xf32>'}}
  %y = braid.gelu %x : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

// Token ids are i32, not i64.
func.func @i64_ids(%t: tensor<16x4xf32>, %ids: tensor<2xi64>) {
  // expected-error @+1 {{'braid.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer values, but got 'tensor<2xi64>'}}
  %y = braid.embedding %t, %ids : (tensor<16x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  return
}

// -----

// Labels are i32, not f32.
func.func @float_labels(%l: tensor<2x8xf32>, %y: tensor<2xf32>) {
  // expected-error @+1 {{'braid.cross_entropy' op operand #1 must be statically shaped tensor of 32-bit signless integer values, but got 'tensor<2xf32>'}}
  %loss, %lse = braid.cross_entropy %l, %y : (tensor<2x8xf32>, tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>)
  return
}

// -----

// Saved statistics are f32 even when activations are bf16.
func.func @bf16_stat(%x: tensor<2x4xbf16>, %g: tensor<4xbf16>) {
  // expected-error @+1 {{'braid.rms_norm' op result #1 must be statically shaped tensor of 32-bit float values, but got 'tensor<2xbf16>'}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : (tensor<2x4xbf16>, tensor<4xbf16>) -> (tensor<2x4xbf16>, tensor<2xbf16>)
  return
}

// -----

// Attention probabilities are activations: stored in the element type of
// the query, never mixed.
func.func @mixed_probs(%q: tensor<1x2x4xbf16>) {
  // expected-error @+1 {{'braid.attention' op probs and query must have the same element type}}
  %o, %p = braid.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xbf16>, tensor<1x2x4xbf16>, tensor<1x2x4xbf16>) -> (tensor<1x2x4xbf16>, tensor<1x2x2x2xf32>)
  return
}

// -----

// The loss is a rank-0 tensor.
func.func @ranked_loss(%l: tensor<2x8xf32>, %y: tensor<2xi32>) {
  // expected-error @+1 {{'braid.cross_entropy' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %loss, %lse = braid.cross_entropy %l, %y : (tensor<2x8xf32>, tensor<2xi32>) -> (tensor<1xf32>, tensor<2xf32>)
  return
}

// -----

// A required attribute may not be left out.
func.func @missing_eps(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op requires attribute 'eps'}}
  %y, %rstd = braid.rms_norm %x, %g : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>)
  return
}

// -----

// Float attributes are f32.
func.func @f64_eps(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'eps' failed to satisfy constraint: 32-bit float attribute}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f64} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>)
  return
}

// -----

// Head counts are i64.
func.func @i32_num_heads(%x: tensor<1x2x4xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute}}
  %y = braid.rope %x {num_heads = 2 : i32, theta = 1.0e+04 : f32} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// causal is a bool.
func.func @integer_causal(%q: tensor<1x2x4xf32>) {
  // expected-error @+1 {{attribute 'causal' failed to satisfy constraint: bool attribute}}
  %o, %p = braid.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = 1 : i64, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>)
  return
}

// -----

// linear takes at most one bias.
func.func @two_biases(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'braid.linear' op operand group starting at #2 requires 0 or 1 element, but found 2}}
  %y = braid.linear %x, %w, %b, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// linear_grad_weight returns at most one bias gradient.
func.func @two_bias_grads(%dy: tensor<2x8xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op result group starting at #1 requires 0 or 1 element, but found 2}}
  %dw, %db, %db2 = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<2x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// The marks have their own attribute types.
// expected-error @+1 {{'braid.layer' must be a #braid.layer, not 3 : i64}}
func.func @f() attributes {braid.layer = 3} { return }

// -----

// expected-error @+1 {{a layer is 'embedding', 'loss' or an index of 0 or more, not -5}}
func.func @f() attributes {braid.layer = #braid.layer<-5>} { return }
