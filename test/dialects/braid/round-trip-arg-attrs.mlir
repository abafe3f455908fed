// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// What the arguments of a stage function are: parameters with every field
// in its place, initialisations and inputs as keywords, the std printed so
// that it reads back as the same double.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<2x4xi32> {braid.input = #braid.input<tokens>}
// CHECK-SAME: tensor<2x4xi32> {braid.input = #braid.input<labels>}
// CHECK-SAME: tensor<2x4xi32> {braid.input = #braid.input<positions>}
// CHECK-SAME: tensor<8x8xf32> {braid.param = #braid.param<name = "model.layers.0.mlp.up_proj.weight", init = normal, init_std = 0.014433756729740645, weight_decay = true, checkpoint_transposed = true>}
// CHECK-SAME: tensor<8xf32> {braid.param = #braid.param<name = "model.layers.0.mlp.up_proj.bias", init = zeros, init_std = 0.000000e+00, weight_decay = false, checkpoint_transposed = false>}
// CHECK-SAME: tensor<8xf32> {braid.param = #braid.param<name = "model.norm.weight", init = ones, init_std = 0.000000e+00, weight_decay = false, checkpoint_transposed = false>}
// CHECK-SAME: attributes {braid.stage = #braid.stage<0>}
func.func @train_step(
    %tokens: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
    %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
    %positions: tensor<2x4xi32> {braid.input = #braid.input<positions>},
    %w: tensor<8x8xf32> {braid.param = #braid.param<
        name = "model.layers.0.mlp.up_proj.weight", init = normal,
        init_std = 0.014433756729740645, weight_decay = true,
        checkpoint_transposed = true>},
    %b: tensor<8xf32> {braid.param = #braid.param<
        name = "model.layers.0.mlp.up_proj.bias", init = zeros,
        init_std = 0.0, weight_decay = false, checkpoint_transposed = false>},
    %g: tensor<8xf32> {braid.param = #braid.param<name = "model.norm.weight",
        init = ones, init_std = 0.0, weight_decay = false,
        checkpoint_transposed = false>})
    attributes {braid.stage = #braid.stage<0>} {
  return
}
