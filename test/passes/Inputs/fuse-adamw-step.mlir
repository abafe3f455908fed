// A differentiated step (as braid-lower-to-sched.mlir): table and w are
// rank 2 and decay, b does not.
module attributes {braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  func.func @train_step(%arg0: tensor<2x4xi32> {braid.input = #braid.input<tokens>}, %arg1: tensor<2x4xi32> {braid.input = #braid.input<labels>}, %arg2: tensor<16x8xf32> {braid.param = #braid.param<name = "table", init = normal, init_std = 2.000000e-02, weight_decay = true, checkpoint_transposed = false>}, %arg3: tensor<8x8xf32> {braid.param = #braid.param<name = "w", init = normal, init_std = 2.000000e-02, weight_decay = true, checkpoint_transposed = false>}, %arg4: tensor<8xf32> {braid.param = #braid.param<name = "b", init = zeros, init_std = 0.0, weight_decay = true, checkpoint_transposed = false>}) -> (tensor<f32> {braid.loss}, tensor<16x8xf32> {braid.grad_of = "table"}, tensor<8x8xf32> {braid.grad_of = "w"}, tensor<8xf32> {braid.grad_of = "b"}) attributes {braid.stage = #braid.stage<0>} {
    %0 = braid.embedding %arg2, %arg0 {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<forward>} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %1 = braid.linear %0, %arg3, %arg4 {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %2 = braid.add %0, %1 {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %3 = braid.linear %2, %arg2 {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %loss, %lse = braid.cross_entropy %3, %arg1 {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>)
    %4 = braid.cross_entropy_grad_input %3, %arg1, %lse {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<input_grad>, scale = 1.000000e+00 : f32} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
    %5 = braid.linear_grad_input %4, %arg2 {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<input_grad>} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %weight_grad = braid.linear_grad_weight %4, %2 {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<weight_grad>} : (tensor<2x4x16xf32>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
    %6 = braid.linear_grad_input %5, %arg3 {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %7 = braid.add %5, %6 {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %weight_grad_0, %bias_grad = braid.linear_grad_weight %5, %0 {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>)
    %8 = braid.embedding_grad_weight %7, %arg0 {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<weight_grad>} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
    %9 = braid.add %weight_grad, %8 {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<weight_grad>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    return %loss, %9, %weight_grad_0, %bias_grad : tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  }
}

