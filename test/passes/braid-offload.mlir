// RUN: braid-opt %s --braid-offload=targets=activations | FileCheck %s
// RUN: braid-opt %s --braid-offload=targets=activations --braid-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: braid-opt %s --braid-offload="targets=activations:0" | FileCheck %s --check-prefix=ONE
// RUN: braid-opt %s --braid-offload="targets=activations:stage-0" | FileCheck %s --check-prefix=STAGE
// RUN: not braid-opt %s --braid-offload="targets=activations:3" 2>&1 | FileCheck %s --check-prefix=NOLAYER
// RUN: not braid-opt %s --braid-offload="targets=activations:stage-1" 2>&1 | FileCheck %s --check-prefix=NOSTAGE
// RUN: not braid-opt %s --braid-offload="targets=weights" 2>&1 | FileCheck %s --check-prefix=KIND

// Three layers, two micro-batches in a sched.repeat: layer L's forward
// writes %xL, which layer L + 1 reads in its forward and in its backward.
// %x0 and %x1 are saved activations (%x2 has no backward reader, %l is
// the loss's). The repeat is stated out, micro-batch by micro-batch.

// The memory report's entry (one rank): the targets.
// CHECK: braid.offload_report = [{targets = "activations"}]

// Micro-batch 0. %x0 gets a host twin (%[[H0]]) and a device buffer for
// the backward (%[[B0]]).
// CHECK-LABEL: sched.program @step
// CHECK-NOT: sched.repeat
// CHECK: %[[X0:.+]] = sched.alloc : memref<64xf32>
// CHECK-NEXT: %[[H0:.+]] = sched.alloc host : memref<64xf32>
// CHECK-NEXT: %[[B0:.+]] = sched.alloc : memref<64xf32>
// CHECK-NEXT: sched.launch "f" on 0 micro_batch 0 {{.*}} outs(%[[X0]]
// CHECK: %[[X1:.+]] = sched.alloc : memref<64xf32>
// CHECK-NEXT: %[[H1:.+]] = sched.alloc host : memref<64xf32>
// CHECK-NEXT: %[[B1:.+]] = sched.alloc : memref<64xf32>
// %x0's last forward use is layer 1's launch: stream 0 records, the
// copy-out stream (1, the first free) waits for it and copies %x0 out.
// CHECK-NEXT: sched.launch "f" on 0 micro_batch 0 ins(%[[X0]] {{.*}} outs(%[[X1]] {{.*}}#braid.layer<1>
// CHECK-NEXT: sched.event.record 0 value 1 on 0
// CHECK-NEXT: sched.event.wait 0 value 1 on 1
// CHECK-NEXT: sched.launch "copy" on 1 micro_batch 0 ins(%[[X0]] : memref<64xf32>) outs(%[[H0]] : memref<64xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
// CHECK-NEXT: sched.event.record 1 value 1 on 1
// Layer 2's forward runs beside that copy; %x1 goes out after it.
// CHECK: sched.launch "f" on 0 micro_batch 0 ins(%[[X1]] {{.*}}#braid.layer<2>
// CHECK-NEXT: sched.event.record 0 value 2 on 0
// CHECK-NEXT: sched.event.wait 0 value 2 on 1
// CHECK-NEXT: sched.launch "copy" on 1 micro_batch 0 ins(%[[X1]] : memref<64xf32>) outs(%[[H1]] : memref<64xf32>)
// CHECK-NEXT: sched.event.record 1 value 2 on 1
// Stream 0 waits for both copies out before the loss: the device buffers
// are free from there on.
// CHECK: sched.event.wait 1 value 1 on 0
// CHECK-NEXT: sched.event.wait 1 value 2 on 0
// CHECK-NEXT: sched.launch "loss" on 0 micro_batch 0
// %x1 comes back as the backward begins (no layer above layer 2), %x0
// once layer 2's backward begins: one layer ahead of their readers. The
// copy-in stream (2) waits for the backward stream and for the copy out.
// CHECK: sched.event.record 0 value 3 on 0
// CHECK-NEXT: sched.event.wait 0 value 3 on 2
// CHECK-NEXT: sched.event.wait 1 value 2 on 2
// CHECK-NEXT: sched.launch "copy" on 2 micro_batch 0 ins(%[[H1]] : memref<64xf32>) outs(%[[B1]] : memref<64xf32>) {braid.layer = #braid.layer<2>, braid.phase = #braid.phase<input_grad>}
// CHECK-NEXT: sched.event.record 2 value 1 on 2
// CHECK-NEXT: sched.launch "loss_grad" on 0 micro_batch 0
// CHECK: sched.event.record 0 value 4 on 0
// CHECK-NEXT: sched.event.wait 0 value 4 on 2
// CHECK-NEXT: sched.event.wait 1 value 1 on 2
// CHECK-NEXT: sched.launch "copy" on 2 micro_batch 0 ins(%[[H0]] : memref<64xf32>) outs(%[[B0]] : memref<64xf32>)
// CHECK-NEXT: sched.event.record 2 value 2 on 2
// The backward reads the buffers copied back, each after its copy.
// CHECK-NEXT: sched.event.wait 2 value 1 on 0
// CHECK-NEXT: sched.launch "b" on 0 micro_batch 0 ins(%{{.+}}, %[[B1]] : {{.*}}#braid.layer<2>
// CHECK: sched.event.wait 2 value 2 on 0
// CHECK-NEXT: sched.launch "b" on 0 micro_batch 0 ins(%{{.+}}, %[[B0]] : {{.*}}#braid.layer<1>
// Micro-batch 1 the same, the events' values going on.
// CHECK: sched.launch "copy" on 1 micro_batch 1 {{.*}}#braid.phase<forward>
// CHECK-NEXT: sched.event.record 1 value 3 on 1
// CHECK: sched.event.wait 2 value 4 on 0
// CHECK-NEXT: sched.launch "b" on 0 micro_batch 1 {{.*}}#braid.layer<1>
// CHECK-NOT: "copy"

