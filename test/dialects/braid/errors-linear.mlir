// RUN: braid-opt %s -split-input-file -verify-diagnostics

// linear: the weight is [out, in].
func.func @f(%x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'braid.linear' op weight must have rank 2}}
  %y = braid.linear %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// linear: a rank-0 input has no features.
func.func @f(%x: tensor<f32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear' op input must have rank >= 1}}
  %y = braid.linear %x, %w : (tensor<f32>, tensor<8x4xf32>) -> tensor<8xf32>
  return
}

// -----

// linear: weight and input share an element type.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<8x4xbf16>) {
  // expected-error @+1 {{'braid.linear' op weight and input must have the same element type}}
  %y = braid.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xbf16>) -> tensor<2x8xf32>
  return
}

// -----

// linear: the result has the input's element type.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear' op result and input must have the same element type}}
  %y = braid.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xbf16>
  return
}

// -----

// linear: input features match the weight's in-features.
func.func @f(%x: tensor<2x5xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear' op input features 5 do not match weight in-features 4}}
  %y = braid.linear %x, %w : (tensor<2x5xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// linear: the bias has one entry per out-feature.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.linear' op bias has shape [4], expected [8]}}
  %y = braid.linear %x, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// linear: the bias has the weight's element type.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{'braid.linear' op bias and weight must have the same element type}}
  %y = braid.linear %x, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

// linear: the result replaces the input's last dimension by out-features.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear' op result has shape [2x4], expected [2x8]}}
  %y = braid.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// linear_grad_input: the weight is [out, in].
func.func @f(%dy: tensor<2x8xf32>, %w: tensor<8x4x1xf32>) {
  // expected-error @+1 {{'braid.linear_grad_input' op weight must have rank 2}}
  %dx = braid.linear_grad_input %dy, %w : (tensor<2x8xf32>, tensor<8x4x1xf32>) -> tensor<2x4xf32>
  return
}

// -----

// linear_grad_input: a rank-0 gradient has no features.
func.func @f(%dy: tensor<f32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_input' op gradient must have rank >= 1}}
  %dx = braid.linear_grad_input %dy, %w : (tensor<f32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

// linear_grad_input: weight and gradient share an element type.
func.func @f(%dy: tensor<2x8xf32>, %w: tensor<8x4xbf16>) {
  // expected-error @+1 {{'braid.linear_grad_input' op weight and gradient must have the same element type}}
  %dx = braid.linear_grad_input %dy, %w : (tensor<2x8xf32>, tensor<8x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// linear_grad_input: the input gradient has the gradient's element type.
func.func @f(%dy: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_input' op input gradient and gradient must have the same element type}}
  %dx = braid.linear_grad_input %dy, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// linear_grad_input: gradient features match the weight's out-features.
func.func @f(%dy: tensor<2x4xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_input' op gradient features 4 do not match weight out-features 8}}
  %dx = braid.linear_grad_input %dy, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// linear_grad_input: the input gradient has the weight's in-features.
func.func @f(%dy: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_input' op input gradient has shape [2x8], expected [2x4]}}
  %dx = braid.linear_grad_input %dy, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// linear_grad_weight: a rank-0 gradient has no features.
func.func @f(%dy: tensor<f32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op gradient must have rank >= 1}}
  %dw = braid.linear_grad_weight %dy, %x : (tensor<f32>, tensor<2x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

// linear_grad_weight: a rank-0 input has no features.
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<f32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op input must have rank >= 1}}
  %dw = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<f32>) -> tensor<8x4xf32>
  return
}

// -----

// linear_grad_weight: input and gradient share an element type.
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<2x4xbf16>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op input and gradient must have the same element type}}
  %dw = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<2x4xbf16>) -> tensor<8x4xf32>
  return
}

// -----

// linear_grad_weight: input and gradient have the same leading dimensions.
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<3x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op input has shape [3x4], expected [2x4]}}
  %dw = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

// linear_grad_weight: the weight gradient is [out, in].
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op weight gradient has shape [4x8], expected [8x4]}}
  %dw = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

// linear_grad_weight: the weight gradient is f32 or has the gradient's element type.
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op weight gradient must be f32 or have the element type of gradient}}
  %dw = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xbf16>
  return
}

// -----

// linear_grad_weight: the bias gradient has one entry per out-feature.
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op bias gradient has shape [4], expected [8]}}
  %dw, %db = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<2x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
  return
}

// -----

// linear_grad_weight: the bias gradient is f32 or has the gradient's element type.
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.linear_grad_weight' op bias gradient must be f32 or have the element type of gradient}}
  %dw, %db = braid.linear_grad_weight %dy, %x : (tensor<2x8xf32>, tensor<2x4xf32>) -> (tensor<8x4xf32>, tensor<8xbf16>)
  return
}
