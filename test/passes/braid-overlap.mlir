// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/data_parallel: 1/data_parallel: 2/' -e 's/global_batch_size: 16/global_batch_size: 32/' %models/llama-tiny.pbtxt > %t/dp2.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/dp2.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap=bucket-mb=0 > %t/each.mlir
// RUN: FileCheck %s --check-prefix=EACH < %t/each.mlir
// RUN: grep -c 'sched.collective' %t/each.mlir | FileCheck %s --check-prefix=COUNT
// RUN: braid-opt %s --braid-import=spec=%t/dp2.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap=bucket-mb=0.2 | FileCheck %s --check-prefix=BUCKETS
// RUN: sed -e 's/data_parallel: 1/data_parallel: 2/' -e 's/global_batch_size: 16/global_batch_size: 32/' -e 's/^parallel {\(.*\) }/parallel {\1 bucket_mb: 0.2 }/' %models/llama-tiny.pbtxt > %t/spec-buckets.pbtxt
// RUN: braid-opt %s --braid-training-pipeline=spec=%t/spec-buckets.pbtxt | FileCheck %s --check-prefix=BUCKETS
// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap | FileCheck %s --check-prefix=ONE
// RUN: not braid-opt %s --braid-import=spec=%t/dp2.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap --braid-overlap 2>&1 | FileCheck %s --check-prefix=TWICE

// Two micro-batches per rank: the repeat keeps the first, the second is
// written out (its launches say micro_batch 1, its loss goes to slot 1),
// and each gradient is summed on stream 1 right after the launch that
// last writes it, while stream 0 goes on; the lm_head's gradient is the
// first that is final. The loss sum goes last, after the micro-batch adds
// its loss. The communication stream raises event 2 after each bucket, and
// stream 0 waits for the last before the optimizer.
// EACH-LABEL: sched.program @step step
// EACH: sched.repeat 1 {
// EACH: sched.stage %{{.*}} micro_batch 1 on 0
// EACH: sched.launch "linear_grad_weight" on 0 micro_batch 1 {{.*}}outs(%[[HEAD:.*]] : memref<256x64xf32>)
// EACH-NEXT: sched.event.record 1 value 1 on 0
// EACH-NEXT: sched.event.wait 1 value 1 on 1
// EACH-NEXT: %[[G:.*]] = sched.get_global @lm_head.weight.grad
// EACH-NEXT: sched.collective all_reduce_sum dp(%[[G]] : memref<256x64xf32>) on 1
// EACH-NEXT: sched.event.record 2 value 1 on 1
// EACH: sched.launch "rms_norm_grad_input" on 0 micro_batch 1
// EACH: sched.event.record 1 value 2 on 0
// EACH: sched.readback %{{.*}} to 1 on 0
// EACH: sched.launch "accumulate" on 0 micro_batch 1
// EACH-NEXT: sched.event.record 1 value [[LAST:[0-9]+]] on 0
// EACH-NEXT: sched.event.wait 1 value [[LAST]] on 1
// EACH: sched.collective all_reduce_sum dp({{.*}} : memref<f32>) on 1
// EACH-NEXT: sched.event.record 2 value [[LAST]] on 1
// EACH-NEXT: sched.event.wait 2 value [[LAST]] on 0
// EACH-NOT: sched.collective
// EACH: sched.launch "grad_norm" on 0
// One collective per gradient (21) and the loss sum's.
// COUNT: 22

// Buckets of at least 0.2 MiB: several gradients per collective, handed
// over after the launch that completes the bucket.
// BUCKETS: sched.event.record 1 value 1 on 0
// BUCKETS: sched.collective all_reduce_sum dp({{%[0-9]+, %[0-9]+.*}}) on 1
// BUCKETS-NEXT: sched.event.record 2 value 1 on 1

// One rank: nothing to reduce, nothing changes.
// ONE: sched.repeat 2 {
// ONE-NOT: sched.collective

// TWICE: error: 'sched.collective' op is not where braid-lower-to-sched's reduction has it (no hand-back by event 2 after the last hand-over); braid-overlap runs once, right after it

// ZeRO stage 1: the whole gradients are reduce-scattered into the shards
// in buckets, the loss sum summed with the last; AdamW updates the shards,
// the parts of the norm are gathered, and so are the updated masters into
// the whole copies compute reads.
// RUN: sed -e 's/data_parallel: 1/data_parallel: 2 zero_stage: 1/' -e 's/global_batch_size: 16/global_batch_size: 32/' %models/llama-tiny.pbtxt > %t/zero1.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/zero1.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap=bucket-mb=0.1 | FileCheck %s --check-prefix=ZERO1
// ZERO1: sched.global @lm_head.weight parameter : memref<128x64xf32> shard <axis = dp, dim = 0>
// ZERO1: sched.global @lm_head.weight.grad.full gradient of @lm_head.weight : memref<256x64xf32>
// ZERO1: sched.global @lm_head.weight.full weight_copy of @lm_head.weight : memref<256x64xf32>
// ZERO1: sched.repeat 1 {
// ZERO1: sched.event.record 1 value 1 on 0
// ZERO1-NEXT: sched.event.wait 1 value 1 on 1
// ZERO1: sched.collective reduce_scatter_sum dp({{.*}}) into({{.*}}) on 1
// ZERO1-NEXT: sched.event.record 2 value 1 on 1
// ZERO1: sched.collective all_reduce_sum dp({{%[0-9]+}} : memref<f32>) on 1
// ZERO1-NEXT: sched.event.record 2 value [[N:[0-9]+]] on 1
// ZERO1-NEXT: sched.event.wait 2 value [[N]] on 0
// ZERO1: sched.launch "grad_norm" on 0 {{.*}}outs(%{{.*}} : memref<1xf32>)
// ZERO1: sched.collective all_gather dp(%{{.*}} : memref<1xf32>) into(%{{.*}} : memref<2xf32>) on 0
// ZERO1: sched.launch "adamw" on 0 ins({{%[0-9]+}}, {{.*}} : memref<128x64xf32>,
// ZERO1: sched.collective all_gather dp({{.*}}) into({{.*}}) on 0

