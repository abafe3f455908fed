// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/data_parallel: 1/data_parallel: 2 expert_parallel: 2 ep_comm_overlap: true/' %models/deepseek-tiny.pbtxt > %t/ep.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/ep.pbtxt --braid-autodiff --braid-fuse-moe --braid-lower-to-sched --braid-overlap > %t/ep.mlir
// RUN: grep -E 'sched\.(launch|collective|event)' %t/ep.mlir | grep -v -E ' on 1( |$)| dp\(|event\.record [12] ' > %t/ops
// RUN: FileCheck %s < %t/ops
// RUN: sed -e 's/ ep_comm_overlap: true//' %t/ep.pbtxt > %t/off.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/off.pbtxt --braid-autodiff --braid-fuse-moe --braid-lower-to-sched --braid-overlap | FileCheck %s --check-prefix=OFF

// deepseek-tiny under EP 2 with ep_comm_overlap, its router and
// permutations fused (braid-fuse-moe; stream-1 work, the
// data-parallel buckets and their hand-overs, filtered out). Every
// collective along ep runs on stream 2, handed over by event 6 (stream 0's
// hand-over) and back by event 5. Forward of MoE
// layer 1: the count gather and the dispatch go as soon as the
// permutation is made; the router's loss and the shared expert's gate, up
// and SwiGLU run while they are in flight, the shared expert's down
// projection while the combine is.
// CHECK: sched.launch "moe_permute" on 0
// CHECK-NEXT: sched.launch "moe_block_counts" on 0
// CHECK-NEXT: sched.event.record 6 value 1 on 0
// CHECK-NEXT: sched.event.wait 6 value 1 on 2
// CHECK-NEXT: sched.collective all_gather ep({{.*}}) on 2
// CHECK-NEXT: sched.event.record 5 value 1 on 2
// CHECK-NEXT: sched.collective dispatch ep({{.*}}) on 2
// CHECK-NEXT: sched.event.record 5 value 2 on 2
// CHECK-NEXT: sched.launch "moe_expert_counts" on 0
// CHECK: sched.launch "moe_aux_loss" on 0
// CHECK-NEXT: sched.launch "linear" on 0 {{.*}}memref<32x64xf32>
// CHECK-NEXT: sched.launch "linear" on 0 {{.*}}memref<32x64xf32>
// CHECK-NEXT: sched.launch "swiglu" on 0
// CHECK-NEXT: sched.event.wait 5 value 2 on 0
// CHECK-NEXT: sched.launch "moe_ep_offsets" on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear" on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear" on 0
// CHECK-NEXT: sched.launch "swiglu" on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear" on 0
// CHECK-NEXT: sched.event.record 6 value 2 on 0
// CHECK-NEXT: sched.event.wait 6 value 2 on 2
// CHECK-NEXT: sched.collective combine ep({{.*}}) on 2
// CHECK-NEXT: sched.event.record 5 value 3 on 2
// CHECK-NEXT: sched.launch "linear" on 0 {{.*}}memref<64x32xf32>
// CHECK-NEXT: sched.event.wait 5 value 3 on 0
// CHECK-NEXT: sched.launch "moe_unpermute" on 0

// Backward of the same layer: the output gradient's dispatch runs beside
// the shared expert's and the router's gradients; the combine of the
// input gradients beside the experts' weight gradients, which wait for
// the input gradients' chain to be done (B before W).
// CHECK: sched.launch "moe_unpermute_grad" on 0
// CHECK: sched.launch "moe_unpermute_grad" on 0
// CHECK-NEXT: sched.event.record 6 value 7 on 0
// CHECK-NEXT: sched.event.wait 6 value 7 on 2
// CHECK-NEXT: sched.collective dispatch ep({{.*}}) on 2
// CHECK-NEXT: sched.event.record 5 value 9 on 2
// CHECK-NEXT: sched.launch "linear_grad_input" on 0
// CHECK: sched.launch "moe_route_grad" on 0
// CHECK: sched.launch "linear_grad_weight" on 0
// CHECK-NEXT: sched.event.wait 5 value 9 on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear_grad_input" on 0
// CHECK-NEXT: sched.launch "swiglu_grad_input" on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear_grad_input" on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear_grad_input" on 0
// CHECK-NEXT: sched.launch "add" on 0
// CHECK-NEXT: sched.event.record 6 value 8 on 0
// CHECK-NEXT: sched.event.wait 6 value 8 on 2
// CHECK-NEXT: sched.collective combine ep({{.*}}) on 2
// CHECK-NEXT: sched.event.record 5 value 10 on 2
// CHECK-NEXT: sched.launch "moe_grouped_linear_grad_weight" on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear_grad_weight" on 0
// CHECK-NEXT: sched.launch "moe_grouped_linear_grad_weight" on 0
// CHECK-NEXT: sched.event.wait 5 value 10 on 0
// CHECK-NEXT: sched.launch "moe_permute_grad" on 0

// The gradient norm's gather of the experts' part along ep runs there too,
// beside the norm of the other gradients.
// CHECK: sched.collective all_gather ep({{.*}} : memref<1xf32>) into({{.*}} : memref<2xf32>) on 2
// CHECK-NEXT: sched.event.record 5 value 11 on 2
// CHECK-NEXT: sched.launch "grad_norm" on 0
// CHECK-NEXT: sched.event.wait 5 value 11 on 0
// CHECK-NOT: ep(

// Without ep_comm_overlap every exchange stays on stream 0, in the order
// the lowering made.
// OFF-NOT: event.record 5
// OFF: sched.collective dispatch ep({{.*}}) on 0
// OFF: sched.launch "moe_ep_offsets" on 0
// OFF-NOT: event.record 5
