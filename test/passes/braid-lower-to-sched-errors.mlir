// RUN: braid-opt %s --braid-lower-to-sched --split-input-file --verify-diagnostics --allow-unregistered-dialect

// Lowering needs the training settings of braid-import.
// expected-error @+1 {{braid-lower-to-sched needs the braid.train module attribute (run braid-import first)}}
module {
  func.func @train_step() -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
    %c = "test.loss"() : () -> tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// A step that was not differentiated returns only the loss.
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  // expected-error @+1 {{must return the loss and one gradient per parameter (run braid-autodiff first)}}
  func.func @train_step(%w: tensor<4xf32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> tensor<f32> attributes {braid.stage = #braid.stage<0>} {
    %c = "test.loss"() : () -> tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// Every argument is a parameter or an input.
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  // expected-error @+1 {{argument 0 is neither braid.param, braid.input nor braid.buffer}}
  func.func @train_step(%w: tensor<4xf32>) -> tensor<f32> attributes {braid.stage = #braid.stage<0>} {
    %c = "test.loss"() : () -> tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// There must be a step to lower.
// expected-error @+1 {{braid-lower-to-sched needs a stage function, a func.func marked braid.stage (braid-import marks the one it creates #braid.stage<0>)}}
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
}

// -----

// One rank runs one stage: a module of two stages is refused.
// expected-error @+1 {{braid-lower-to-sched handles one pipeline stage, but 2 functions are stages: @stage0 @stage1}}
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  func.func @stage0() -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>} {
    %c = "test.loss"() : () -> tensor<f32>
    return %c : tensor<f32>
  }
  func.func @stage1() -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<1>} {
    %c = "test.loss"() : () -> tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// Only braid ops lower to kernel launches.
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  func.func @train_step(%w: tensor<4xf32> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> (tensor<f32>, tensor<4xf32>) attributes {braid.stage = #braid.stage<0>} {
    // expected-error @+1 {{braid-lower-to-sched cannot lower this op}}
    %c = "test.loss"(%w) : (tensor<4xf32>) -> tensor<f32>
    return %c, %w : tensor<f32>, tensor<4xf32>
  }
}

// -----

// Parameters are the f32 masters; bf16 weights are casts of them.
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  // expected-error @+1 {{parameter 'w' is 'bf16', but parameters are the f32 masters that AdamW updates; make it f32 and cast it to bf16 with braid.cast}}
  func.func @train_step(%w: tensor<4xbf16> {braid.param = #braid.param<name = "w", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>}) -> (tensor<f32>, tensor<4xbf16>) attributes {braid.stage = #braid.stage<0>} {
    %c = "test.loss"(%w) : (tensor<4xbf16>) -> tensor<f32>
    return %c, %w : tensor<f32>, tensor<4xbf16>
  }
}

// -----

// Every op carries the marks import and autodiff set.
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  func.func @train_step(%ids: tensor<2x4xi32> {braid.input = #braid.input<tokens>},
                        %labels: tensor<2x4xi32> {braid.input = #braid.input<labels>},
                        %t: tensor<16x8xf32> {braid.param = #braid.param<name = "t", init = normal, init_std = 2.0e-02, weight_decay = false, checkpoint_transposed = false>})
      -> (tensor<f32> {braid.loss}, tensor<16x8xf32> {braid.grad_of = "t"}) attributes {braid.stage = #braid.stage<0>} {
    // expected-error @+1 {{'braid.embedding' op has no braid.phase mark (braid-import sets the layer of every op, braid-autodiff the phase)}}
    %x = braid.embedding %t, %ids {braid.layer = #braid.layer<embedding>} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %g = braid.embedding_grad_weight %x, %ids {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<weight_grad>} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
    %l = "test.loss"() : () -> tensor<f32>
    return %l, %g : tensor<f32>, tensor<16x8xf32>
  }
}

// -----

// ZeRO shards an expert-parallel share of the experts over the ranks that
// hold the same experts (edp: DP 4 / EP 2 = 2), which must divide its first
// dimension: one local expert does not split over two ranks.
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 1, dp = 4, ep = 2>, braid.zero_stage = 1 : i64, braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 1, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  // expected-error @+1 {{ZeRO stage 1 shards every parameter along its first dimension over the 2 data-parallel ranks that hold the same experts, but 'experts' is 'tensor<1x4x8xf32>': choose a data_parallel / expert_parallel that divides 1, or zero_stage 0}}
  func.func @train_step(%w: tensor<1x4x8xf32> {braid.param = #braid.param<name = "experts", init = ones, init_std = 0.0, weight_decay = false, checkpoint_transposed = false>, braid.ep}) -> (tensor<f32>, tensor<1x4x8xf32>) attributes {braid.stage = #braid.stage<0>} {
    %c = "test.loss"() : () -> tensor<f32>
    return %c, %w : tensor<f32>, tensor<1x4x8xf32>
  }
}
