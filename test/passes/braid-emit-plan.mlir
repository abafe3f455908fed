// RUN: braid-opt %s --braid-emit-plan=format=text | FileCheck %s
// RUN: braid-opt %s --braid-emit-plan="format=binary output=%t.plan" && test -s %t.plan
// RUN: not braid-opt %s --braid-emit-plan=format=json 2>&1 | FileCheck %s --check-prefix=FORMAT

// A planned module (braid-plan-memory output) becomes a plan: settings
// copied, globals first as tensors with their ids, then each program's
// allocs as activations named after the launch that writes them.
// CHECK: format_version: 13
// CHECK: name: "tiny"
// CHECK: model {
// CHECK: family: "llama"
// CHECK: flops_per_token: 1200
// CHECK-NEXT: activation: SWIGLU
// CHECK-NEXT: norm_eps: 9.9999997473787516e-06
// CHECK-NEXT: rope_theta: 10000
// CHECK-NEXT: max_position_embeddings: 4
// CHECK-NEXT: head_dim: 8
// CHECK-NEXT: }
// CHECK: train {
// CHECK: seed: 7
// CHECK: num_micro_batches: 4
// CHECK: decay: COSINE
// CHECK: precision: FP32
// CHECK: tensors {
// CHECK-NEXT: name: "table"
// CHECK: kind: PARAMETER
// CHECK: param {
// CHECK-NEXT: init: NORMAL
// CHECK-NEXT: init_std: 0.02
// CHECK-NEXT: weight_decay: true
// CHECK-NEXT: grad: 3
// CHECK-NEXT: exp_avg: 6
// CHECK-NEXT: exp_avg_sq: 7
// CHECK: name: "b"
// CHECK: param {
// CHECK-NEXT: init: ZEROS
// CHECK-NEXT: grad: 5
// CHECK: id: 12
// CHECK-NEXT: name: "tokens"
// CHECK: kind: INPUT
// CHECK: role: TOKENS
// CHECK: id: 18
// CHECK-NEXT: name: "step/embedding#0.out0"
// CHECK: kind: ACTIVATION
// CHECK-NEXT: offset: 4608
// CHECK-NEXT: size_bytes: 256
// The step: its micro-batch once, in a Repeat of 4 whose body is the 2
// stages, 12 launches and the loss readback; then the optimizer and the
// readbacks of the norm and the flag.
// CHECK: programs {
// CHECK-NEXT: name: "step"
// CHECK-NEXT: instructions {
// CHECK-NEXT: repeat {
// CHECK-NEXT: count: 4
// CHECK-NEXT: length: 15
// CHECK: stage {
// CHECK-NEXT: tensor: 12
// CHECK: stage {
// CHECK-NEXT: tensor: 13
// CHECK: instructions {
// CHECK-NEXT: launch {
// CHECK-NEXT: kernel: "embedding"
// CHECK-NEXT: inputs: 0
// CHECK-NEXT: inputs: 12
// CHECK-NEXT: outputs: 18
// CHECK: kernel: "cross_entropy_grad_input"
// CHECK: attrs {
// CHECK-NEXT: name: "scale"
// CHECK-NEXT: f: 0.25
// CHECK: kernel: "linear_grad_weight"
// CHECK: name: "accumulate"
// CHECK-NEXT: i: 1
// CHECK: readback {
// CHECK-NEXT: tensor: 14
// CHECK: kernel: "grad_norm"
// CHECK: kernel: "adamw"
// CHECK: readback {
// CHECK-NEXT: tensor: 15
// CHECK-NEXT: slot: 4
// CHECK: kind: STEP
// CHECK: num_streams: 1
// CHECK: memory {
// CHECK: arena_bytes: 5312
// CHECK: loss_tensor: 14
// CHECK: grad_norm_tensor: 15
// CHECK: loss_sum_tensor: 16
// CHECK: step_skipped_tensor: 17
// CHECK: num_readbacks: 6
// CHECK: loss_readbacks: 0
// CHECK: loss_readbacks: 3
// CHECK: grad_norm_readback: 4
// CHECK: step_skipped_readback: 5

