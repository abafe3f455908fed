// RUN: braid-opt %s -split-input-file -verify-diagnostics

// The sub-units' split and join (docs/moe.md "Sub-units"): equal parts of
// the sequence, at least two, of the whole's element type.
func.func @f(%x: tensor<2x6x4xf32>) {
  // expected-error @+1 {{'braid.moe_split_tokens' op input's sequence of 6 does not split into 4 parts}}
  %a, %b, %c, %d = braid.moe_split_tokens %x : (tensor<2x6x4xf32>) -> (tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x6x4xf32>) {
  // expected-error @+1 {{'braid.moe_split_tokens' op needs at least two parts, got 1}}
  %a = braid.moe_split_tokens %x : (tensor<2x6x4xf32>) -> tensor<2x6x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x4xf32>) {
  // expected-error @+1 {{'braid.moe_split_tokens' op part has shape [2x3x2], expected [2x3x4]}}
  %a, %b = braid.moe_split_tokens %x : (tensor<2x6x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x2xf32>)
  return
}

// -----

func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'braid.moe_join_tokens' op part and result must have the same element type}}
  %x = braid.moe_join_tokens %a, %b : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<6x4xf32>, %b: tensor<6x4xf32>) {
  // expected-error @+1 {{'braid.moe_join_tokens' op result must have rank 3}}
  %x = braid.moe_join_tokens %a, %b : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<12x4xf32>
  return
}
