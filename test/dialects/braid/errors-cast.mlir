// RUN: braid-opt %s -split-input-file -verify-diagnostics

// cast: the result has the input's shape.
func.func @f(%w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.cast' op result has shape [4x8], expected [8x4]}}
  %wb = braid.cast %w : (tensor<8x4xf32>) -> tensor<4x8xbf16>
  return
}

// -----

// cast: a cast to the same element type does nothing and is refused.
func.func @f(%w: tensor<8x4xbf16>) {
  // expected-error @+1 {{'braid.cast' op casts 'bf16' to 'bf16'; a cast converts between f32 and bf16, so remove it}}
  %wb = braid.cast %w : (tensor<8x4xbf16>) -> tensor<8x4xbf16>
  return
}

// -----

// cast: only f32 and bf16; ids are never cast.
func.func @f(%ids: tensor<2x3xi32>) {
  // expected-error @+1 {{'braid.cast' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<2x3xi32>'}}
  %x = braid.cast %ids : (tensor<2x3xi32>) -> tensor<2x3xf32>
  return
}

// -----

// cast: f16 is not a storage precision of Braid.
func.func @f(%w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.cast' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<8x4xf16>'}}
  %wb = braid.cast %w : (tensor<8x4xf32>) -> tensor<8x4xf16>
  return
}
