// RUN: braid-opt %s -split-input-file -verify-diagnostics

// layer_norm: eps = 0 could divide by zero.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op eps must be positive}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 0.0 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: a rank-0 input has no dimension to normalise.
func.func @f(%x: tensor<f32>, %g: tensor<1xf32>, %b: tensor<1xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op input must have rank >= 1}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<f32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

// layer_norm: the weight has the input's element type.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xbf16>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op weight and input must have the same element type}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xbf16>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: the weight spans the last dimension.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<2xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op weight has shape [2], expected [4]}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<2xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: the bias has the input's element type.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{'braid.layer_norm' op bias and input must have the same element type}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xbf16>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: the bias spans the last dimension.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<1x4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op bias has shape [1x4], expected [4]}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<1x4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: the result has the input's shape.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op result has shape [4x2], expected [2x4]}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: the result has the input's element type.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op result and input must have the same element type}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xbf16>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: one mean per row.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op mean has shape [2x1], expected [2]}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2xf32>)
  return
}

// -----

// layer_norm: one rstd per row.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm' op rstd has shape [4], expected [2]}}
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad_input: a rank-0 input has no dimension to normalise.
func.func @f(%dy: tensor<f32>, %x: tensor<f32>, %g: tensor<1xf32>, %mean: tensor<f32>, %rstd: tensor<f32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op input must have rank >= 1}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<f32>, tensor<f32>, tensor<1xf32>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

// layer_norm_grad_input: the gradient has the input's shape.
func.func @f(%dy: tensor<3x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op gradient has shape [3x4], expected [2x4]}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<3x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// layer_norm_grad_input: the gradient has the input's element type.
func.func @f(%dy: tensor<2x4xbf16>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op gradient and input must have the same element type}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x4xbf16>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// layer_norm_grad_input: the weight has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xbf16>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op weight and input must have the same element type}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xbf16>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// layer_norm_grad_input: the weight spans the last dimension.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<2xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op weight has shape [2], expected [4]}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// layer_norm_grad_input: one mean per row.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %mean: tensor<4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op mean has shape [4], expected [2]}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// layer_norm_grad_input: one rstd per row.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %mean: tensor<2xf32>, %rstd: tensor<4xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op rstd has shape [4], expected [2]}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// layer_norm_grad_input: the input gradient has the input's shape.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op input gradient has shape [8], expected [2x4]}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<8xf32>
  return
}

// -----

// layer_norm_grad_input: the input gradient has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_input' op input gradient and input must have the same element type}}
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// layer_norm_grad_weight: a rank-0 input has no dimension to normalise.
func.func @f(%dy: tensor<f32>, %x: tensor<f32>, %mean: tensor<f32>, %rstd: tensor<f32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op input must have rank >= 1}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<1xf32>, tensor<1xf32>)
  return
}

// -----

// layer_norm_grad_weight: the gradient has the input's shape.
func.func @f(%dy: tensor<2x2xf32>, %x: tensor<2x4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op gradient has shape [2x2], expected [2x4]}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x2xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad_weight: the gradient has the input's element type.
func.func @f(%dy: tensor<2x4xbf16>, %x: tensor<2x4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op gradient and input must have the same element type}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x4xbf16>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad_weight: one mean per row.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %mean: tensor<f32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op mean has shape [], expected [2]}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad_weight: one rstd per row.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %mean: tensor<2xf32>, %rstd: tensor<3xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op rstd has shape [3], expected [2]}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<3xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad_weight: the weight gradient is f32 or has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op weight gradient must be f32 or have the element type of input}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4xbf16>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad_weight: the weight gradient spans the last dimension.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op weight gradient has shape [2], expected [4]}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<4xf32>)
  return
}

// -----

// layer_norm_grad_weight: the bias gradient is f32 or has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op bias gradient must be f32 or have the element type of input}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xbf16>)
  return
}

// -----

// layer_norm_grad_weight: the bias gradient spans the last dimension.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.layer_norm_grad_weight' op bias gradient has shape [8], expected [4]}}
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<8xf32>)
  return
}

// -----

// rms_norm: a negative eps is rejected.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op eps must be positive}}
  %y, %rstd = braid.rms_norm %x, %g {eps = -1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>)
  return
}

