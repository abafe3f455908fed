// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/tensor_parallel: 1/tensor_parallel: 2 tp_comm_overlap: true/' %models/llama-tiny.pbtxt > %t/tp2.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/tp2.pbtxt --braid-autodiff --braid-shard --braid-lower-to-sched --braid-overlap | FileCheck %s
// RUN: sed -e 's/tensor_parallel: 1/tensor_parallel: 2/' %models/llama-tiny.pbtxt > %t/serial.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/serial.pbtxt --braid-autodiff --braid-shard --braid-lower-to-sched --braid-overlap | FileCheck %s --check-prefix=SERIAL

// With tp_comm_overlap (4 pieces) the micro-batches are stated one by one,
// and each row-parallel GEMM (o_proj: [8, 64, 32] x [64, 32]) and the sum
// of its output run piece by piece over views of its input and output:
// stream 0 hands each piece to the TP stream (event 5) and computes the
// next while it is summed; it waits for the last sum (event 6) before the
// residual add reads it.
// CHECK-LABEL: sched.program @step
// CHECK-NOT: sched.repeat
// CHECK: %[[X0:.+]] = sched.view %[[X:.+]] dim 0 first 0 : memref<8x64x32xf32> -> memref<2x64x32xf32>
// CHECK-NEXT: %[[Y0:.+]] = sched.view %[[Y:.+]] dim 0 first 0 : memref<8x64x64xf32> -> memref<2x64x64xf32>
// CHECK-NEXT: sched.launch "linear" on 0 micro_batch 0 ins(%[[X0]], %{{.+}} : memref<2x64x32xf32>, memref<64x32xf32>) outs(%[[Y0]] : memref<2x64x64xf32>)
// CHECK-NEXT: sched.event.record 5 value 1 on 0
// CHECK-NEXT: sched.event.wait 5 value 1 on 2
// CHECK-NEXT: sched.collective all_reduce_sum tp(%[[Y0]] : memref<2x64x64xf32>) on 2
// CHECK-NEXT: %[[X1:.+]] = sched.view %[[X]] dim 0 first 2
// CHECK-NEXT: %[[Y1:.+]] = sched.view %[[Y]] dim 0 first 2
// CHECK-NEXT: sched.launch "linear" on 0 micro_batch 0 ins(%[[X1]],
// CHECK-COUNT-3: sched.collective all_reduce_sum tp(%{{.+}} : memref<2x64x64xf32>) on 2
// CHECK-NEXT: sched.event.record 6 value 1 on 2
// CHECK-NEXT: sched.event.wait 6 value 1 on 0
// CHECK: sched.launch "add" on 0 micro_batch 0 ins(%{{.+}}, %[[Y]] :
// Backward: the sum of a column-parallel input gradient runs on the TP
// stream, and weight gradients that stream 0 had before it run behind it;
// stream 0 waits right before the norm's gradient reads the sum.
// CHECK: sched.collective all_reduce_sum tp(%[[G:.+]] : memref<8x64x64xf32>) on 2 {{{.*}}braid.phase = #braid.phase<input_grad>}
// CHECK-NEXT: sched.event.record 6 value [[V:[0-9]+]] on 2
// CHECK-NOT: sched.event.wait 6
// CHECK: sched.launch "linear_grad_weight" on 0
// CHECK: sched.event.wait 6 value [[V]] on 0
// CHECK: sched.launch "rms_norm_grad_input" on 0 micro_batch 0 ins(%[[G]],

// Without it every sum stays on stream 0, inside the micro-batch's repeat.
// SERIAL: sched.repeat 2 {
// SERIAL-NOT: sched.view
// SERIAL-NOT: on 2
// SERIAL: sched.collective all_reduce_sum tp({{.*}}) on 0
