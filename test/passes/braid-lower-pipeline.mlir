// RUN: braid-opt %s --braid-import=spec=%S/Inputs/pipeline-2.pbtxt --braid-autodiff --braid-partition --braid-schedule --braid-lower-to-sched --braid-lower-pipeline | FileCheck %s

// Two layers over two pipeline ranks, three micro-batches in 1F1B: rank 0
// runs F0 F1 BW0 F2 BW1 BW2, rank 1 F0 BW0 F1 BW1 F2 BW2. Each rank's
// module holds its own parameters; the transfers run on streams of their
// own (1: activations, 2: gradients), ordered by event 1 (stream 0's
// progress) and by each transfer stream's event (its number + 1).

// CHECK-LABEL: module @pp0 attributes
// CHECK-SAME: braid.pipeline_rank = 0
// CHECK: sched.global @model.embed_tokens.weight parameter
// CHECK-NOT: sched.global @lm_head.weight parameter
// CHECK: sched.program @step step
// Entry 0, F0: the embedding reads the tokens staged for micro-batch 0,
// the layer's output goes to rank 1 once stream 0 has written it.
// Each part is bracketed by marks on the stream that runs it.
// CHECK: sched.event.record 1 value 1 on 0
// CHECK-NEXT: sched.mark "F" stage 0 mb 0 on 0
// CHECK: sched.stage %{{.*}} micro_batch 0 on 0
// CHECK: sched.launch "embedding" on 0 micro_batch 0
// CHECK: sched.mark end "F" stage 0 mb 0 on 0
// CHECK-NEXT: sched.event.record 1 value 2 on 0
// CHECK-NEXT: sched.event.wait 1 value 2 on 1
// CHECK-NEXT: sched.send %{{.*}} to 1 channel 0 on 1
// CHECK-NEXT: sched.event.record 2 value 1 on 1
// Entry 1, F1: it starts, so entry 2's gradient may be received.
// CHECK-NEXT: sched.event.record 1 value 3 on 0
// CHECK-NEXT: sched.event.wait 1 value 3 on 2
// CHECK: sched.recv %{{.*}} from 1 channel 1 on 2
// CHECK-NEXT: sched.event.record 3 value 1 on 2
// CHECK: sched.launch "embedding" on 0 micro_batch 1
// CHECK: sched.send %{{.*}} to 1 channel 0 on 1
// Entry 2, BW0: stream 0 waits for the gradient and for micro-batch 0's
// activation send (whose buffer is then free).
// CHECK: sched.event.record 1 value 5 on 0
// CHECK-NEXT: sched.event.wait 3 value 1 on 0
// CHECK-NEXT: sched.event.wait 2 value 1 on 0
// CHECK-NEXT: sched.mark "B" stage 0 mb 0 on 0
// CHECK: sched.mark end "B" stage 0 mb 0 on 0
// CHECK-NEXT: sched.mark "W" stage 0 mb 0 on 0
// CHECK: sched.launch "embedding_grad_weight" on 0 micro_batch 0
// CHECK-NEXT: sched.mark end "W" stage 0 mb 0 on 0
// After the micro-batches: the loss sum over the pipeline, the norm of the
// ranks' gradient norms.
// CHECK: sched.collective all_reduce_sum pp(
// CHECK: sched.launch "grad_norm" on 0 ins({{.*}}) outs(%[[MINE:.*]] : memref<1xf32>)
// CHECK: sched.collective all_gather pp(%[[MINE]] : memref<1xf32>) into(%[[ALL:.*]] : memref<2xf32>) on 0
// CHECK: sched.launch "grad_norm" on 0 ins(%[[ALL]] : memref<2xf32>)

// CHECK-LABEL: module @pp1 attributes
// CHECK-SAME: braid.pipeline_rank = 1
// CHECK-NOT: sched.global @model.embed_tokens.weight parameter
// CHECK: sched.global @lm_head.weight parameter
// CHECK: sched.program @step step
// Entry 0, F0: its activations are received before it starts.
// CHECK: sched.recv %{{.*}} from -1 channel 0 on 1
// CHECK-NEXT: sched.event.record 2 value 1 on 1
// CHECK-NEXT: sched.event.record 1 value 1 on 0
// CHECK-NEXT: sched.event.wait 2 value 1 on 0
// The loss stage reads each micro-batch's loss back into its own slot.
// CHECK: sched.readback %{{.*}} to 0 on 0
// Entry 1, BW0, layer by layer: the loss's B and W (the head's and the
// final norm's weight gradients), then layer 1's B, its gradient going
// back to rank 0 right away, then layer 1's W.
// CHECK: sched.mark "B" stage 1 mb 0 on 0
// CHECK: sched.mark end "B" stage 1 mb 0 on 0
// CHECK-NEXT: sched.mark "W" stage 1 mb 0 on 0
// CHECK: sched.launch "linear_grad_weight" on 0 micro_batch 0 {{.*}}braid.layer = #braid.layer<loss>
// CHECK: sched.mark end "W" stage 1 mb 0 on 0
// CHECK-NEXT: sched.mark "B" stage 1 mb 0 on 0
// CHECK-NOT: grad_weight
// CHECK: sched.mark end "B" stage 1 mb 0 on 0
// CHECK: sched.send %{{.*}} to -1 channel 1 on 2
// CHECK: sched.mark "W" stage 1 mb 0 on 0
// CHECK: sched.launch "linear_grad_weight" on 0 micro_batch 0 {{.*}}braid.layer = #braid.layer<1>
// CHECK: sched.mark end "W" stage 1 mb 0 on 0
// CHECK: sched.readback %{{.*}} to 1 on 0
// CHECK: sched.readback %{{.*}} to 2 on 0
// CHECK: sched.collective all_reduce_sum pp(
