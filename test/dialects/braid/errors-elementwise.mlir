// RUN: braid-opt %s -split-input-file -verify-diagnostics

// gelu: the result has the input's shape.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.gelu' op result has shape [4x2], expected [2x4]}}
  %y = braid.gelu %x : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return
}

// -----

// gelu: the result has the input's element type.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.gelu' op result and input must have the same element type}}
  %y = braid.gelu %x : (tensor<2x4xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// gelu: shapes are static.
func.func @f(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'braid.gelu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x4xf32>'}}
  %y = braid.gelu %x : (tensor<?x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// gelu_grad_input: the gradient has the input's shape.
func.func @f(%dy: tensor<2x2xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.gelu_grad_input' op gradient has shape [2x2], expected [2x4]}}
  %dx = braid.gelu_grad_input %dy, %x : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// gelu_grad_input: the gradient has the input's element type.
func.func @f(%dy: tensor<2x4xbf16>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.gelu_grad_input' op gradient and input must have the same element type}}
  %dx = braid.gelu_grad_input %dy, %x : (tensor<2x4xbf16>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// gelu_grad_input: the input gradient has the input's shape.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.gelu_grad_input' op input gradient has shape [8], expected [2x4]}}
  %dx = braid.gelu_grad_input %dy, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<8xf32>
  return
}

// -----

// gelu_grad_input: the input gradient has the input's element type.
func.func @f(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.gelu_grad_input' op input gradient and input must have the same element type}}
  %dx = braid.gelu_grad_input %dy, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// swiglu: up has the gate's shape.
func.func @f(%g: tensor<2x4xf32>, %u: tensor<2x8xf32>) {
  // expected-error @+1 {{'braid.swiglu' op up has shape [2x8], expected [2x4]}}
  %y = braid.swiglu %g, %u : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

// swiglu: up has the gate's element type.
func.func @f(%g: tensor<2x4xf32>, %u: tensor<2x4xbf16>) {
  // expected-error @+1 {{'braid.swiglu' op up and gate must have the same element type}}
  %y = braid.swiglu %g, %u : (tensor<2x4xf32>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// swiglu: the result has the gate's shape.
func.func @f(%g: tensor<2x4xf32>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.swiglu' op result has shape [2x8], expected [2x4]}}
  %y = braid.swiglu %g, %u : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// swiglu: the result has the gate's element type.
func.func @f(%g: tensor<2x4xbf16>, %u: tensor<2x4xbf16>) {
  // expected-error @+1 {{'braid.swiglu' op result and gate must have the same element type}}
  %y = braid.swiglu %g, %u : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// swiglu_grad_input: up has the gate's shape.
func.func @f(%t: tensor<2x4xf32>, %u: tensor<4xf32>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op up has shape [4], expected [2x4]}}
  %dg, %du = braid.swiglu_grad_input %t, %t, %u : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

// swiglu_grad_input: up has the gate's element type.
func.func @f(%t: tensor<2x4xf32>, %u: tensor<2x4xbf16>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op up and gate must have the same element type}}
  %dg, %du = braid.swiglu_grad_input %t, %t, %u : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xbf16>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

// swiglu_grad_input: the gradient has the gate's shape.
func.func @f(%dy: tensor<2x2xf32>, %t: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op gradient has shape [2x2], expected [2x4]}}
  %dg, %du = braid.swiglu_grad_input %dy, %t, %t : (tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

// swiglu_grad_input: the gradient has the gate's element type.
func.func @f(%dy: tensor<2x4xbf16>, %t: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op gradient and gate must have the same element type}}
  %dg, %du = braid.swiglu_grad_input %dy, %t, %t : (tensor<2x4xbf16>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

// swiglu_grad_input: the gate gradient has the gate's shape.
func.func @f(%t: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op gate gradient has shape [2x2], expected [2x4]}}
  %dg, %du = braid.swiglu_grad_input %t, %t, %t : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
  return
}

// -----

// swiglu_grad_input: the gate gradient has the gate's element type.
func.func @f(%t: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op gate gradient and gate must have the same element type}}
  %dg, %du = braid.swiglu_grad_input %t, %t, %t : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xbf16>, tensor<2x4xf32>)
  return
}

// -----

// swiglu_grad_input: the up gradient has the gate's shape.
func.func @f(%t: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op up gradient has shape [2x2], expected [2x4]}}
  %dg, %du = braid.swiglu_grad_input %t, %t, %t : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>)
  return
}

// -----

// swiglu_grad_input: the up gradient has the gate's element type.
func.func @f(%t: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.swiglu_grad_input' op up gradient and gate must have the same element type}}
  %dg, %du = braid.swiglu_grad_input %t, %t, %t : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xbf16>)
  return
}

// -----

// add: no broadcasting, the operands have the same shape.
func.func @f(%x: tensor<2x4xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'braid.add' op rhs has shape [4], expected [2x4]}}
  %z = braid.add %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// add: the operands have the same element type.