// FORMAT: braid-emit-plan: unknown format 'json'; use binary or text
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.name = "tiny", braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>, sched.memory = {activation_peak_bytes = 1600 : i64, arena_bytes = 5312 : i64, gradient_bytes = 800 : i64, input_bytes = 72 : i64, optimizer_bytes = 1600 : i64, parameter_bytes = 800 : i64, saved_activation_bytes = 1056 : i64}} {
  sched.global @table parameter : memref<16x8xf32> offset(0) info <name = "table", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @table.grad, exp_avg = @table.exp_avg, exp_avg_sq = @table.exp_avg_sq>
  sched.global @w parameter : memref<8x8xf32> offset(512) info <name = "w", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
  sched.global @b parameter : memref<8xf32> offset(768) info <name = "b", init = zeros, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
  sched.global @table.grad gradient of @table : memref<16x8xf32> offset(832)
  sched.global @w.grad gradient of @w : memref<8x8xf32> offset(1344)
  sched.global @b.grad gradient of @b : memref<8xf32> offset(1600)
  sched.global @table.exp_avg optimizer_state of @table : memref<16x8xf32> offset(1664)
  sched.global @table.exp_avg_sq optimizer_state of @table : memref<16x8xf32> offset(2176)
  sched.global @w.exp_avg optimizer_state of @w : memref<8x8xf32> offset(2688)
  sched.global @w.exp_avg_sq optimizer_state of @w : memref<8x8xf32> offset(2944)
  sched.global @b.exp_avg optimizer_state of @b : memref<8xf32> offset(3200)
  sched.global @b.exp_avg_sq optimizer_state of @b : memref<8xf32> offset(3264)
  sched.global @tokens input role tokens : memref<2x4xi32> offset(3328)
  sched.global @labels input role labels : memref<2x4xi32> offset(3392)
  sched.global @loss scalar role loss : memref<f32> offset(3456)
  sched.global @grad_norm scalar role grad_norm : memref<f32> offset(3520)
  sched.global @loss_sum scalar role loss_sum : memref<f32> offset(5184)
  sched.global @step_skipped scalar role step_skipped : memref<f32> offset(5248)
  sched.program @step step {
    sched.repeat 4 {
      %t = sched.get_global @tokens : memref<2x4xi32>
      sched.stage %t micro_batch 0 on 0 : memref<2x4xi32>
      %l = sched.get_global @labels : memref<2x4xi32>
      sched.stage %l micro_batch 0 on 0 : memref<2x4xi32>
      %0 = sched.get_global @table : memref<16x8xf32>
      %1 = sched.get_global @w : memref<8x8xf32>
      %2 = sched.get_global @b : memref<8xf32>
      %3 = sched.get_global @tokens : memref<2x4xi32>
      %4 = sched.get_global @labels : memref<2x4xi32>
      %5 = sched.alloc offset(4608) : memref<2x4x8xf32>
      sched.launch "embedding" on 0 ins(%0, %3 : memref<16x8xf32>, memref<2x4xi32>) outs(%5 : memref<2x4x8xf32>)
      %6 = sched.alloc offset(3584) : memref<2x4x8xf32>
      sched.launch "linear" on 0 ins(%5, %1, %2 : memref<2x4x8xf32>, memref<8x8xf32>, memref<8xf32>) outs(%6 : memref<2x4x8xf32>)
      %7 = sched.alloc offset(4864) : memref<2x4x8xf32>
      sched.launch "add" on 0 ins(%5, %6 : memref<2x4x8xf32>, memref<2x4x8xf32>) outs(%7 : memref<2x4x8xf32>)
      %8 = sched.alloc offset(3584) : memref<2x4x16xf32>
      sched.launch "linear" on 0 ins(%7, %0 : memref<2x4x8xf32>, memref<16x8xf32>) outs(%8 : memref<2x4x16xf32>)
      %9 = sched.get_global @loss : memref<f32>
      %10 = sched.alloc offset(5120) : memref<2x4xf32>
      sched.launch "cross_entropy" on 0 ins(%8, %4 : memref<2x4x16xf32>, memref<2x4xi32>) outs(%9, %10 : memref<f32>, memref<2x4xf32>)
      %11 = sched.alloc offset(4096) : memref<2x4x16xf32>
      sched.launch "cross_entropy_grad_input" on 0 ins(%8, %4, %10 : memref<2x4x16xf32>, memref<2x4xi32>, memref<2x4xf32>) outs(%11 : memref<2x4x16xf32>) params {scale = 2.500000e-01 : f64}
      %12 = sched.alloc offset(3584) : memref<2x4x8xf32>
      sched.launch "linear_grad_input" on 0 ins(%11, %0 : memref<2x4x16xf32>, memref<16x8xf32>) outs(%12 : memref<2x4x8xf32>)
      %13 = sched.get_global @table.grad : memref<16x8xf32>
      sched.launch "linear_grad_weight" on 0 ins(%11, %7 : memref<2x4x16xf32>, memref<2x4x8xf32>) outs(%13 : memref<16x8xf32>) params {accumulate = 1 : i64}
      %14 = sched.alloc offset(3840) : memref<2x4x8xf32>
      sched.launch "linear_grad_input" on 0 ins(%12, %1 : memref<2x4x8xf32>, memref<8x8xf32>) outs(%14 : memref<2x4x8xf32>)
      %15 = sched.alloc offset(4096) : memref<2x4x8xf32>
      sched.launch "add" on 0 ins(%12, %14 : memref<2x4x8xf32>, memref<2x4x8xf32>) outs(%15 : memref<2x4x8xf32>)
      %16 = sched.get_global @w.grad : memref<8x8xf32>
      %17 = sched.get_global @b.grad : memref<8xf32>
      sched.launch "linear_grad_weight" on 0 ins(%12, %5 : memref<2x4x8xf32>, memref<2x4x8xf32>) outs(%16, %17 : memref<8x8xf32>, memref<8xf32>) params {accumulate = 1 : i64}
      %18 = sched.get_global @table.grad : memref<16x8xf32>
      sched.launch "embedding_grad_weight" on 0 ins(%15, %3 : memref<2x4x8xf32>, memref<2x4xi32>) outs(%18 : memref<16x8xf32>) params {accumulate = 1 : i64}
      %lr = sched.get_global @loss : memref<f32>
      sched.readback %lr to 0 on 0 : memref<f32>
    }
    %o0 = sched.get_global @table.grad : memref<16x8xf32>
    %o1 = sched.get_global @w.grad : memref<8x8xf32>
    %o2 = sched.get_global @b.grad : memref<8xf32>
    %o3 = sched.get_global @grad_norm : memref<f32>
    sched.launch "grad_norm" on 0 ins(%o0, %o1, %o2 : memref<16x8xf32>, memref<8x8xf32>, memref<8xf32>) outs(%o3 : memref<f32>)
    %o4 = sched.get_global @table : memref<16x8xf32>
    %o5 = sched.get_global @table.exp_avg : memref<16x8xf32>
    %o6 = sched.get_global @table.exp_avg_sq : memref<16x8xf32>
    sched.launch "adamw" on 0 ins(%o0, %o3 : memref<16x8xf32>, memref<f32>) outs(%o4, %o5, %o6 : memref<16x8xf32>, memref<16x8xf32>, memref<16x8xf32>) params {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
    %o7 = sched.get_global @w : memref<8x8xf32>
    %o8 = sched.get_global @w.exp_avg : memref<8x8xf32>
    %o9 = sched.get_global @w.exp_avg_sq : memref<8x8xf32>
    sched.launch "adamw" on 0 ins(%o1, %o3 : memref<8x8xf32>, memref<f32>) outs(%o7, %o8, %o9 : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) params {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
    %o10 = sched.get_global @b : memref<8xf32>
    %o11 = sched.get_global @b.exp_avg : memref<8xf32>
    %o12 = sched.get_global @b.exp_avg_sq : memref<8xf32>
    sched.launch "adamw" on 0 ins(%o2, %o3 : memref<8xf32>, memref<f32>) outs(%o10, %o11, %o12 : memref<8xf32>, memref<8xf32>, memref<8xf32>) params {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, weight_decay = 0.000000e+00 : f64}
    sched.launch "fill" on 0 outs(%o0 : memref<16x8xf32>) params {value = 0.000000e+00 : f64}
    sched.launch "fill" on 0 outs(%o1 : memref<8x8xf32>) params {value = 0.000000e+00 : f64}
    sched.launch "fill" on 0 outs(%o2 : memref<8xf32>) params {value = 0.000000e+00 : f64}
    %gn = sched.get_global @grad_norm : memref<f32>
    sched.readback %gn to 4 on 0 : memref<f32>
    %sk = sched.get_global @step_skipped : memref<f32>
    sched.readback %sk to 5 on 0 : memref<f32>
  }
}

