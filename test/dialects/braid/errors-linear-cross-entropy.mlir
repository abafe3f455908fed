// RUN: braid-opt %s -split-input-file -verify-diagnostics

// Valid: the two fused ops, f32, and bf16 with an f32 weight gradient.
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>) {
  %loss, %lse = braid.linear_cross_entropy %x, %w, %l {chunk = 14 : i64} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3xf32>)
  %loss2, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %l {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xbf16>, %w: tensor<7x4xbf16>, %l: tensor<2x3xi32>) {
  %loss, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %l {scale = 0.5 : f32} : (tensor<2x3x4xbf16>, tensor<7x4xbf16>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x4xbf16>, tensor<7x4xf32>, tensor<6x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x5xf32>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{input features 4 do not match weight in-features 5}}
  %loss, %lse = braid.linear_cross_entropy %x, %w, %l {chunk = 14 : i64} : (tensor<2x3x4xf32>, tensor<7x5xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x4xi32>) {
  // expected-error @+1 {{labels has shape [2x4], expected [2x3]}}
  %loss, %lse = braid.linear_cross_entropy %x, %w, %l {chunk = 14 : i64} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{chunk must be positive}}
  %loss, %lse = braid.linear_cross_entropy %x, %w, %l {chunk = 0 : i64} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xbf16>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{weight and input must have the same element type}}
  %loss, %lse = braid.linear_cross_entropy %x, %w, %l {chunk = 14 : i64} : (tensor<2x3x4xf32>, tensor<7x4xbf16>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{input gradient has shape [2x3x7], expected [2x3x4]}}
  %loss, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %l {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x7xf32>, tensor<7x4xf32>, tensor<6x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{weight gradient has shape [4x7], expected [7x4]}}
  %loss, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %l {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x4xf32>, tensor<4x7xf32>, tensor<6x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{weight gradient must be f32 or have the element type of input}}
  %loss, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %l {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x4xf32>, tensor<7x4xbf16>, tensor<6x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x4xi32>) {
  // expected-error @+1 {{labels has shape [2x4], expected [2x3]}}
  %loss, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %l {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<6x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{workspace has shape [7x7], expected [R, 7] with 1 <= R <= 6 (the rows)}}
  %loss, %dx, %dw, %ws = braid.linear_cross_entropy_with_grad %x, %w, %l {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<7x7xf32>)
  return
}

// -----

// Valid: the vocabulary-parallel pair.
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>, %lse: tensor<2x3xf32>) {
  %st = braid.linear_cross_entropy_stats %x, %w, %l {chunk = 14 : i64} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> tensor<2x3x3xf32>
  %dx, %dw, %ws = braid.linear_cross_entropy_grad %x, %w, %l, %lse {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>) {
  // expected-error @+1 {{stats has shape [2x3x2], expected [2x3x3]}}
  %st = braid.linear_cross_entropy_stats %x, %w, %l {chunk = 14 : i64} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>) -> tensor<2x3x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>, %lse: tensor<2x4xf32>) {
  // expected-error @+1 {{lse has shape [2x4], expected [2x3]}}
  %dx, %dw, %ws = braid.linear_cross_entropy_grad %x, %w, %l, %lse {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>, tensor<2x4xf32>) -> (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x7xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %l: tensor<2x3xi32>, %lse: tensor<2x3xf32>) {
  // expected-error @+1 {{workspace has shape [7x7], expected [R, 7] with 1 <= R <= 6 (the rows)}}
  %dx, %dw, %ws = braid.linear_cross_entropy_grad %x, %w, %l, %lse {scale = 0.5 : f32} : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<7x7xf32>)
  return
}