// ZeRO stage 2: no repeat; each micro-batch's whole gradients are transient
// buffers, zeroed right before backward first writes them and
// reduce-scattered bucket by bucket; the second micro-batch's parts are
// added into the shards on the communication stream. With transient
// buffers stream 0 keeps two buckets in flight: handing over the third it
// waits for the first.
// RUN: sed -e 's/zero_stage: 1/zero_stage: 2/' %t/zero1.pbtxt > %t/zero2.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/zero2.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap=bucket-mb=0.1 | FileCheck %s --check-prefix=ZERO2
// ZERO2-NOT: sched.global {{.*}}grad.full
// ZERO2-NOT: sched.repeat
// ZERO2: sched.launch "fill" on 0 micro_batch 0 outs(%[[W:[0-9]+]] : memref<256x64xf32>)
// ZERO2: sched.event.record 1 value 1 on 0
// ZERO2-NEXT: sched.event.wait 1 value 1 on 1
// ZERO2: sched.collective reduce_scatter_sum dp(%[[W]], {{.*}}) into({{.*}}) on 1
// ZERO2: sched.event.record 1 value 3 on 0
// ZERO2-NEXT: sched.event.wait 2 value 1 on 0
// ZERO2: sched.stage %{{.*}} micro_batch 1 on 0
// ZERO2: sched.collective reduce_scatter_sum dp({{.*}}) into(%[[PART:[0-9]+]], {{.*}}) on 1
// ZERO2: sched.launch "accumulate" on 1 ins(%[[PART]] : memref<128x64xf32>)

// ZeRO stage 3: no whole weights are kept. Each micro-batch gathers a
// layer's parameter shards into transient buffers on the communication
// stream, one group per layer and phase: the gather of a group starts
// when stream 0 reaches the group before it (event 3), and stream 0 waits
// for it (event 4) right before the group's first read. Layer 0's forward
// weights are gathered while the embedding runs.
// RUN: sed -e 's/zero_stage: 1/zero_stage: 3/' %t/zero1.pbtxt > %t/zero3.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/zero3.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap=bucket-mb=0.1 | FileCheck %s --check-prefix=ZERO3
// ZERO3-NOT: weight_copy
// ZERO3: sched.event.record 3 value 1 on 0
// ZERO3-NEXT: sched.event.wait 3 value 1 on 1
// ZERO3: sched.collective all_gather dp(%{{.*}} : memref<128x64xf32>) into(%[[EMB:[0-9]+]] : memref<256x64xf32>) on 1
// ZERO3-NEXT: sched.event.record 4 value 1 on 1
// ZERO3: sched.event.wait 4 value 1 on 0
// ZERO3-NEXT: sched.event.record 3 value 2 on 0
// ZERO3-NEXT: sched.event.wait 3 value 2 on 1
// ZERO3: sched.collective all_gather dp({{.*}}) into({{.*}}) on 1
// ZERO3-NEXT: sched.event.record 4 value 2 on 1
// ZERO3: sched.launch "embedding" on 0 micro_batch 0 ins(%[[EMB]],
// ZERO3: sched.event.wait 4 value 2 on 0
// ZERO3-NEXT: sched.event.record 3 value 3 on 0
// ZERO3: sched.launch "rms_norm" on 0 micro_batch 0

// comm_chunks: 4 cuts each bucket and each gather into up to 4 pieces
// between tensors. A layer's forward gather comes in pieces, and stream 0
// waits for each right before the launch that first reads it: the layer
// starts on its norm and attention weights while its MLP weights arrive.
// RUN: sed -e 's/zero_stage: 1/zero_stage: 3 comm_chunks: 4/' %t/zero1.pbtxt > %t/chunks.pbtxt
// RUN: braid-opt %s --braid-import=spec=%t/chunks.pbtxt --braid-autodiff --braid-lower-to-sched --braid-overlap=bucket-mb=0.2 | FileCheck %s --check-prefix=CHUNKS
// CHUNKS: sched.event.wait 3 value 2 on 1
// CHUNKS: sched.collective all_gather dp({{.*}}) into({{.*}}) on 1
// CHUNKS-NEXT: sched.event.record 4 value 2 on 1
// CHUNKS: sched.collective all_gather dp({{.*}}) into({{.*}}) on 1
// CHUNKS-NEXT: sched.event.record 4 value 3 on 1
// CHUNKS: sched.event.wait 4 value 2 on 0
// CHUNKS: sched.launch "rms_norm" on 0 micro_batch 0
// CHUNKS: sched.event.wait 4 value 3 on 0
// CHUNKS: sched.launch "linear" on 0 micro_batch 0
