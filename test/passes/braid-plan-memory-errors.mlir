// RUN: braid-opt %s --braid-plan-memory --split-input-file --verify-diagnostics

// One buffer larger than an arena can address.
// expected-error @+1 {{'sched.global' op buffer of 'memref<4611686018427387904x8xf32>' is larger than the 2^62 bytes an arena can address}}
sched.global @w parameter : memref<4611686018427387904x8xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>

// -----

// Buffers that fit one by one but not together.
// expected-error @+1 {{the buffers of this plan add up to more than 2^62 bytes, which the arena cannot address; reduce seq_len, micro_batch_size, num_layers or the model's sizes}}
module {
  sched.global @a parameter : memref<1152921504606846976xf32> info <name = "a", init = ones, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
  sched.global @b parameter : memref<1152921504606846976xf32> info <name = "b", init = ones, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
}
