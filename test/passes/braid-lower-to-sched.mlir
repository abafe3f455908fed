// RUN: braid-opt %s --braid-lower-to-sched | FileCheck %s

// A differentiated step with a tied table, a biased linear and a residual
// add, under 4 micro-batches.

// Persistent buffers: parameters, then gradients, moments, inputs, scalars.
// CHECK: sched.global @table parameter : memref<16x8xf32> info <name = "table", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @table.grad, exp_avg = @table.exp_avg, exp_avg_sq = @table.exp_avg_sq>
// Rank-1 parameters are not decayed.
// CHECK: sched.global @b parameter : memref<8xf32> info <name = "b", init = zeros, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
// CHECK: sched.global @table.grad gradient of @table : memref<16x8xf32>
// CHECK: sched.global @b.exp_avg_sq optimizer_state of @b : memref<8xf32>
// CHECK: sched.global @tokens input role tokens : memref<2x4xi32>
// CHECK: sched.global @loss scalar role loss : memref<f32>
// CHECK: sched.global @loss_sum scalar role loss_sum : memref<f32>
// CHECK: sched.global @grad_norm scalar role grad_norm : memref<f32>
// CHECK: sched.global @step_skipped scalar role step_skipped : memref<f32>
// CHECK-NOT: func.func

// One step program: it zeroes the gradients and the loss sum, then repeats
// one micro-batch's instructions for each of the 4 micro-batches (iteration
// i computes micro-batch i: its stages, launches and loss slot are offset by
// i), then runs the optimizer.
// CHECK-LABEL: sched.program @step step {
// CHECK: sched.launch "fill" on 0 outs(%{{.+}} : memref<16x8xf32>) params {value = 0.000000e+00 : f64} {braid.phase = #braid.phase<optimizer>}
// CHECK: sched.launch "fill" on 0 outs(%{{.+}} : memref<8x8xf32>)
// CHECK: sched.launch "fill" on 0 outs(%{{.+}} : memref<8xf32>)
// CHECK: sched.launch "fill" on 0 outs(%{{.+}} : memref<f32>)
// CHECK: sched.repeat 4 {
// CHECK: %[[TOK:.+]] = sched.get_global @tokens
// CHECK: sched.stage %[[TOK]] micro_batch 0 on 0 : memref<2x4xi32>
// CHECK: %[[LAB:.+]] = sched.get_global @labels
// CHECK: sched.stage %[[LAB]] micro_batch 0 on 0 : memref<2x4xi32>
// One launch per braid op, in order, on stream 0.
// CHECK: %[[TABLE:.+]] = sched.get_global @table
// CHECK: %[[X:.+]] = sched.alloc : memref<2x4x8xf32>
// CHECK: sched.launch "embedding" on 0 ins(%[[TABLE]], %{{.+}} : memref<16x8xf32>, memref<2x4xi32>) outs(%[[X]] : memref<2x4x8xf32>)
// CHECK: sched.launch "linear" on 0 ins(%[[X]], %{{.+}}, %{{.+}} :
// CHECK: %[[LOSS:.+]] = sched.get_global @loss
// CHECK: sched.launch "cross_entropy" on 0 ins({{.+}}) outs(%[[LOSS]], %{{.+}} : memref<f32>, memref<2x4xf32>)
// The loss gradient is scaled by 1/num_micro_batches.
// CHECK: sched.launch "cross_entropy_grad_input" {{.+}} params {scale = 2.500000e-01 : f64}
// Weight gradients write straight into their gradient globals and
// accumulate; the tied table gets both contributions and no add.
// CHECK: %[[TG:.+]] = sched.get_global @table.grad
// CHECK: sched.launch "linear_grad_weight" on 0 ins({{.+}}) outs(%[[TG]] : memref<16x8xf32>) params {accumulate = 1 : i64}
// CHECK: sched.launch "add"
// CHECK: %[[WG:.+]] = sched.get_global @w.grad
// CHECK: %[[BG:.+]] = sched.get_global @b.grad
// CHECK: sched.launch "linear_grad_weight" on 0 ins({{.+}}) outs(%[[WG]], %[[BG]] : memref<8x8xf32>, memref<8xf32>) params {accumulate = 1 : i64}
// CHECK: %[[TG2:.+]] = sched.get_global @table.grad
// Each launch keeps the marks of the op it lowers.
// CHECK: sched.launch "embedding_grad_weight" on 0 ins({{.+}}) outs(%[[TG2]] : memref<16x8xf32>) params {accumulate = 1 : i64} {braid.layer = #braid.layer<embedding>, braid.phase = #braid.phase<weight_grad>}
// Last, the micro-batch's loss goes to its slot and joins the step's sum,
// which the optimizer checks.
// CHECK-NEXT: %[[L0:.+]] = sched.get_global @loss :
// CHECK-NEXT: sched.readback %[[L0]] to 0 on 0 : memref<f32>
// CHECK-NEXT: %[[L:.+]] = sched.get_global @loss :
// CHECK-NEXT: %[[LS:.+]] = sched.get_global @loss_sum :
// CHECK-NEXT: sched.launch "accumulate" on 0 ins(%[[L]] : memref<f32>) outs(%[[LS]] : memref<f32>) {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>}
// CHECK-NEXT: }

// The optimizer: global norm, the guard that refuses a non-finite step,
// AdamW per parameter (no decay on rank-1 parameters; nothing when the
// guard says skip); the norm and the flag go to the slots after the
// losses.
// CHECK: %[[G0:.+]] = sched.get_global @table.grad
// CHECK: %[[G1:.+]] = sched.get_global @w.grad
// CHECK: %[[G2:.+]] = sched.get_global @b.grad
// CHECK: %[[NORM:.+]] = sched.get_global @grad_norm
// CHECK: sched.launch "grad_norm" on 0 ins(%[[G0]], %[[G1]], %[[G2]] : {{.+}}) outs(%[[NORM]] : memref<f32>) {braid.phase = #braid.phase<optimizer>}
// CHECK: %[[SUM:.+]] = sched.get_global @loss_sum
// CHECK: %[[SKIP:.+]] = sched.get_global @step_skipped
// CHECK: sched.launch "step_guard" on 0 ins(%[[SUM]], %[[NORM]] : memref<f32>, memref<f32>) outs(%[[SKIP]] : memref<f32>)
// CHECK: sched.launch "adamw" on 0 ins(%[[G0]], %[[NORM]], %[[SKIP]] : {{.+}}) outs({{.+}}) params {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK: sched.launch "adamw" on 0 ins(%[[G1]], %[[NORM]], %[[SKIP]]
// CHECK: sched.launch "adamw" on 0 ins(%[[G2]], %[[NORM]], %[[SKIP]] {{.+}} weight_decay = 0.000000e+00 : f64}
// CHECK: %[[N2:.+]] = sched.get_global @grad_norm
// CHECK: sched.readback %[[N2]] to 4 on 0 : memref<f32>
// CHECK: %[[S2:.+]] = sched.get_global @step_skipped
// CHECK: sched.readback %[[S2]] to 5 on 0 : memref<f32>
// CHECK-NEXT: }
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