// -----

// rms_norm: a rank-0 input has no dimension to normalise.
func.func @f(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op input must have rank >= 1}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : (tensor<f32>, tensor<1xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

// rms_norm: the weight has the input's element type.
func.func @f(%x: tensor<2x4xbf16>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op weight and input must have the same element type}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : (tensor<2x4xbf16>, tensor<4xf32>) -> (tensor<2x4xbf16>, tensor<2xf32>)
  return
}

// -----

// rms_norm: the weight spans the last dimension.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op weight has shape [2], expected [4]}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<2xf32>) -> (tensor<2x4xf32>, tensor<2xf32>)
  return
}

// -----

// rms_norm: the result has the input's shape.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op result has shape [2x2], expected [2x4]}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x2xf32>, tensor<2xf32>)
  return
}

// -----

// rms_norm: the result has the input's element type.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op result and input must have the same element type}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xbf16>, tensor<2xf32>)
  return
}

// -----

// rms_norm: one rstd per row.
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'braid.rms_norm' op rstd has shape [4], expected [2]}}
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
  return
}

// -----

// rms_norm_grad_input: a rank-0 input has no dimension to normalise.
func.func @f(%dy: tensor<f32>, %x: tensor<f32>, %g: tensor<1xf32>, %rstd: tensor<f32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op input must have rank >= 1}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<f32>, tensor<f32>, tensor<1xf32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

// rms_norm_grad_input: the gradient has the input's shape.
func.func @f(%dy: tensor<2x8xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op gradient has shape [2x8], expected [2x4]}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x8xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// rms_norm_grad_input: the gradient has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xbf16>, %g: tensor<4xbf16>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op gradient and input must have the same element type}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x4xf32>, tensor<2x4xbf16>, tensor<4xbf16>, tensor<2xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// rms_norm_grad_input: the weight has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xbf16>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op weight and input must have the same element type}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xbf16>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// rms_norm_grad_input: the weight spans the last dimension.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<8xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op weight has shape [8], expected [4]}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<8xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// rms_norm_grad_input: one rstd per row.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %rstd: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op rstd has shape [2x4], expected [2]}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// rms_norm_grad_input: the input gradient has the input's shape.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op input gradient has shape [1x2x4], expected [2x4]}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// rms_norm_grad_input: the input gradient has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %g: tensor<4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_input' op input gradient and input must have the same element type}}
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// rms_norm_grad_weight: a rank-0 input has no dimension to normalise.
func.func @f(%dy: tensor<f32>, %x: tensor<f32>, %rstd: tensor<f32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_weight' op input must have rank >= 1}}
  %dg = braid.rms_norm_grad_weight %dy, %x, %rstd : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<1xf32>
  return
}

// -----

// rms_norm_grad_weight: the gradient has the input's shape.
func.func @f(%dy: tensor<4x4xf32>, %x: tensor<2x4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_weight' op gradient has shape [4x4], expected [2x4]}}
  %dg = braid.rms_norm_grad_weight %dy, %x, %rstd : (tensor<4x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<4xf32>
  return
}

// -----

// rms_norm_grad_weight: the gradient has the input's element type.
func.func @f(%dy: tensor<2x4xbf16>, %x: tensor<2x4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_weight' op gradient and input must have the same element type}}
  %dg = braid.rms_norm_grad_weight %dy, %x, %rstd : (tensor<2x4xbf16>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<4xf32>
  return
}

// -----

// rms_norm_grad_weight: one rstd per row.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %rstd: tensor<1xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_weight' op rstd has shape [1], expected [2]}}
  %dg = braid.rms_norm_grad_weight %dy, %x, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<1xf32>) -> tensor<4xf32>
  return
}

// -----

// rms_norm_grad_weight: the weight gradient is f32 or has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_weight' op weight gradient must be f32 or have the element type of input}}
  %dg = braid.rms_norm_grad_weight %dy, %x, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<4xbf16>
  return
}

// -----

// rms_norm_grad_weight: the weight gradient spans the last dimension.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %rstd: tensor<2xf32>) {
  // expected-error @+1 {{'braid.rms_norm_grad_weight' op weight gradient has shape [2], expected [4]}}
  %dg = braid.rms_norm_grad_weight %dy, %x, %rstd : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}
