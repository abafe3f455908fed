// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// Shapes: B = 2, S = 3, D = 4, V = 16, two heads of dim 2.

// Embedding lookup: [V, D] table and [B, S] ids give [B, S, D].
// CHECK-LABEL: func.func @embedding(
// CHECK-SAME: %[[T:.+]]: tensor<16x4xf32>, %[[IDS:.+]]: tensor<2x3xi32>)
// CHECK: %[[Y:.+]] = braid.embedding %[[T]], %[[IDS]] : (tensor<16x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
// CHECK: return %[[Y]]
func.func @embedding(%t: tensor<16x4xf32>, %ids: tensor<2x3xi32>) -> tensor<2x3x4xf32> {
  %y = braid.embedding %t, %ids : (tensor<16x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// Embedding table gradient: the table shape comes from the result.
// CHECK-LABEL: func.func @embedding_grad_weight(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>, %[[IDS:.+]]: tensor<2x3xi32>)
// CHECK: %[[DT:.+]] = braid.embedding_grad_weight %[[DY]], %[[IDS]] : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<16x4xf32>
// CHECK: return %[[DT]]
func.func @embedding_grad_weight(%dy: tensor<2x3x4xf32>, %ids: tensor<2x3xi32>) -> tensor<16x4xf32> {
  %dt = braid.embedding_grad_weight %dy, %ids : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<16x4xf32>
  return %dt : tensor<16x4xf32>
}

// Linear with a bias.
// CHECK-LABEL: func.func @linear_bias(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xf32>, %[[W:.+]]: tensor<8x4xf32>, %[[B:.+]]: tensor<8xf32>)
// CHECK: %[[Y:.+]] = braid.linear %[[X]], %[[W]], %[[B]] : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
// CHECK: return %[[Y]]
func.func @linear_bias(%x: tensor<2x3x4xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %y = braid.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// Linear without a bias, in bf16.
// CHECK-LABEL: func.func @linear_no_bias(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xbf16>, %[[W:.+]]: tensor<8x4xbf16>)
// CHECK: %[[Y:.+]] = braid.linear %[[X]], %[[W]] : (tensor<2x3x4xbf16>, tensor<8x4xbf16>) -> tensor<2x3x8xbf16>
// CHECK: return %[[Y]]
func.func @linear_no_bias(%x: tensor<2x3x4xbf16>, %w: tensor<8x4xbf16>) -> tensor<2x3x8xbf16> {
  %y = braid.linear %x, %w : (tensor<2x3x4xbf16>, tensor<8x4xbf16>) -> tensor<2x3x8xbf16>
  return %y : tensor<2x3x8xbf16>
}

// Input gradient of linear.
// CHECK-LABEL: func.func @linear_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x8xf32>, %[[W:.+]]: tensor<8x4xf32>)
// CHECK: %[[DX:.+]] = braid.linear_grad_input %[[DY]], %[[W]] : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[DX]]
func.func @linear_grad_input(%dy: tensor<2x3x8xf32>, %w: tensor<8x4xf32>) -> tensor<2x3x4xf32> {
  %dx = braid.linear_grad_input %dy, %w : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// Weight gradient of linear with a bias gradient.
// CHECK-LABEL: func.func @linear_grad_weight_bias(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x8xf32>, %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DW:.+]], %[[DB:.+]] = braid.linear_grad_weight %[[DY]], %[[X]] : (tensor<2x3x8xf32>, tensor<2x3x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>)
// CHECK: return %[[DW]], %[[DB]]
func.func @linear_grad_weight_bias(%dy: tensor<2x3x8xf32>, %x: tensor<2x3x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>) {
  %dw, %db = braid.linear_grad_weight %dy, %x : (tensor<2x3x8xf32>, tensor<2x3x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>)
  return %dw, %db : tensor<8x4xf32>, tensor<8xf32>
}

// Weight gradient of linear without a bias gradient.
// CHECK-LABEL: func.func @linear_grad_weight_no_bias(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x8xf32>, %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DW:.+]] = braid.linear_grad_weight %[[DY]], %[[X]] : (tensor<2x3x8xf32>, tensor<2x3x4xf32>) -> tensor<8x4xf32>
// CHECK: return %[[DW]]
func.func @linear_grad_weight_no_bias(%dy: tensor<2x3x8xf32>, %x: tensor<2x3x4xf32>) -> tensor<8x4xf32> {
  %dw = braid.linear_grad_weight %dy, %x : (tensor<2x3x8xf32>, tensor<2x3x4xf32>) -> tensor<8x4xf32>
  return %dw : tensor<8x4xf32>
}

// LayerNorm on bf16 activations keeps its saved statistics in f32.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xbf16>, %[[G:.+]]: tensor<4xbf16>, %[[B:.+]]: tensor<4xbf16>)
// CHECK: %[[Y:.+]], %[[MEAN:.+]], %[[RSTD:.+]] = braid.layer_norm %[[X]], %[[G]], %[[B]] {eps = 9.99999974E-6 : f32} : (tensor<2x3x4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> (tensor<2x3x4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: return %[[Y]], %[[MEAN]], %[[RSTD]]
func.func @layer_norm(%x: tensor<2x3x4xbf16>, %g: tensor<4xbf16>, %b: tensor<4xbf16>) -> (tensor<2x3x4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %y, %mean, %rstd = braid.layer_norm %x, %g, %b {eps = 1.0e-05 : f32} : (tensor<2x3x4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> (tensor<2x3x4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>)
  return %y, %mean, %rstd : tensor<2x3x4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>
}

// Input gradient of LayerNorm.
// CHECK-LABEL: func.func @layer_norm_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>, %[[G:.+]]: tensor<4xf32>, %[[MEAN:.+]]: tensor<2x3xf32>, %[[RSTD:.+]]: tensor<2x3xf32>)
// CHECK: %[[DX:.+]] = braid.layer_norm_grad_input %[[DY]], %[[X]], %[[G]], %[[MEAN]], %[[RSTD]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[DX]]
func.func @layer_norm_grad_input(%dy: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %mean: tensor<2x3xf32>, %rstd: tensor<2x3xf32>) -> tensor<2x3x4xf32> {
  %dx = braid.layer_norm_grad_input %dy, %x, %g, %mean, %rstd : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// Weight and bias gradients of LayerNorm.
// CHECK-LABEL: func.func @layer_norm_grad_weight(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>, %[[MEAN:.+]]: tensor<2x3xf32>, %[[RSTD:.+]]: tensor<2x3xf32>)
// CHECK: %[[DG:.+]], %[[DB:.+]] = braid.layer_norm_grad_weight %[[DY]], %[[X]], %[[MEAN]], %[[RSTD]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: return %[[DG]], %[[DB]]
func.func @layer_norm_grad_weight(%dy: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>, %mean: tensor<2x3xf32>, %rstd: tensor<2x3xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %dg, %db = braid.layer_norm_grad_weight %dy, %x, %mean, %rstd : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %dg, %db : tensor<4xf32>, tensor<4xf32>
}

// RMSNorm on a rank-2 input: one statistic per row.
// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME: %[[X:.+]]: tensor<6x4xf32>, %[[G:.+]]: tensor<4xf32>)
// CHECK: %[[Y:.+]], %[[RSTD:.+]] = braid.rms_norm %[[X]], %[[G]] {eps = 9.99999997E-7 : f32} : (tensor<6x4xf32>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<6xf32>)
// CHECK: return %[[Y]], %[[RSTD]]
func.func @rms_norm(%x: tensor<6x4xf32>, %g: tensor<4xf32>) -> (tensor<6x4xf32>, tensor<6xf32>) {
  %y, %rstd = braid.rms_norm %x, %g {eps = 1.0e-06 : f32} : (tensor<6x4xf32>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<6xf32>)
  return %y, %rstd : tensor<6x4xf32>, tensor<6xf32>
}

// Input gradient of RMSNorm.
// CHECK-LABEL: func.func @rms_norm_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>, %[[G:.+]]: tensor<4xf32>, %[[RSTD:.+]]: tensor<2x3xf32>)
// CHECK: %[[DX:.+]] = braid.rms_norm_grad_input %[[DY]], %[[X]], %[[G]], %[[RSTD]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[DX]]
func.func @rms_norm_grad_input(%dy: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %rstd: tensor<2x3xf32>) -> tensor<2x3x4xf32> {
  %dx = braid.rms_norm_grad_input %dy, %x, %g, %rstd : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// Weight gradient of RMSNorm.
// CHECK-LABEL: func.func @rms_norm_grad_weight(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>, %[[RSTD:.+]]: tensor<2x3xf32>)
// CHECK: %[[DG:.+]] = braid.rms_norm_grad_weight %[[DY]], %[[X]], %[[RSTD]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>) -> tensor<4xf32>
// CHECK: return %[[DG]]
func.func @rms_norm_grad_weight(%dy: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>, %rstd: tensor<2x3xf32>) -> tensor<4xf32> {
  %dg = braid.rms_norm_grad_weight %dy, %x, %rstd : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>) -> tensor<4xf32>
  return %dg : tensor<4xf32>
}

// Causal multi-head attention with dropout.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:.+]]: tensor<2x3x4xf32>, %[[K:.+]]: tensor<2x3x4xf32>, %[[V:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[O:.+]], %[[P:.+]] = braid.attention %[[Q]], %[[K]], %[[V]] {causal = true, dropout = 1.000000e-01 : f32, num_heads = 2 : i64, num_kv_heads = 2 : i64, rng_offset = 7 : i64, scale = 5.000000e-01 : f32} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x3xf32>)
// CHECK: return %[[O]], %[[P]]
func.func @attention(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x3xf32>) {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.1 : f32, rng_offset = 7 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x3xf32>)
  return %o, %p : tensor<2x3x4xf32>, tensor<2x2x3x3xf32>
}

// Grouped-query attention: two query heads share one key/value head.
// CHECK-LABEL: func.func @attention_gqa(
// CHECK-SAME: %[[Q:.+]]: tensor<2x3x4xf32>, %[[K:.+]]: tensor<2x3x2xf32>, %[[V:.+]]: tensor<2x3x2xf32>)
// CHECK: %[[O:.+]], %[[P:.+]] = braid.attention %[[Q]], %[[K]], %[[V]] {causal = true, dropout = 0.000000e+00 : f32, num_heads = 2 : i64, num_kv_heads = 1 : i64, rng_offset = 0 : i64, scale = 5.000000e-01 : f32} : (tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x3xf32>)
// CHECK: return %[[O]], %[[P]]
func.func @attention_gqa(%q: tensor<2x3x4xf32>, %k: tensor<2x3x2xf32>, %v: tensor<2x3x2xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x3xf32>) {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x3xf32>)
  return %o, %p : tensor<2x3x4xf32>, tensor<2x2x3x3xf32>
}

// Non-causal attention may attend to a key sequence of another length.
// CHECK-LABEL: func.func @attention_cross(
// CHECK-SAME: %[[Q:.+]]: tensor<2x3x4xf32>, %[[K:.+]]: tensor<2x5x4xf32>, %[[V:.+]]: tensor<2x5x4xf32>)
// CHECK: %[[O:.+]], %[[P:.+]] = braid.attention %[[Q]], %[[K]], %[[V]] {causal = false, {{.+}}} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x5xf32>)
// CHECK: return %[[O]], %[[P]]
func.func @attention_cross(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x5xf32>) {
  %o, %p = braid.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3x5xf32>)
  return %o, %p : tensor<2x3x4xf32>, tensor<2x2x3x5xf32>
}

// Gradients of multi-head attention.
// CHECK-LABEL: func.func @attention_grad_input(
// CHECK-SAME: %[[DO:.+]]: tensor<2x3x4xf32>, %[[Q:.+]]: tensor<2x3x4xf32>, %[[K:.+]]: tensor<2x3x4xf32>, %[[V:.+]]: tensor<2x3x4xf32>, %[[P:.+]]: tensor<2x2x3x3xf32>)
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = braid.attention_grad_input %[[DO]], %[[Q]], %[[K]], %[[V]], %[[P]] {causal = true, dropout = 1.000000e-01 : f32, num_heads = 2 : i64, num_kv_heads = 2 : i64, rng_offset = 7 : i64, scale = 5.000000e-01 : f32} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x2x3x3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
func.func @attention_grad_input(%do: tensor<2x3x4xf32>, %q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>, %p: tensor<2x2x3x3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.1 : f32, rng_offset = 7 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x2x3x3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// Gradients of grouped-query attention: dk and dv have the key/value width.
// CHECK-LABEL: func.func @attention_grad_input_gqa(
// CHECK-SAME: %[[DO:.+]]: tensor<2x3x4xf32>, %[[Q:.+]]: tensor<2x3x4xf32>, %[[K:.+]]: tensor<2x3x2xf32>, %[[V:.+]]: tensor<2x3x2xf32>, %[[P:.+]]: tensor<2x2x3x3xf32>)
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = braid.attention_grad_input %[[DO]], %[[Q]], %[[K]], %[[V]], %[[P]] {causal = true, {{.+}}num_kv_heads = 1 : i64, {{.+}}} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x2x3x3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>)
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
func.func @attention_grad_input_gqa(%do: tensor<2x3x4xf32>, %q: tensor<2x3x4xf32>, %k: tensor<2x3x2xf32>, %v: tensor<2x3x2xf32>, %p: tensor<2x2x3x3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>) {
  %dq, %dk, %dv = braid.attention_grad_input %do, %q, %k, %v, %p {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x2x3x3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>
}

// Repeating one key/value head for two query heads doubles the width.
// CHECK-LABEL: func.func @repeat_kv(
// CHECK-SAME: %[[K:.+]]: tensor<2x3x2xf32>)
// CHECK: %[[Y:.+]] = braid.repeat_kv %[[K]] {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[Y]]
func.func @repeat_kv(%k: tensor<2x3x2xf32>) -> tensor<2x3x4xf32> {
  %y = braid.repeat_kv %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// The gradient of repeat_kv narrows back to the key/value width.
// CHECK-LABEL: func.func @repeat_kv_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DX:.+]] = braid.repeat_kv_grad_input %[[DY]] {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
// CHECK: return %[[DX]]
func.func @repeat_kv_grad_input(%dy: tensor<2x3x4xf32>) -> tensor<2x3x2xf32> {
  %dx = braid.repeat_kv_grad_input %dy {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
  return %dx : tensor<2x3x2xf32>
}

// Rotary embedding.
// CHECK-LABEL: func.func @rope(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[Y:.+]] = braid.rope %[[X]] {num_heads = 2 : i64, theta = 1.000000e+04 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[Y]]
func.func @rope(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %y = braid.rope %x {num_heads = 2 : i64, theta = 10000.0 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// Gradient of the rotary embedding.
// CHECK-LABEL: func.func @rope_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DX:.+]] = braid.rope_grad_input %[[DY]] {num_heads = 2 : i64, theta = 1.000000e+04 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[DX]]
func.func @rope_grad_input(%dy: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %dx = braid.rope_grad_input %dy {num_heads = 2 : i64, theta = 10000.0 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// GELU.
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[Y:.+]] = braid.gelu %[[X]] : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[Y]]
func.func @gelu(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %y = braid.gelu %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// Gradient of GELU.
// CHECK-LABEL: func.func @gelu_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DX:.+]] = braid.gelu_grad_input %[[DY]], %[[X]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[DX]]
func.func @gelu_grad_input(%dy: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %dx = braid.gelu_grad_input %dy, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// SwiGLU.
// CHECK-LABEL: func.func @swiglu(
// CHECK-SAME: %[[G:.+]]: tensor<2x3x4xf32>, %[[U:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[Y:.+]] = braid.swiglu %[[G]], %[[U]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[Y]]
func.func @swiglu(%g: tensor<2x3x4xf32>, %u: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %y = braid.swiglu %g, %u : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// Gradients of SwiGLU.
// CHECK-LABEL: func.func @swiglu_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>, %[[G:.+]]: tensor<2x3x4xf32>, %[[U:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DG:.+]], %[[DU:.+]] = braid.swiglu_grad_input %[[DY]], %[[G]], %[[U]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK: return %[[DG]], %[[DU]]
func.func @swiglu_grad_input(%dy: tensor<2x3x4xf32>, %g: tensor<2x3x4xf32>, %u: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %dg, %du = braid.swiglu_grad_input %dy, %g, %u : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  return %dg, %du : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// Residual add.
// CHECK-LABEL: func.func @add(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xf32>, %[[Y:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[Z:.+]] = braid.add %[[X]], %[[Y]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[Z]]
func.func @add(%x: tensor<2x3x4xf32>, %y: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %z = braid.add %x, %y : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %z : tensor<2x3x4xf32>
}

// Dropout.
// CHECK-LABEL: func.func @dropout(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[Y:.+]] = braid.dropout %[[X]] {p = 1.000000e-01 : f32, rng_offset = 3 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[Y]]
func.func @dropout(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %y = braid.dropout %x {p = 0.1 : f32, rng_offset = 3 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// Gradient of dropout.
// CHECK-LABEL: func.func @dropout_grad_input(
// CHECK-SAME: %[[DY:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DX:.+]] = braid.dropout_grad_input %[[DY]] {p = 1.000000e-01 : f32, rng_offset = 3 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[DX]]
func.func @dropout_grad_input(%dy: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %dx = braid.dropout_grad_input %dy {p = 0.1 : f32, rng_offset = 3 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// Split into two parts.
// CHECK-LABEL: func.func @split2(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[P:.+]]:2 = braid.split %[[X]] : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>)
// CHECK: return %[[P]]#0, %[[P]]#1
func.func @split2(%x: tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>) {
  %a, %b = braid.split %x : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  return %a, %b : tensor<2x3x2xf32>, tensor<2x3x2xf32>
}

// Split into three parts, as for a fused q/k/v projection.
// CHECK-LABEL: func.func @split3(
// CHECK-SAME: %[[X:.+]]: tensor<2x3x12xf32>)
// CHECK: %[[P:.+]]:3 = braid.split %[[X]] : (tensor<2x3x12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK: return %[[P]]#0, %[[P]]#1, %[[P]]#2
func.func @split3(%x: tensor<2x3x12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %q, %k, %v = braid.split %x : (tensor<2x3x12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  return %q, %k, %v : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// Gradient of a two-part split.
// CHECK-LABEL: func.func @split_grad_input2(
// CHECK-SAME: %[[DA:.+]]: tensor<2x3x2xf32>, %[[DB:.+]]: tensor<2x3x2xf32>)
// CHECK: %[[DX:.+]] = braid.split_grad_input %[[DA]], %[[DB]] : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
// CHECK: return %[[DX]]
func.func @split_grad_input2(%da: tensor<2x3x2xf32>, %db: tensor<2x3x2xf32>) -> tensor<2x3x4xf32> {
  %dx = braid.split_grad_input %da, %db : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// Gradient of a three-part split.
// CHECK-LABEL: func.func @split_grad_input3(
// CHECK-SAME: %[[DQ:.+]]: tensor<2x3x4xf32>, %[[DK:.+]]: tensor<2x3x4xf32>, %[[DV:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[DX:.+]] = braid.split_grad_input %[[DQ]], %[[DK]], %[[DV]] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x12xf32>
// CHECK: return %[[DX]]
func.func @split_grad_input3(%dq: tensor<2x3x4xf32>, %dk: tensor<2x3x4xf32>, %dv: tensor<2x3x4xf32>) -> tensor<2x3x12xf32> {
  %dx = braid.split_grad_input %dq, %dk, %dv : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x12xf32>
  return %dx : tensor<2x3x12xf32>
}

// Cross-entropy: a scalar loss and one log-sum-exp per token.
// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME: %[[L:.+]]: tensor<2x3x16xf32>, %[[Y:.+]]: tensor<2x3xi32>)
// CHECK: %[[LOSS:.+]], %[[LSE:.+]] = braid.cross_entropy %[[L]], %[[Y]] : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK: return %[[LOSS]], %[[LSE]]
func.func @cross_entropy(%l: tensor<2x3x16xf32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3xf32>) {
  %loss, %lse = braid.cross_entropy %l, %y : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3xf32>)
  return %loss, %lse : tensor<f32>, tensor<2x3xf32>
}

// Gradient of cross-entropy w.r.t. the logits.
// CHECK-LABEL: func.func @cross_entropy_grad_input(
// CHECK-SAME: %[[L:.+]]: tensor<2x3x16xf32>, %[[Y:.+]]: tensor<2x3xi32>, %[[LSE:.+]]: tensor<2x3xf32>)
// CHECK: %[[DL:.+]] = braid.cross_entropy_grad_input %[[L]], %[[Y]], %[[LSE]] {scale = 2.500000e-01 : f32} : (tensor<2x3x16xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<2x3x16xf32>
// CHECK: return %[[DL]]
func.func @cross_entropy_grad_input(%l: tensor<2x3x16xf32>, %y: tensor<2x3xi32>, %lse: tensor<2x3xf32>) -> tensor<2x3x16xf32> {
  %dl = braid.cross_entropy_grad_input %l, %y, %lse {scale = 0.25 : f32} : (tensor<2x3x16xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<2x3x16xf32>
  return %dl : tensor<2x3x16xf32>
}

// Cast of an f32 parameter to the bf16 value compute reads, and back.
// CHECK-LABEL: func.func @cast(
// CHECK-SAME: %[[W:.+]]: tensor<8x4xf32>)
// CHECK: %[[WB:.+]] = braid.cast %[[W]] : (tensor<8x4xf32>) -> tensor<8x4xbf16>
// CHECK: %[[WF:.+]] = braid.cast %[[WB]] : (tensor<8x4xbf16>) -> tensor<8x4xf32>
// CHECK: return %[[WB]], %[[WF]]
func.func @cast(%w: tensor<8x4xf32>) -> (tensor<8x4xbf16>, tensor<8x4xf32>) {
  %wb = braid.cast %w : (tensor<8x4xf32>) -> tensor<8x4xbf16>
  %wf = braid.cast %wb : (tensor<8x4xbf16>) -> tensor<8x4xf32>
  return %wb, %wf : tensor<8x4xbf16>, tensor<8x4xf32>
}

// Mixed precision: weight-gradient ops accumulate bf16 activations and
// gradients into f32 parameter gradients.
// CHECK-LABEL: func.func @f32_weight_grads_over_bf16(
// CHECK: braid.embedding_grad_weight %{{.+}}, %{{.+}} : (tensor<2x3x4xbf16>, tensor<2x3xi32>) -> tensor<16x4xf32>
// CHECK: braid.linear_grad_weight %{{.+}}, %{{.+}} : (tensor<2x3x8xbf16>, tensor<2x3x4xbf16>) -> (tensor<8x4xf32>, tensor<8xf32>)
// CHECK: braid.linear_grad_weight %{{.+}}, %{{.+}} : (tensor<2x3x8xbf16>, tensor<2x3x4xbf16>) -> (tensor<8x4xbf16>, tensor<8xf32>)
// CHECK: braid.layer_norm_grad_weight %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: braid.rms_norm_grad_weight %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3xf32>) -> tensor<4xf32>
func.func @f32_weight_grads_over_bf16(%dy4: tensor<2x3x4xbf16>, %ids: tensor<2x3xi32>,
                                      %dy8: tensor<2x3x8xbf16>, %x: tensor<2x3x4xbf16>,
                                      %stat: tensor<2x3xf32>) {
  %dt = braid.embedding_grad_weight %dy4, %ids : (tensor<2x3x4xbf16>, tensor<2x3xi32>) -> tensor<16x4xf32>
  %dw, %db = braid.linear_grad_weight %dy8, %x : (tensor<2x3x8xbf16>, tensor<2x3x4xbf16>) -> (tensor<8x4xf32>, tensor<8xf32>)
  %dw2, %db2 = braid.linear_grad_weight %dy8, %x : (tensor<2x3x8xbf16>, tensor<2x3x4xbf16>) -> (tensor<8x4xbf16>, tensor<8xf32>)
  %dg, %dbeta = braid.layer_norm_grad_weight %dy4, %x, %stat, %stat : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %dr = braid.rms_norm_grad_weight %dy4, %x, %stat : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3xf32>) -> tensor<4xf32>
  return
}

// The marks print as they are written.
// CHECK-LABEL: func.func @marks
// CHECK: braid.gelu %{{.+}} {braid.layer = #braid.layer<3>, braid.phase = #braid.phase<forward>}
// CHECK: braid.gelu %{{.+}} {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<input_grad>}
// CHECK: braid.gelu %{{.+}} {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<weight_grad>}
func.func @marks(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a = braid.gelu %x {braid.layer = #braid.layer<3>, braid.phase = #braid.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %b = braid.gelu %a {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<input_grad>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %c = braid.gelu %b {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<weight_grad>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %c : tensor<2x4xf32>
}

// Context parallel: the inputs' balanced parts, a ring step and the
// reference attention over the whole sequence's keys.
// CHECK-LABEL: func.func @context_parallel(
// CHECK: braid.take_part %{{.+}} {axis = #braid.axis<cp>, dim = 1 : i64} : (tensor<2x4xi32>) -> tensor<2x2xi32>
// CHECK: braid.comm.shift %{{.+}} {axis = #braid.axis<cp>, offset = 1 : i64} : (tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
// CHECK: braid.attention {{.*}}cp = true{{.*}} -> (tensor<2x2x4xf32>, tensor<2x2x2x4xf32>)
// CHECK: braid.rope {{.*}}cp = true
// CHECK: braid.dropout {{.*}}cp_dim = 1 : i64
func.func @context_parallel(%ids: tensor<2x4xi32>, %x: tensor<2x2x4xf32>, %k: tensor<2x4x4xf32>) -> tensor<2x2x4xf32> {
  %part = braid.take_part %ids {axis = #braid.axis<cp>, dim = 1 : i64} : (tensor<2x4xi32>) -> tensor<2x2xi32>
  %next = braid.comm.shift %x {axis = #braid.axis<cp>, offset = 1 : i64} : (tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %o, %p = braid.attention %next, %k, %k {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.5 : f32, dropout = 0.0 : f32, rng_offset = 0 : i64, cp = true} : (tensor<2x2x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x2x4xf32>, tensor<2x2x2x4xf32>)
  %r = braid.rope %o {num_heads = 2 : i64, theta = 1.0e+04 : f32, cp = true} : (tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %d = braid.dropout %r {p = 0.1 : f32, rng_offset = 1 : i64, cp_dim = 1 : i64} : (tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  return %d : tensor<2x2x4xf32>
}