// The host buffers are planned in a host arena of their own, from 0: a
// micro-batch's two, which the next reuses. Each device buffer and its
// backward twin share bytes, as their lifetimes do not overlap.
// PLAN: host_bytes = 512 : i64
// PLAN: %[[X0:.+]] = sched.alloc offset([[OFF:[0-9]+]]) : memref<64xf32>
// PLAN-NEXT: sched.alloc host offset(0) : memref<64xf32>
// PLAN-NEXT: sched.alloc offset([[OFF]]) : memref<64xf32>
// PLAN: sched.alloc host offset(256) : memref<64xf32>
// PLAN-NOT: sched.alloc host offset({{[1-9][0-9][0-9][0-9]|[3-9][0-9][0-9]}})

// Layer 0 only: %x0 goes out and comes back, %x1 stays.
// ONE: sched.launch "copy" on 1 micro_batch 0
// ONE: sched.launch "copy" on 2 micro_batch 0
// ONE-NOT: sched.launch "copy" {{.*}} micro_batch 0
// ONE: sched.launch "copy" on 1 micro_batch 1
// ONE: sched.launch "copy" on 2 micro_batch 1
// ONE-NOT: "copy"

// Without a pipeline, the one stage holds every layer.
// STAGE-COUNT-8: sched.launch "copy"
// STAGE-NOT: "copy"

// NOLAYER: braid-offload: layer 3 does not exist: the model has 3 layers (0-2)
// NOSTAGE: braid-offload: stage 1 does not exist: the layout has 1 pipeline stage (0)
// KIND: braid-offload: 'weights' is not an offload target kind: the known kinds are none, activations

module attributes {braid.model = #braid.model<family = llama, vocab_size = 16, hidden_size = 8, num_layers = 3, num_heads = 1, num_kv_heads = 1, ffn_hidden_size = 8, num_parameters = 200, flops_per_token = 1.200000e+03, activation = swiglu, norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04, max_position_embeddings = 4, head_dim = 8, tie_embeddings = false, linear_bias = false, hidden_dropout = 0.000000e+00, attention_dropout = 0.000000e+00>} {
sched.global @w parameter : memref<16xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
sched.global @w.grad gradient of @w : memref<16xf32>
sched.program @step step {
  %w = sched.get_global @w : memref<16xf32>
  %gw = sched.get_global @w.grad : memref<16xf32>
  sched.repeat 2 {
    %x0 = sched.alloc : memref<64xf32>
    sched.launch "f" on 0 ins(%w : memref<16xf32>) outs(%x0 : memref<64xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
    %x1 = sched.alloc : memref<64xf32>
    sched.launch "f" on 0 ins(%x0 : memref<64xf32>) outs(%x1 : memref<64xf32>) {braid.layer = #braid.layer<1>, braid.phase = #braid.phase<forward>}
    %x2 = sched.alloc : memref<64xf32>
    sched.launch "f" on 0 ins(%x1 : memref<64xf32>) outs(%x2 : memref<64xf32>) {braid.layer = #braid.layer<2>, braid.phase = #braid.phase<forward>}
    %l = sched.alloc : memref<64xf32>
    sched.launch "loss" on 0 ins(%x2 : memref<64xf32>) outs(%l : memref<64xf32>) {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<forward>}
    %d2 = sched.alloc : memref<64xf32>
    sched.launch "loss_grad" on 0 ins(%l : memref<64xf32>) outs(%d2 : memref<64xf32>) {braid.layer = #braid.layer<loss>, braid.phase = #braid.phase<input_grad>}
    %d1 = sched.alloc : memref<64xf32>
    sched.launch "b" on 0 ins(%d2, %x1 : memref<64xf32>, memref<64xf32>) outs(%d1 : memref<64xf32>) {braid.layer = #braid.layer<2>, braid.phase = #braid.phase<input_grad>}
    %d0 = sched.alloc : memref<64xf32>
    sched.launch "b" on 0 ins(%d1, %x0 : memref<64xf32>, memref<64xf32>) outs(%d0 : memref<64xf32>) {braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>}
    sched.launch "bw" on 0 ins(%d0 : memref<64xf32>) outs(%gw : memref<16xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  }
}
}
