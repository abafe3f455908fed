// RUN: braid-opt %s -split-input-file -verify-diagnostics

// Valid: every fused norm, activation, dropout and RoPE op, f32 and bf16.
func.func @f(%r: tensor<2x3x8xf32>, %x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>,
             %st: tensor<2x3xf32>, %w: tensor<8x8xf32>, %f: tensor<2x3x6xf32>, %bf: tensor<6xf32>) {
  %s, %y, %rstd = braid.fused_add_rms_norm %r, %x, %g {eps = 1.0e-05 : f32, p = 0.1 : f32, rng_offset = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3xf32>)
  %s2, %y2, %m2, %r2 = braid.fused_add_layer_norm %r, %x, %g, %b {eps = 1.0e-05 : f32, p = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  %d1 = braid.fused_add_rms_norm_grad_input %x, %s, %g, %st, %r : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %d2 = braid.fused_add_layer_norm_grad_input %x, %s, %g, %st, %st, %r : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %e = braid.fused_bias_gelu %f, %bf : (tensor<2x3x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  %de = braid.fused_bias_gelu_grad_input %f, %f, %bf : (tensor<2x3x6xf32>, tensor<2x3x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  %sw = braid.fused_bias_swiglu %f, %f, %bf, %bf : (tensor<2x3x6xf32>, tensor<2x3x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  %dg, %du = braid.fused_bias_swiglu_grad_input %f, %f, %f, %bf, %bf : (tensor<2x3x6xf32>, tensor<2x3x6xf32>, tensor<2x3x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<2x3x6xf32>, tensor<2x3x6xf32>)
  %o = braid.fused_bias_dropout_add %x, %g, %r {p = 0.1 : f32, rng_offset = 3 : i64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %q = braid.fused_linear_rope %x, %w, %g {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<2x3x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %q2 = braid.fused_linear_rope %x, %w {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %dh, %dl = braid.fused_linear_rope_grad_input %q, %w {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @f(%r: tensor<2x8xbf16>, %g: tensor<8xbf16>) {
  %s, %y, %rstd = braid.fused_add_rms_norm %r, %r, %g {eps = 1.0e-05 : f32, p = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2xf32>)
  return
}

// -----

func.func @f(%r: tensor<2x8xf32>, %x: tensor<2x7xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'braid.fused_add_rms_norm' op branch has shape [2x7], expected [2x8]}}
  %s, %y, %rstd = braid.fused_add_rms_norm %r, %x, %g {eps = 1.0e-05 : f32, p = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x8xf32>, tensor<2x7xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%r: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'braid.fused_add_rms_norm' op p must be in [0, 1)}}
  %s, %y, %rstd = braid.fused_add_rms_norm %r, %r, %g {eps = 1.0e-05 : f32, p = 1.0 : f32, rng_offset = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%r: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'braid.fused_add_layer_norm' op mean has shape [3], expected [2]}}
  %s, %y, %m, %rstd = braid.fused_add_layer_norm %r, %r, %g, %b {eps = 1.0e-05 : f32, p = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<3xf32>, tensor<2xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %st: tensor<2xf32>, %dr: tensor<2x8xbf16>) {
  // expected-error @+1 {{'braid.fused_add_rms_norm_grad_input' op residual gradient and input must have the same element type}}
  %d = braid.fused_add_rms_norm_grad_input %x, %x, %g, %st, %dr : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%h: tensor<2x6xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'braid.fused_bias_gelu' op bias has shape [5], expected [6]}}
  %y = braid.fused_bias_gelu %h, %b : (tensor<2x6xf32>, tensor<5xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%h: tensor<2x6xf32>, %b: tensor<6xbf16>) {
  // expected-error @+1 {{'braid.fused_bias_swiglu' op bias and input must have the same element type}}
  %y = braid.fused_bias_swiglu %h, %h, %b, %b : (tensor<2x6xf32>, tensor<2x6xf32>, tensor<6xbf16>, tensor<6xbf16>) -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%h: tensor<2x6xf32>, %b: tensor<6xf32>, %r: tensor<3x6xf32>) {
  // expected-error @+1 {{'braid.fused_bias_dropout_add' op residual has shape [3x6], expected [2x6]}}
  %y = braid.fused_bias_dropout_add %h, %b, %r {p = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x6xf32>, tensor<6xf32>, tensor<3x6xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8xf32>, %w: tensor<12x8xf32>) {
  // expected-error @+1 {{'braid.fused_linear_rope' op result last dimension 12 is not a multiple of 8 heads}}
  %q = braid.fused_linear_rope %x, %w {num_heads = 8 : i64, theta = 1.0e+04 : f32} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8xf32>, %w: tensor<8x7xf32>) {
  // expected-error @+1 {{'braid.fused_linear_rope' op input features 8 do not match weight in-features 7}}
  %q = braid.fused_linear_rope %x, %w {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<2x3x8xf32>, tensor<8x7xf32>) -> tensor<2x3x8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x3x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.fused_linear_rope_grad_input' op input gradient has shape [2x3x8], expected [2x3x4]}}
  %dx, %dl = braid.fused_linear_rope_grad_input %dy, %w {num_heads = 2 : i64, theta = 1.0e+04 : f32} : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  return
}
