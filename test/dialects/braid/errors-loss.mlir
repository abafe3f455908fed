// RUN: braid-opt %s -split-input-file -verify-diagnostics

// cross_entropy: logits are [..., V] with at least one token dimension.
func.func @f(%l: tensor<8xf32>, %y: tensor<i32>) {
  // expected-error @+1 {{'braid.cross_entropy' op logits must have rank >= 2}}
  %loss, %lse = braid.cross_entropy %l, %y : (tensor<8xf32>, tensor<i32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

// cross_entropy: one label per token.
func.func @f(%l: tensor<2x8xf32>, %y: tensor<2x8xi32>) {
  // expected-error @+1 {{'braid.cross_entropy' op labels has shape [2x8], expected [2]}}
  %loss, %lse = braid.cross_entropy %l, %y : (tensor<2x8xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<2xf32>)
  return
}

// -----

// cross_entropy: one log-sum-exp per token.
func.func @f(%l: tensor<2x8xf32>, %y: tensor<2xi32>) {
  // expected-error @+1 {{'braid.cross_entropy' op lse has shape [8], expected [2]}}
  %loss, %lse = braid.cross_entropy %l, %y : (tensor<2x8xf32>, tensor<2xi32>) -> (tensor<f32>, tensor<8xf32>)
  return
}

// -----

// cross_entropy_grad_input: logits are [..., V] with at least one token dimension.
func.func @f(%l: tensor<8xf32>, %y: tensor<i32>, %lse: tensor<f32>) {
  // expected-error @+1 {{'braid.cross_entropy_grad_input' op logits must have rank >= 2}}
  %dl = braid.cross_entropy_grad_input %l, %y, %lse {scale = 1.0 : f32} : (tensor<8xf32>, tensor<i32>, tensor<f32>) -> tensor<8xf32>
  return
}

// -----

// cross_entropy_grad_input: one label per token.
func.func @f(%l: tensor<2x8xf32>, %y: tensor<3xi32>, %lse: tensor<2xf32>) {
  // expected-error @+1 {{'braid.cross_entropy_grad_input' op labels has shape [3], expected [2]}}
  %dl = braid.cross_entropy_grad_input %l, %y, %lse {scale = 1.0 : f32} : (tensor<2x8xf32>, tensor<3xi32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}

// -----

// cross_entropy_grad_input: one log-sum-exp per token.
func.func @f(%l: tensor<2x8xf32>, %y: tensor<2xi32>, %lse: tensor<2x1xf32>) {
  // expected-error @+1 {{'braid.cross_entropy_grad_input' op lse has shape [2x1], expected [2]}}
  %dl = braid.cross_entropy_grad_input %l, %y, %lse {scale = 1.0 : f32} : (tensor<2x8xf32>, tensor<2xi32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return
}

// -----

// cross_entropy_grad_input: the logits gradient has the logits' shape.
func.func @f(%l: tensor<2x8xf32>, %y: tensor<2xi32>, %lse: tensor<2xf32>) {
  // expected-error @+1 {{'braid.cross_entropy_grad_input' op logits gradient has shape [2x4], expected [2x8]}}
  %dl = braid.cross_entropy_grad_input %l, %y, %lse {scale = 1.0 : f32} : (tensor<2x8xf32>, tensor<2xi32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// cross_entropy_grad_input: the logits gradient has the logits' element type.
func.func @f(%l: tensor<2x8xbf16>, %y: tensor<2xi32>, %lse: tensor<2xf32>) {
  // expected-error @+1 {{'braid.cross_entropy_grad_input' op logits gradient and logits must have the same element type}}
  %dl = braid.cross_entropy_grad_input %l, %y, %lse {scale = 1.0 : f32} : (tensor<2x8xbf16>, tensor<2xi32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}
