// RUN: braid-opt %s --braid-emit-plan=output=%t.plan --split-input-file --verify-diagnostics --allow-unregistered-dialect
// RUN: not braid-opt %S/braid-emit-plan.mlir --braid-emit-plan=output=%t/missing/dir/x.plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=WRITE
// WRITE: braid-emit-plan: cannot write

// An unplanned global has no offset.
// expected-error @+1 {{'sched.global' op has no offset: run braid-plan-memory first}}
sched.global @w parameter : memref<4xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>

// -----

// Without the loss scalar there is nothing for the runtime to report.
// expected-error @+1 {{needs scalar globals of the roles loss, loss_sum, grad_norm and step_skipped (run braid-lower-to-sched first)}}
module {
  sched.global @w parameter : memref<4xf32> offset(0) info <name = "w", init = ones, grad = @w, exp_avg = @w, exp_avg_sq = @w>
}

// -----

// A parameter must name its gradient global.
module {
  // expected-error @+1 {{info.grad @nope does not name a sched.global}}
  sched.global @w parameter : memref<4xf32> offset(0) info <name = "w", init = ones, grad = @nope, exp_avg = @w, exp_avg_sq = @w>
}

// -----

// A buffer must come from sched.get_global or sched.alloc.
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>, sched.memory = {}} {
  sched.global @loss scalar role loss : memref<f32> offset(0)
  sched.global @grad_norm scalar role grad_norm : memref<f32> offset(64)
  sched.global @loss_sum scalar role loss_sum : memref<f32> offset(128)
  sched.global @step_skipped scalar role step_skipped : memref<f32> offset(192)
  // expected-error @+1 {{uses a buffer that is neither a global, an alloc nor a view of an alloc}}
  sched.program @step step {
    %b = "test.buffer"() : () -> memref<4xf32>
    sched.launch "fill" on 0 outs(%b : memref<4xf32>)
  }
}

// -----

// Kernel parameters are integers or floats.
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>, sched.memory = {}} {
  sched.global @loss scalar role loss : memref<f32> offset(0)
  sched.global @grad_norm scalar role grad_norm : memref<f32> offset(64)
  sched.global @loss_sum scalar role loss_sum : memref<f32> offset(128)
  sched.global @step_skipped scalar role step_skipped : memref<f32> offset(192)
  sched.program @step step {
    %l = sched.get_global @loss : memref<f32>
    // expected-error @+1 {{parameter 'value' is neither an integer nor a float}}
    sched.launch "fill" on 0 outs(%l : memref<f32>) params {value = "zero"}
  }
}

// -----

// The settings of braid-import must be on the module.
// expected-error @+1 {{needs braid.model and braid.train (run braid-import first)}}
module attributes {sched.memory = {}} {
  sched.global @loss scalar role loss : memref<f32> offset(0)
  sched.global @grad_norm scalar role grad_norm : memref<f32> offset(64)
  sched.global @loss_sum scalar role loss_sum : memref<f32> offset(128)
  sched.global @step_skipped scalar role step_skipped : memref<f32> offset(192)
}

// -----

// So must the memory report of braid-plan-memory.
// expected-error @+1 {{needs sched.memory (run braid-plan-memory first)}}
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>} {
  sched.global @loss scalar role loss : memref<f32> offset(0)
  sched.global @grad_norm scalar role grad_norm : memref<f32> offset(64)
  sched.global @loss_sum scalar role loss_sum : memref<f32> offset(128)
  sched.global @step_skipped scalar role step_skipped : memref<f32> offset(192)
}

// -----

// A parameter's compute copy must be a global.
module {
  // expected-error @+1 {{info.compute_copy @w.bf16 does not name a sched.global}}
  sched.global @w parameter : memref<4xf32> offset(0) info <name = "w", init = ones, grad = @w, exp_avg = @w, exp_avg_sq = @w, compute_copy = @w.bf16>
}

// -----

// ... and a weight copy of the parameter's shape.
module {
  // expected-error @+1 {{info.compute_copy names 'w.bf16', which is not a weight_copy global of the parameter's (whole) shape}}
  sched.global @w parameter : memref<4xf32> offset(0) info <name = "w", init = ones, grad = @w, exp_avg = @w, exp_avg_sq = @w, compute_copy = @w.bf16>
  sched.global @w.bf16 weight_copy of @w : memref<2x2xbf16> offset(64)
}

// -----

// ... not some other kind of buffer.
module {
  // expected-error @+1 {{info.compute_copy names 'w.grad', which is not a weight_copy global of the parameter's (whole) shape}}
  sched.global @w parameter : memref<4xf32> offset(0) info <name = "w", init = ones, grad = @w.grad, exp_avg = @w, exp_avg_sq = @w, compute_copy = @w.grad>
  sched.global @w.grad gradient of @w : memref<4xf32> offset(64)
}

// -----

// The runtime runs programs by kind, one of each: a second step program is
// refused, whatever its name.
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>, sched.memory = {}} {
  sched.global @loss scalar role loss : memref<f32> offset(0)
  sched.global @grad_norm scalar role grad_norm : memref<f32> offset(64)
  sched.global @loss_sum scalar role loss_sum : memref<f32> offset(128)
  sched.global @step_skipped scalar role step_skipped : memref<f32> offset(192)
  sched.program @step step {
  }
  // expected-error @+1 {{'sched.program' op is a step program, as @step is; a plan has one of each kind}}
  sched.program @warm_up step {
  }
}

// -----

// A plan has one scalar of each role.
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>, braid.train = #braid.train<seed = 7, micro_batch_size = 2, num_micro_batches = 4, seq_len = 4, steps = 10, lr = 1.000000e-03, beta1 = 9.000000e-01, beta2 = 0.94999999999999996, eps = 1.000000e-08, weight_decay = 1.000000e-01, grad_clip = 1.000000e+00, warmup_steps = 2, decay = cosine, min_lr = 1.000000e-04, precision = fp32>, sched.memory = {}} {
  sched.global @loss scalar role loss : memref<f32> offset(0)
  // expected-error @+1 {{'sched.global' op is the loss scalar, as @loss is; a plan has one scalar of each role}}
  sched.global @loss2 scalar role loss : memref<f32> offset(64)
}
