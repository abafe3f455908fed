// RUN: braid-opt %s --braid-autodiff --split-input-file --verify-diagnostics

// The loss must come from cross_entropy.
// expected-error @+1 {{braid-autodiff expects the loss to be produced by braid.cross_entropy}}
func.func @train_step(%w: tensor<f32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> tensor<f32> attributes {braid.stage = #braid.stage<0>} {
  return %w : tensor<f32>
}

// -----

// A parameter that never reaches the loss has no gradient.
// expected-error @+1 {{parameter 'unused' does not affect the loss}}
func.func @train_step(%ids: tensor<1x2xi32> {braid.input = #braid.input<tokens>},
                      %table: tensor<4x2xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %unused: tensor<2xf32> {braid.param = #braid.param<name = "unused", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>})
    -> tensor<f32> attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %table, %ids : (tensor<4x2xf32>, tensor<1x2xi32>) -> tensor<1x2x2xf32>
  %logits = braid.linear %x, %table : (tensor<1x2x2xf32>, tensor<4x2xf32>) -> tensor<1x2x4xf32>
  %loss, %lse = braid.cross_entropy %logits, %ids : (tensor<1x2x4xf32>, tensor<1x2xi32>) -> (tensor<f32>, tensor<1x2xf32>)
  return %loss : tensor<f32>
}

// -----

// Backward ops have no gradient rule of their own.
func.func @train_step(%ids: tensor<1x2xi32> {braid.input = #braid.input<tokens>},
                      %table: tensor<4x2xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> tensor<f32> attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %table, %ids : (tensor<4x2xf32>, tensor<1x2xi32>) -> tensor<1x2x2xf32>
  // expected-error @+1 {{autodiff has no gradient rule for this op}}
  %g = braid.gelu_grad_input %x, %x : (tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %logits = braid.linear %g, %table : (tensor<1x2x2xf32>, tensor<4x2xf32>) -> tensor<1x2x4xf32>
  %loss, %lse = braid.cross_entropy %logits, %ids : (tensor<1x2x4xf32>, tensor<1x2xi32>) -> (tensor<f32>, tensor<1x2xf32>)
  return %loss : tensor<f32>
}

// -----

// A split part that does not reach the loss leaves the split without a full
// gradient.
func.func @train_step(%ids: tensor<1x2xi32> {braid.input = #braid.input<tokens>},
                      %table: tensor<4x4xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>},
                      %head: tensor<4x2xf32> {braid.param = #braid.param<name = "head", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
    -> tensor<f32> attributes {braid.stage = #braid.stage<0>} {
  %x = braid.embedding %table, %ids : (tensor<4x4xf32>, tensor<1x2xi32>) -> tensor<1x2x4xf32>
  // expected-error @+1 {{autodiff needs a gradient for every part of a split}}
  %a, %b = braid.split %x : (tensor<1x2x4xf32>) -> (tensor<1x2x2xf32>, tensor<1x2x2xf32>)
  %logits = braid.linear %a, %head : (tensor<1x2x2xf32>, tensor<4x2xf32>) -> tensor<1x2x4xf32>
  %loss, %lse = braid.cross_entropy %logits, %ids : (tensor<1x2x4xf32>, tensor<1x2xi32>) -> (tensor<f32>, tensor<1x2xf32>)
  return %loss : tensor<f32>
}

// -----

// No function to differentiate: a function is a stage by its mark, not by
// its name.
// expected-error @+1 {{braid-autodiff needs a stage function, a func.func marked braid.stage (braid-import marks the one it creates #braid.stage<0>)}}
module {
  func.func @train_step(%w: tensor<f32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> tensor<f32> {
    return %w : tensor<f32>
  }
}

// -----

// Autodiff differentiates the one stage of a one-stage module.
// expected-error @+1 {{braid-autodiff handles one pipeline stage, but 2 functions are stages: @first @second}}
module {
  func.func @second(%w: tensor<f32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> tensor<f32> attributes {braid.stage = #braid.stage<1>} {
    return %w : tensor<f32>
  }
  func.func @first(%w: tensor<f32> {braid.param = #braid.param<name = "v", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> tensor<f32> attributes {braid.stage = #braid.stage<0>} {
    return %w : tensor<f32>
  }
}

// -----

// Differentiating twice is refused.
// expected-error @+1 {{is already differentiated (it has more than one result)}}
func.func @train_step(%w: tensor<f32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> (tensor<f32>, tensor<f32>) attributes {braid.stage = #braid.stage<0>} {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

// Without a result there is no loss to differentiate.
// expected-error @+1 {{braid-autodiff expects a single loss result}}
func.func @train_step() attributes {braid.stage = #braid.stage<0>} {
  return
}