func.func @f(%x: tensor<2x4xf32>, %y: tensor<2x4xbf16>) {
  // expected-error @+1 {{'braid.add' op rhs and lhs must have the same element type}}
  %z = braid.add %x, %y : (tensor<2x4xf32>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// add: the result has the operands' shape.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.add' op result has shape [1x2x4], expected [2x4]}}
  %z = braid.add %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

// add: the result has the operands' element type.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.add' op result and lhs must have the same element type}}
  %z = braid.add %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// dropout: p = 1 drops everything and scales by 1/0.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.dropout' op p must be in [0, 1)}}
  %y = braid.dropout %x {p = 1.0 : f32, rng_offset = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// dropout: a negative probability.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.dropout' op p must be in [0, 1)}}
  %y = braid.dropout %x {p = -0.5 : f32, rng_offset = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// dropout: the result has the input's shape.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.dropout' op result has shape [2], expected [2x4]}}
  %y = braid.dropout %x {p = 0.1 : f32, rng_offset = 0 : i64} : (tensor<2x4xf32>) -> tensor<2xf32>
  return
}

// -----

// dropout: the result has the input's element type.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.dropout' op result and input must have the same element type}}
  %y = braid.dropout %x {p = 0.1 : f32, rng_offset = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// dropout_grad_input: p = 1 as for the forward op.
func.func @f(%dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.dropout_grad_input' op p must be in [0, 1)}}
  %dx = braid.dropout_grad_input %dy {p = 1.0 : f32, rng_offset = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// dropout_grad_input: the input gradient has the gradient's shape.
func.func @f(%dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.dropout_grad_input' op input gradient has shape [4x2], expected [2x4]}}
  %dx = braid.dropout_grad_input %dy {p = 0.1 : f32, rng_offset = 0 : i64} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return
}

// -----

// dropout_grad_input: the input gradient has the gradient's element type.
func.func @f(%dy: tensor<2x4xbf16>) {
  // expected-error @+1 {{'braid.dropout_grad_input' op input gradient and gradient must have the same element type}}
  %dx = braid.dropout_grad_input %dy {p = 0.1 : f32, rng_offset = 0 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// split: one part is not a split.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.split' op needs at least two parts}}
  %a = braid.split %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// split: no parts at all.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.split' op needs at least two parts}}
  braid.split %x : (tensor<2x4xf32>) -> ()
  return
}

// -----

// split: a rank-0 tensor has no dimension to split.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'braid.split' op split tensor must have rank >= 1}}
  %a, %b = braid.split %x : (tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

// split: rank-0 parts cannot be joined along a last dimension.
func.func @f(%x: tensor<2xf32>) {
  // expected-error @+1 {{'braid.split' op first part must have rank >= 1}}
  %a, %b = braid.split %x : (tensor<2xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

// split: parts are equal.
func.func @f(%x: tensor<2x5xf32>) {
  // expected-error @+1 {{'braid.split' op part has shape [2x3], expected [2x2]}}
  %a, %b = braid.split %x : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x3xf32>)
  return
}

// -----

// split: parts share an element type.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.split' op part and first part must have the same element type}}
  %a, %b = braid.split %x : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xbf16>)
  return
}

// -----

// split: parts have the split tensor's element type.
func.func @f(%x: tensor<2x4xbf16>) {
  // expected-error @+1 {{'braid.split' op parts and split tensor must have the same element type}}
  %a, %b = braid.split %x : (tensor<2x4xbf16>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return
}

// -----

// split: the parts' widths add up to the split tensor's.
func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.split' op split tensor has shape [2x4], expected [2x6]}}
  %a, %b, %c = braid.split %x : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
  return
}

// -----

// split_grad_input: one part is not a split.
func.func @f(%da: tensor<2x4xf32>) {
  // expected-error @+1 {{'braid.split_grad_input' op needs at least two parts}}
  %dx = braid.split_grad_input %da : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// split_grad_input: no parts at all.
func.func @f() {
  // expected-error @+1 {{'braid.split_grad_input' op needs at least two parts}}
  %dx = braid.split_grad_input : () -> tensor<2x4xf32>
  return
}

// -----

// split_grad_input: a rank-0 result has no dimension to join along.
func.func @f(%d: tensor<f32>) {
  // expected-error @+1 {{'braid.split_grad_input' op split tensor must have rank >= 1}}
  %dx = braid.split_grad_input %d, %d : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

// split_grad_input: rank-0 parts cannot be joined along a last dimension.
func.func @f(%d: tensor<f32>) {
  // expected-error @+1 {{'braid.split_grad_input' op first part must have rank >= 1}}
  %dx = braid.split_grad_input %d, %d : (tensor<f32>, tensor<f32>) -> tensor<2xf32>
  return
}

// -----

// split_grad_input: parts are equal.
func.func @f(%da: tensor<2x2xf32>, %db: tensor<3x2xf32>) {
  // expected-error @+1 {{'braid.split_grad_input' op part has shape [3x2], expected [2x2]}}
  %dx = braid.split_grad_input %da, %db : (tensor<2x2xf32>, tensor<3x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

// split_grad_input: parts share an element type.
func.func @f(%da: tensor<2x2xbf16>, %db: tensor<2x2xf32>) {
  // expected-error @+1 {{'braid.split_grad_input' op part and first part must have the same element type}}
  %dx = braid.split_grad_input %da, %db : (tensor<2x2xbf16>, tensor<2x2xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// split_grad_input: parts have the result's element type.
func.func @f(%d: tensor<2x2xf32>) {
  // expected-error @+1 {{'braid.split_grad_input' op parts and split tensor must have the same element type}}
  %dx = braid.split_grad_input %d, %d : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xbf16>
  return
}

// -----

// split_grad_input: the result is the parts joined along the last dimension.
func.func @f(%d: tensor<2x2xf32>) {
  // expected-error @+1 {{'braid.split_grad_input' op split tensor has shape [4x2], expected [2x4]}}
  %dx = braid.split_grad_input %d, %d : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  return
}
