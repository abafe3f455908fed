// RUN: braid-opt %s --split-input-file --braid-fuse-add-norm | FileCheck %s
// RUN: echo 'module {}' | not braid-opt --braid-fuse-add-norm 2>&1 | FileCheck %s --check-prefix=NOSTAGE

// The fusions rewrite the stage functions; a module without one is refused.
// NOSTAGE: error: braid-fuse-add-norm needs a stage function, a func.func marked braid.stage

// RMSNorm over a residual add whose branch is a dropout used only there:
// the dropout, the add and the norm become one op, and the norm's input
// gradient absorbs the residual's gradient sum.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[R:.+]]: tensor<2x4x8xf32>, %[[X:.+]]: tensor<2x4x8xf32>, %[[G:.+]]: tensor<8xf32>, %[[DY:.+]]: tensor<2x4x8xf32>, %[[DR:.+]]: tensor<2x4x8xf32>)
// CHECK-NEXT: %[[S:.+]], %[[Y:.+]], %[[RSTD:.+]] = braid.fused_add_rms_norm %[[R]], %[[X]], %[[G]] {eps = {{.+}}, p = 1.000000e-01 : f32, rng_offset = 2 : i64}
// CHECK-NEXT: %[[DX:.+]] = braid.fused_add_rms_norm_grad_input %[[DY]], %[[S]], %[[G]], %[[RSTD]], %[[DR]]
// CHECK-NEXT: return %[[S]], %[[Y]], %[[DX]]
func.func @train_step(%r: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>,
                      %dy: tensor<2x4x8xf32>, %dr: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {braid.stage = #braid.stage<0>} {
  %d = braid.dropout %x {p = 0.1 : f32, rng_offset = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = braid.add %r, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y, %rstd = braid.rms_norm %s, %g {eps = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %dx = braid.rms_norm_grad_input %dy, %s, %g, %rstd : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> tensor<2x4x8xf32>
  %t = braid.add %dr, %dx : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %s, %y, %t : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// LayerNorm, the dropout on the add's left operand. The dropout's result
// is also returned, so it stays, and the add fuses without it (p = 0). The
// input gradient feeds two ops, so no gradient sum is fused.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[D:.+]] = braid.dropout %arg1
// CHECK-NEXT: %[[S:.+]], %[[Y:.+]], %[[M:.+]], %[[RSTD:.+]] = braid.fused_add_layer_norm %[[D]], %arg0, %arg2, %arg3 {eps = {{.+}}, p = 0.000000e+00 : f32, rng_offset = 0 : i64}
// CHECK-NEXT: %[[DX:.+]] = braid.layer_norm_grad_input %arg4, %[[S]], %arg2, %[[M]], %[[RSTD]]
// CHECK-NEXT: braid.add %arg5, %[[DX]]
// CHECK-NEXT: braid.add %[[DX]], %[[DX]]
// CHECK-NOT: braid.layer_norm
func.func @train_step(%r: tensor<4x8xf32>, %x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>,
                      %dy: tensor<4x8xf32>, %dr: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) attributes {braid.stage = #braid.stage<0>} {
  %d = braid.dropout %x {p = 0.1 : f32, rng_offset = 5 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = braid.add %d, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y, %mean, %rstd = braid.layer_norm %s, %g, %b {eps = 1.0e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %dx = braid.layer_norm_grad_input %dy, %s, %g, %mean, %rstd : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  %t = braid.add %dr, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %u = braid.add %dx, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %d, %y, %t, %u : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Partial patterns are left alone: a norm whose input is a dropout (GPT-2's
// embedding), and a norm whose weight is computed after the add.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: fused
// CHECK: braid.rms_norm
// CHECK: braid.add
// CHECK: braid.cast
// CHECK: braid.rms_norm
// CHECK-NOT: fused
func.func @train_step(%x: tensor<4x8xbf16>, %r: tensor<4x8xbf16>, %g: tensor<8xbf16>, %gm: tensor<8xf32>)
    -> (tensor<4x8xbf16>, tensor<4x8xbf16>) attributes {braid.stage = #braid.stage<0>} {
  %d = braid.dropout %x {p = 0.1 : f32, rng_offset = 0 : i64} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %y, %rstd = braid.rms_norm %d, %g {eps = 1.0e-05 : f32} : (tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4xf32>)
  %s = braid.add %r, %y : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %c = braid.cast %gm : (tensor<8xf32>) -> tensor<8xbf16>
  %z, %rstd2 = braid.rms_norm %s, %c {eps = 1.0e-05 : f32} : (tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4xf32>)
  return %s, %z : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// bf16 activations with f32 statistics fuse like f32 ones.

// CHECK-LABEL: func.func @train_step
// CHECK: braid.fused_add_rms_norm %arg0, %arg1, %arg2 {{.+}} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4xf32>)
func.func @train_step(%r: tensor<4x8xbf16>, %x: tensor<4x8xbf16>, %g: tensor<8xbf16>)
    -> (tensor<4x8xbf16>, tensor<4x8xbf16>) attributes {braid.stage = #braid.stage<0>} {
  %s = braid.add %r, %x : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %y, %rstd = braid.rms_norm %s, %g {eps = 1.0e-05 : f32} : (tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4xf32>)
  return %s, %y : tensor<4x8xbf16>, tensor<4x8xbf16>
}
