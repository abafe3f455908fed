// RUN: braid-opt %s --split-input-file --braid-offload=targets=activations | FileCheck %s

// The backward on a stream of its own (as the backward half of DualPipeV's
// FB pairs runs on a second compute stream): the copy-out stream (4, the
// first the program leaves free) waits for stream 0 only; the copy-in
// stream (5) for stream 3's record and the copy out; stream 3 waits for the
// copy in. Stream 0 never waits for stream 3 through them.
// CHECK-LABEL: sched.program @step
// CHECK: sched.launch "f" on 0 micro_batch 0 {{.*}}#braid.layer<1>
// CHECK-NEXT: sched.event.record [[F:[0-9]+]] value 1 on 0
// CHECK-NEXT: sched.event.wait [[F]] value 1 on 4
// CHECK-NEXT: sched.launch "copy" on 4 micro_batch 0
// CHECK-NEXT: sched.event.record [[O:[0-9]+]] value 1 on 4
// CHECK: sched.event.wait [[O]] value 1 on 0
// CHECK-NEXT: sched.launch "loss" on 0
// CHECK: sched.event.record [[B:[0-9]+]] value 1 on 3
// CHECK-NEXT: sched.event.wait [[B]] value 1 on 5
// CHECK-NEXT: sched.event.wait [[O]] value 1 on 5
// CHECK-NEXT: sched.launch "copy" on 5 micro_batch 0
// CHECK-NEXT: sched.event.record [[I:[0-9]+]] value 1 on 5
// CHECK-NEXT: sched.launch "loss_grad" on 3
// CHECK: sched.event.wait [[I]] value 1 on 3
// CHECK-NEXT: sched.launch "b" on 3 micro_batch 0
// CHECK-NOT: on 0 {{.*}}"copy"
// CHECK-NOT: sched.event.wait {{[0-9]+}} value {{[0-9]+}} on 0
// The program's own events 0 and 1 stay as they were; the new ones are
// numbered after them.
// CHECK: sched.event.wait 1 value 1 on 0
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 2, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>} {
sched.global @w parameter : memref<16xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
sched.global @w.grad gradient of @w : memref<16xf32>
sched.program @step step {
  %w = sched.get_global @w : memref<16xf32>
  %gw = sched.get_global @w.grad : memref<16xf32>
  %x0 = sched.alloc : memref<64xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%w : memref<16xf32>) outs(%x0 : memref<64xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
  %x1 = sched.alloc : memref<64xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%x0 : memref<64xf32>) outs(%x1 : memref<64xf32>) {braid.layer = #braid.layer<1>, braid.phase = #braid.phase<forward>}
  %l = sched.alloc : memref<64xf32>
  sched.launch "loss" on 0 micro_batch 0 ins(%x1 : memref<64xf32>) outs(%l : memref<64xf32>) {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>}
  sched.event.record 0 value 1 on 0
  sched.event.wait 0 value 1 on 3
  %d1 = sched.alloc : memref<64xf32>
  sched.launch "loss_grad" on 3 micro_batch 0 ins(%l : memref<64xf32>) outs(%d1 : memref<64xf32>) {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<input_grad>}
  %d0 = sched.alloc : memref<64xf32>
  sched.launch "b" on 3 micro_batch 0 ins(%d1, %x0 : memref<64xf32>, memref<64xf32>) outs(%d0 : memref<64xf32>) {braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>}
  sched.launch "bw" on 3 micro_batch 0 ins(%d0 : memref<64xf32>) outs(%gw : memref<16xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  sched.event.record 1 value 1 on 3
  sched.event.wait 1 value 1 on 0
}
}

// -----

// A repeat with nothing to offload (no layer's buffer has a backward
// reader) is left as it is: the step is stated out only for a buffer that
// goes to the host.
// CHECK-LABEL: sched.program @step
// CHECK-NEXT: sched.get_global
// CHECK-NEXT: sched.repeat 2
// CHECK-NOT: "copy"
module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 1, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>} {
sched.global @w parameter : memref<16xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
sched.global @w.grad gradient of @w : memref<16xf32>
sched.program @step step {
  %w = sched.get_global @w : memref<16xf32>
  sched.repeat 2 {
    %x0 = sched.alloc : memref<64xf32>
    sched.launch "f" on 0 ins(%w : memref<16xf32>) outs(%x0 : memref<64xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
    %gw = sched.get_global @w.grad : memref<16xf32>
    sched.launch "bw" on 0 ins(%w : memref<16xf32>) outs(%gw : memref<16xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
    sched.launch "loss" on 0 ins(%x0 : memref<64xf32>) outs(%w : memref<16xf32>) {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>}
  }
}
}
