// RUN: braid-opt %s -split-input-file -verify-diagnostics

// embedding: the table is [V, D].
func.func @f(%t: tensor<16xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{'braid.embedding' op table must have rank 2}}
  %y = braid.embedding %t, %ids : (tensor<16xf32>, tensor<2xi32>) -> tensor<2xf32>
  return
}

// -----

// embedding: rows keep the table's element type.
func.func @f(%t: tensor<16x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{'braid.embedding' op result and table must have the same element type}}
  %y = braid.embedding %t, %ids : (tensor<16x4xf32>, tensor<2xi32>) -> tensor<2x4xbf16>
  return
}

// -----

// embedding: the result is the ids' shape plus D.
func.func @f(%t: tensor<16x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{'braid.embedding' op result has shape [2x8], expected [2x4]}}
  %y = braid.embedding %t, %ids : (tensor<16x4xf32>, tensor<2xi32>) -> tensor<2x8xf32>
  return
}

// -----

// embedding_grad_weight: the table gradient is [V, D].
func.func @f(%dy: tensor<2x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{'braid.embedding_grad_weight' op table gradient must have rank 2}}
  %dt = braid.embedding_grad_weight %dy, %ids : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<64xf32>
  return
}

// -----

// embedding_grad_weight: the table gradient is f32 or has the gradient's element type.
func.func @f(%dy: tensor<2x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{'braid.embedding_grad_weight' op table gradient must be f32 or have the element type of gradient}}
  %dt = braid.embedding_grad_weight %dy, %ids : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<16x4xbf16>
  return
}

// -----

// embedding_grad_weight: the gradient is the ids' shape plus D.
func.func @f(%dy: tensor<3x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{'braid.embedding_grad_weight' op gradient has shape [3x4], expected [2x4]}}
  %dt = braid.embedding_grad_weight %dy, %ids : (tensor<3x4xf32>, tensor<2xi32>) -> tensor<16x4xf32>
  return
}
