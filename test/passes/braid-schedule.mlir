// RUN: braid-opt %s --braid-schedule --split-input-file | FileCheck %s

// 1F1B over 2 ranks and 3 micro-batches, in Megatron-Core's order: rank 0
// runs one forward ahead.
// CHECK-LABEL: module @one_f_one_b
// CHECK: braid.schedule = {micro_batches = 3 : i64, ranks = ["F0 F1 BW0 F2 BW1 BW2", "F0 BW0 F1 BW1 F2 BW2"]}
module @one_f_one_b attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.train = #braid.train<seed = 0, micro_batch_size = 1, num_micro_batches = 3, seq_len = 16, steps = 5, lr = 1.000000e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.000000e+00, grad_clip = 0.000000e+00, warmup_steps = 0, decay = cosine, min_lr = 0.000000e+00, precision = fp32>, braid.pipeline = {schedule = "ONE_F_ONE_B", virtual_stages = 1 : i64}} {
}

// -----

// ZB-H1 on the last rank splits its backwards into B and W, and delays
// the first W.
// CHECK-LABEL: module @zb_h1
// CHECK: ranks = ["F0 F1 BW0 F2 BW1 BW2", "F0 B0 F1 {{.*}}W0{{.*}}"]
module @zb_h1 attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.train = #braid.train<seed = 0, micro_batch_size = 1, num_micro_batches = 3, seq_len = 16, steps = 5, lr = 1.000000e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.000000e+00, grad_clip = 0.000000e+00, warmup_steps = 0, decay = cosine, min_lr = 0.000000e+00, precision = fp32>, braid.pipeline = {schedule = "ZB_H1", virtual_stages = 1 : i64}} {
}

// -----

// Interleaved: chunks are written, forwards visit chunk 0 then chunk 1.
// CHECK-LABEL: module @interleaved
// CHECK: ranks = ["F0.0 F1.0 F0.1 F1.1 {{.*}}"
module @interleaved attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.train = #braid.train<seed = 0, micro_batch_size = 1, num_micro_batches = 4, seq_len = 16, steps = 5, lr = 1.000000e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.000000e+00, grad_clip = 0.000000e+00, warmup_steps = 0, decay = cosine, min_lr = 0.000000e+00, precision = fp32>, braid.pipeline = {schedule = "INTERLEAVED", virtual_stages = 2 : i64}} {
}

