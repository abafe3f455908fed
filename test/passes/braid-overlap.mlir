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
// its loss; event 2 holds the optimizer until every sum is in.
// EACH-LABEL: sched.program @step step
// EACH: sched.repeat 1 {
// EACH: sched.stage %{{.*}} micro_batch 1 on 0
// EACH: sched.launch "linear_grad_weight" on 0 micro_batch 1 {{.*}}outs(%[[HEAD:.*]] : memref<256x64xf32>)
// EACH-NEXT: sched.event.record 1 value 1 on 0
// EACH-NEXT: sched.event.wait 1 value 1 on 1
// EACH-NEXT: %[[G:.*]] = sched.get_global @lm_head.weight.grad
// EACH-NEXT: sched.collective all_reduce_sum dp(%[[G]] : memref<256x64xf32>) on 1
// EACH: sched.launch "rms_norm_grad_input" on 0 micro_batch 1
// EACH: sched.event.record 1 value 2 on 0
// EACH: sched.readback %{{.*}} to 1 on 0
// EACH: sched.launch "accumulate" on 0 micro_batch 1
// EACH-NEXT: sched.event.record 1 value [[LAST:[0-9]+]] on 0
// EACH-NEXT: sched.event.wait 1 value [[LAST]] on 1
// EACH: sched.collective all_reduce_sum dp({{.*}} : memref<f32>) on 1
// EACH: sched.event.record 2 value 1 on 1
// EACH-NEXT: sched.event.wait 2 value 1 on 0
// EACH-NOT: sched.collective
// EACH: sched.launch "grad_norm" on 0
// One collective per gradient (21) and the loss sum's.
// COUNT: 22

// Buckets of at least 0.2 MiB: several gradients per collective, handed
// over after the launch that completes the bucket.
// BUCKETS: sched.event.record 1 value 1 on 0
// BUCKETS: sched.collective all_reduce_sum dp({{%[0-9]+, %[0-9]+.*}}) on 1
// BUCKETS: sched.event.record 2 value 1 on 1

// One rank: nothing to reduce, nothing changes.
// ONE: sched.repeat 2 {
// ONE-NOT: sched.collective

// TWICE: error: 'sched.collective' op is not the reduction braid-lower-to-sched makes (the step has several collectives); braid-overlap runs once, right after it
