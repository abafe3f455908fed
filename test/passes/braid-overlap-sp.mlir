// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/tensor_parallel: 1/tensor_parallel: 2 sequence_parallel: true tp_comm_overlap: true/' %models/llama-tiny.pbtxt > %t/sp.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/sp.pbtxt --braid-autodiff --braid-shard --braid-lower-to-sched --braid-overlap | FileCheck %s
// RUN: sed -e 's/tensor_parallel: 1/tensor_parallel: 2 sequence_parallel: true/' %models/llama-tiny.pbtxt > %t/serial.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/serial.pbtxt --braid-autodiff --braid-shard --braid-lower-to-sched --braid-overlap | FileCheck %s --check-prefix=SERIAL

// With sequence parallel and tp_comm_overlap, the all-gather of a norm's
// part that q, k and v read becomes a ring, here of one step (TP 2) in
// tp_comm_chunks = 2 pieces of 4 rows: stream 0 hands its part to the TP
// stream (event 5), which passes each piece on to the next rank and
// receives the previous rank's into block 1 of the stacked buffer (shift),
// recording event 6 after each; meanwhile stream 0 computes the three GEMMs
// on its own part's pieces into block 0 of their stacked outputs, then
// waits for each received piece before computing them on it, and
// unstack_parts in the ring's order makes each GEMM's whole output.
// CHECK-LABEL: sched.program @step
// CHECK-NOT: sched.repeat
// CHECK: sched.launch "rms_norm" on 0 micro_batch 0 ins({{.*}}) outs(%[[H:.+]], %{{.+}} : memref<8x32x64xf32>, memref<8x32xf32>)
// CHECK: %[[PARTS:.+]] = sched.alloc : memref<16x32x64xf32>
// CHECK-NEXT: %[[QS:.+]] = sched.alloc : memref<16x32x32xf32>
// CHECK: %[[R0:.+]] = sched.view %[[PARTS]] dim 0 first 8 : memref<16x32x64xf32> -> memref<4x32x64xf32>
// CHECK-NEXT: %[[H0:.+]] = sched.view %[[H]] dim 0 first 0 : memref<8x32x64xf32> -> memref<4x32x64xf32>
// CHECK-NEXT: sched.event.record 5 value 1 on 0
// CHECK-NEXT: sched.event.wait 5 value 1 on 2
// CHECK-NEXT: sched.collective shift tp(%[[H0]] : memref<4x32x64xf32>) into(%[[R0]] : memref<4x32x64xf32>) on 2 {offset = 1 : si32}
// CHECK-NEXT: sched.event.record 6 value 1 on 2
// CHECK-NEXT: %[[R1:.+]] = sched.view %[[PARTS]] dim 0 first 12
// CHECK-NEXT: %[[H1:.+]] = sched.view %[[H]] dim 0 first 4
// CHECK-NEXT: sched.collective shift tp(%[[H1]] : memref<4x32x64xf32>) into(%[[R1]] : memref<4x32x64xf32>) on 2 {offset = 1 : si32}
// CHECK-NEXT: sched.event.record 6 value 2 on 2
// CHECK: %[[Q0:.+]] = sched.view %[[QS]] dim 0 first 0
// CHECK-NEXT: sched.launch "linear" on 0 micro_batch 0 ins(%[[H0]], %{{.+}} : memref<4x32x64xf32>, memref<32x64xf32>) outs(%[[Q0]] : memref<4x32x32xf32>)
// CHECK-COUNT-2: sched.launch "linear" on 0 micro_batch 0 ins(%[[H0]],
// CHECK-COUNT-3: sched.launch "linear" on 0 micro_batch 0 ins(%[[H1]],
// CHECK-NEXT: sched.event.wait 6 value 1 on 0
// CHECK: %[[Q2:.+]] = sched.view %[[QS]] dim 0 first 8
// CHECK-NEXT: sched.launch "linear" on 0 micro_batch 0 ins(%[[R0]], %{{.+}} : memref<4x32x64xf32>, memref<32x64xf32>) outs(%[[Q2]] : memref<4x32x32xf32>)
// CHECK-COUNT-2: sched.launch "linear" on 0 micro_batch 0 ins(%[[R0]],
// CHECK-NEXT: sched.event.wait 6 value 2 on 0
// CHECK-COUNT-3: sched.launch "linear" on 0 micro_batch 0 ins(%[[R1]],
// CHECK: sched.launch "unstack_parts" on 0 micro_batch 0 ins(%[[QS]] : memref<16x32x32xf32>) outs(%{{.+}} : memref<8x64x32xf32>) params {dim = 1 : i64, ring = 1 : i64}
// CHECK-NOT: sched.collective all_gather tp(%[[H]]
// The reduce-scatter after o_proj becomes a ring: its input stacked in the
// ring's order (ring_offset 1: block t is the part whose sum this rank adds
// to at step t); each piece of step 0's rows is passed on as soon as it is
// computed, step 1's rows are computed meanwhile, and stream 0 waits for the
// last received piece only to add the received sum to them: this rank's
// part of the sum, which the residual add reads.
// CHECK: sched.launch "stack_parts" on 0 micro_batch 0 ins(%[[A:.+]] : memref<8x64x32xf32>) outs(%[[AS:.+]] : memref<16x32x32xf32>) params {dim = 1 : i64, ring = 1 : i64, ring_offset = 1 : i64}
// CHECK-NEXT: %[[S:.+]] = sched.alloc : memref<8x32x64xf32>
// CHECK-NEXT: %[[R:.+]] = sched.alloc : memref<8x32x64xf32>
// CHECK-NEXT: %[[A0:.+]] = sched.view %[[AS]] dim 0 first 0
// CHECK-NEXT: %[[S0:.+]] = sched.view %[[S]] dim 0 first 0
// CHECK-NEXT: sched.launch "linear" on 0 micro_batch 0 ins(%[[A0]], %{{.+}} : memref<4x32x32xf32>, memref<64x32xf32>) outs(%[[S0]] : memref<4x32x64xf32>)
// CHECK-NEXT: %[[RV0:.+]] = sched.view %[[R]] dim 0 first 0
// CHECK-NEXT: sched.event.record 5 value 2 on 0
// CHECK-NEXT: sched.event.wait 5 value 2 on 2
// CHECK-NEXT: sched.collective shift tp(%[[S0]] : memref<4x32x64xf32>) into(%[[RV0]] : memref<4x32x64xf32>) on 2 {offset = 1 : si32}
// CHECK-NEXT: sched.event.record 6 value 3 on 2
// CHECK: sched.launch "linear" on 0 micro_batch 0
// CHECK: sched.collective shift tp({{.*}}) on 2 {offset = 1 : si32}
// CHECK-NEXT: sched.event.record 6 value 4 on 2
// CHECK-NEXT: %[[P:.+]] = sched.alloc : memref<8x32x64xf32>
// CHECK-COUNT-2: sched.launch "linear" on 0 micro_batch 0 ins({{.*}}) outs(%{{.+}} : memref<4x32x64xf32>)
// CHECK-NOT: sched.event.wait 6
// CHECK: sched.event.wait 6 value 4 on 0
// CHECK-NEXT: sched.launch "add" on 0 micro_batch 0 ins(%[[R]], %[[P]] : memref<8x32x64xf32>, memref<8x32x64xf32>) outs(%[[O:.+]] : memref<8x32x64xf32>)
// CHECK-NEXT: sched.launch "add" on 0 micro_batch 0 ins(%{{.+}}, %[[O]] :
// Backward's re-gather of the final norm's output for the LM head's weight
// gradient has no GEMM to ride on: its part is passed round the ring on
// the TP stream right after the last transfer before it (the LM head's
// input gradient's scatter ring), while stream 0 computes that ring's
// last rows; stream 0 waits for it only where
// the gather was, copies its own part into block 0 and unstacks in the
// ring's order.
// CHECK: sched.launch "cross_entropy_grad_input" on 0 micro_batch 0
// CHECK: %[[G:.+]] = sched.alloc : memref<16x32x64xf32>
// CHECK-NEXT: %[[G1:.+]] = sched.view %[[G]] dim 0 first 8 : memref<16x32x64xf32> -> memref<8x32x64xf32>
// CHECK-NEXT: sched.event.record 5 value [[S:[0-9]+]] on 0
// CHECK-NEXT: sched.event.wait 5 value [[S]] on 2
// CHECK-NEXT: sched.collective shift tp(%[[N:.+]] : memref<8x32x64xf32>) into(%[[G1]] : memref<8x32x64xf32>) on 2 {offset = 1 : si32}
// CHECK-NEXT: sched.event.record 6 value [[A:[0-9]+]] on 2
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 0
// CHECK: sched.event.wait 6 value [[A]] on 0
// CHECK-NEXT: %[[G0:.+]] = sched.view %[[G]] dim 0 first 0
// CHECK-NEXT: sched.launch "stack_parts" on 0 micro_batch 0 ins(%[[N]] : memref<8x32x64xf32>) outs(%[[G0]] : memref<8x32x64xf32>) params {dim = 1 : i64}
// CHECK-NEXT: sched.launch "unstack_parts" on 0 micro_batch 0 ins(%[[G]] : memref<16x32x64xf32>) outs(%[[W:.+]] : memref<8x64x64xf32>) params {dim = 1 : i64, ring = 1 : i64}
// CHECK: sched.launch "linear_grad_weight" on 0 micro_batch 0 ins(%{{.+}}, %[[W]] :
// CHECK-NOT: sched.collective all_gather tp({{.*}}) : memref<16x32x64xf32>)
// Backward: the input gradient of q, k and v (three GEMMs, summed) is
// reduce-scattered by a ring whose steps compute the three GEMMs' rows of
// one part each, piece by piece, add them, and pass each piece's sum on;
// stream 0 waits for the last sum only before the norm's gradient reads
// it, so the weight gradients (and the gather they read) compute while it
// is in flight.
// CHECK-COUNT-3: sched.launch "stack_parts" on 0 micro_batch 0 ins({{.*}}) params {dim = 1 : i64, ring = 1 : i64, ring_offset = 1 : i64} {braid.layer = #braid.layer<1>, braid.phase = #braid.phase<input_grad>}
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 0 ins(%{{.+}}, %{{.+}} : memref<4x32x16xf32>, memref<16x64xf32>)
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 0 ins(%{{.+}}, %{{.+}} : memref<4x32x16xf32>, memref<16x64xf32>)
// CHECK: sched.launch "add" on 0 micro_batch 0
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 0 ins(%{{.+}}, %{{.+}} : memref<4x32x32xf32>, memref<32x64xf32>)
// CHECK: sched.launch "add" on 0 micro_batch 0 ins({{.*}}) outs(%[[DX0:.+]] : memref<4x32x64xf32>)
// CHECK: sched.collective shift tp(%[[DX0]] : memref<4x32x64xf32>) into({{.*}}) on 2 {{{.*}}offset = 1 : si32}
// CHECK: sched.collective shift tp({{.*}}) on 2 {{{.*}}offset = 1 : si32}
// CHECK-NEXT: sched.event.record 6 value [[V:[0-9]+]] on 2
// CHECK-NOT: sched.event.wait 6
// CHECK: sched.launch "linear_grad_weight" on 0
// CHECK-NOT: sched.event.wait 6
// CHECK: sched.event.wait 6 value [[V]] on 0
// CHECK-NEXT: sched.launch "add" on 0 micro_batch 0 ins({{.*}}) outs(%[[DX:.+]] : memref<8x32x64xf32>)
// CHECK: sched.launch "rms_norm_grad_input" on 0 micro_batch 0 ins(%[[DX]],

// Without the overlap the gathers and reduce-scatters stay on stream 0,
// inside the micro-batch's repeat.
// SERIAL: sched.repeat 2 {
// SERIAL-NOT: sched.collective shift
// SERIAL: sched.collective all_gather tp({{.*}}) on 0
// SERIAL: sched.collective reduce_scatter_sum tp({{.*}}) on 0
