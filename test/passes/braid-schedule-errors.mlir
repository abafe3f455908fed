// RUN: braid-opt %s --braid-schedule --split-input-file --verify-diagnostics

// Too few micro-batches for DualPipeV.
// expected-error @+1 {{DUALPIPE_V needs at least 2 x pipeline_parallel = 4 micro-batches; there are 3}}
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.train = #braid.train<seed = 0, micro_batch_size = 1, num_micro_batches = 3, seq_len = 16, steps = 5, lr = 1.000000e-03, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, weight_decay = 0.000000e+00, grad_clip = 0.000000e+00, warmup_steps = 0, decay = cosine, min_lr = 0.000000e+00, precision = fp32>, braid.pipeline = {schedule = "DUALPIPE_V", virtual_stages = 1 : i64}} {
}

// -----

// A schedule written by hand: rank 1 runs micro-batch 1 before
// micro-batch 0, so each rank's first receive waits behind a send the
// other receives only later: the check names each rank, its micro-batch
// and its entry.
// expected-error @+1 {{deadlock: rank 0 cannot run BW mb 0 chunk 0 (entry 2): its receive of the gradient of mb 0 from rank 1 waits behind rank 1's send of the gradient of mb 1 (from BW mb 1 chunk 0 at entry 1), which rank 0 receives only later, at BW mb 1 chunk 0 at entry 3; rank 1 cannot run F mb 1 chunk 0 (entry 0)}}
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.pipeline = {schedule = "ONE_F_ONE_B", virtual_stages = 1 : i64}, braid.schedule = {micro_batches = 2 : i64, ranks = ["F0 F1 BW0 BW1", "F1 BW1 F0 BW0"]}} {
}

// -----

// A rank that never runs a backward.
// expected-error @+1 {{incomplete schedule: rank 1 runs no backward of mb 0 chunk 0 after its forward, F mb 0 chunk 0 at entry 0}}
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.pipeline = {schedule = "ONE_F_ONE_B", virtual_stages = 1 : i64}, braid.schedule = {micro_batches = 1 : i64, ranks = ["F0 BW0", "F0"]}} {
}

// -----

// A token the schedule's text form does not have.
// expected-error @+1 {{the module's braid.schedule rank 0: 'Q0' is not an entry}}
module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 2, dp = 1>, braid.pipeline = {schedule = "ONE_F_ONE_B", virtual_stages = 1 : i64}, braid.schedule = {micro_batches = 1 : i64, ranks = ["Q0", "F0 BW0"]}} {
}
