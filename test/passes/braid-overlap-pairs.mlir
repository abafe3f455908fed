// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/tensor_parallel: 1/tensor_parallel: 2 tp_comm_overlap: true tp_comm_pair_micro_batches: true/' %models/llama-tiny.pbtxt > %t/pairs.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/pairs.pbtxt --braid-autodiff --braid-shard --braid-lower-to-sched --braid-overlap > %t/pairs.mlir
// RUN: FileCheck %s < %t/pairs.mlir
// RUN: FileCheck %s --check-prefix=OFF0 < %t/pairs.mlir
// RUN: sed -e 's/tensor_parallel: 1/tensor_parallel: 2 sequence_parallel: true tp_comm_overlap: true tp_comm_pair_micro_batches: true/' %models/llama-tiny.pbtxt > %t/sp.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/sp.pbtxt --braid-autodiff --braid-shard --braid-lower-to-sched --braid-overlap > %t/sp.mlir
// RUN: FileCheck %s --check-prefix=SP < %t/sp.mlir
// RUN: FileCheck %s --check-prefix=OFF0 < %t/sp.mlir

// llama-tiny takes two micro-batches per step. With
// tp_comm_pair_micro_batches they run interleaved: each copies the tokens
// and labels it stages into buffers of its own and reads those; every TP
// sum moves whole to the TP stream (stream 2), handed over by event 5;
// where stream 0 would wait for one (event 6), the other micro-batch runs
// up to its own such wait.
// CHECK-LABEL: sched.program @step
// CHECK: sched.stage %[[T0:.+]] micro_batch 0 on 0 : memref<8x64xi32>
// CHECK-NEXT: %[[OWN0:.+]] = sched.alloc : memref<8x64xi32>
// CHECK-NEXT: sched.launch "copy" on 0 micro_batch 0 ins(%[[T0]] : memref<8x64xi32>) outs(%[[OWN0]] : memref<8x64xi32>)
// CHECK: sched.launch "embedding" on 0 micro_batch 0 ins(%{{.+}}, %[[OWN0]] :
// CHECK-NEXT: sched.event.record 5 value 1 on 0
// CHECK-NEXT: sched.event.wait 5 value 1 on 2
// CHECK-NEXT: sched.collective all_reduce_sum tp(%[[E0:.+]] : memref<8x64x64xf32>) on 2
// CHECK-NEXT: sched.event.record 6 value 1 on 2
// CHECK-NOT: sched.event.wait
// CHECK: sched.stage %[[T1:.+]] micro_batch 1 on 0 : memref<8x64xi32>
// CHECK-NEXT: %[[OWN1:.+]] = sched.alloc : memref<8x64xi32>
// CHECK-NEXT: sched.launch "copy" on 0 micro_batch 1 ins(%[[T1]] : memref<8x64xi32>) outs(%[[OWN1]] : memref<8x64xi32>)
// CHECK-NOT: sched.event.wait
// CHECK: sched.launch "embedding" on 0 micro_batch 1 ins(%{{.+}}, %[[OWN1]] :
// CHECK-NEXT: sched.event.record 5 value 2 on 0
// CHECK-NEXT: sched.event.wait 5 value 2 on 2
// CHECK-NEXT: sched.collective all_reduce_sum tp(%[[E1:.+]] : memref<8x64x64xf32>) on 2
// CHECK-NEXT: sched.event.record 6 value 2 on 2
// CHECK: sched.event.wait 6 value 1 on 0
// CHECK-NEXT: sched.launch "rms_norm" on 0 micro_batch 0 ins(%[[E0]],
// CHECK: sched.launch "attention" on 0 micro_batch 0
// CHECK: sched.launch "linear" on 0 micro_batch 0
// CHECK-NEXT: sched.event.record 5 value 3 on 0
// CHECK-NEXT: sched.event.wait 5 value 3 on 2
// CHECK-NEXT: sched.collective all_reduce_sum tp(%[[O0:.+]] : memref<8x64x64xf32>) on 2
// CHECK-NEXT: sched.event.record 6 value 3 on 2
// CHECK-NOT: micro_batch 0
// CHECK: sched.event.wait 6 value 2 on 0
// CHECK-NEXT: sched.launch "rms_norm" on 0 micro_batch 1 ins(%[[E1]],
// CHECK-NOT: micro_batch 0
// CHECK: sched.event.wait 6 value 3 on 0
// CHECK-NEXT: sched.launch "add" on 0 micro_batch 0 ins(%[[E0]], %[[O0]] :
// Each loss is read back as soon as it is made, so that micro-batch 1's
// loss (the same global) need not wait for micro-batch 0's backward.
// CHECK: sched.launch "cross_entropy_combine" on 0 micro_batch 0
// CHECK-NOT: phase<input_grad>
// CHECK: sched.readback %{{.+}} to 0 on 0
// CHECK: sched.launch "cross_entropy_combine" on 0 micro_batch 1
// CHECK-NOT: phase<input_grad>
// CHECK: sched.readback %{{.+}} to 1 on 0
// Backward alternates in the same way.
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 0
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 1
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 0
// CHECK: sched.launch "linear_grad_input" on 0 micro_batch 1

// No collective of the TP group is left on stream 0 in the micro-batches
// (the optimizer's, after them, carry no layer).
// OFF0-LABEL: sched.program @step
// OFF0-NOT: tp({{.*}}) on 0 {braid.layer
// OFF0: sched.launch "adamw"

// With sequence parallel the all-gathers and reduce-scatters move whole
// too: no rings.
// SP-LABEL: sched.program @step
// SP: sched.launch "copy" on 0 micro_batch 0
// SP: sched.launch "copy" on 0 micro_batch 1
// SP-NOT: shift
// SP: sched.collective all_gather tp({{.*}}) on 2
// SP-NOT: shift
// SP: sched.collective reduce_scatter_sum tp({{.*}}) on 2
// SP-NOT: shift
// SP: sched.launch "adamw"
module {}
