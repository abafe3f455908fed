// RUN: braid-opt %s --split-input-file --braid-offload-optimizer=enable=true -verify-diagnostics | FileCheck %s

// FP32, one bucket per parameter (no braid.bucket_mb): the masters and
// moments go to the host, compute reads new f32 copies, and after
// step_guard each gradient goes to the host on stream 1 (the first free),
// AdamW runs on host stream 2 as it arrives, and stream 3 copies the
// master back; stream 0 waits for the last copy at the end. The init
// program copies each master into its copy.
// CHECK: module attributes {braid.optimizer_offload_report = [{to_device = 80 : i64, to_host = 88 : i64}], sched.host_streams = array<i32: 2>}
// CHECK: sched.global @a parameter host : memref<4x4xf32> info <{{.*}}, compute_copy = @a.copy>
// CHECK: sched.global @b parameter host : memref<4xf32> info <{{.*}}, compute_copy = @b.copy>
// CHECK: sched.global @a.grad gradient of @a
// CHECK: sched.global @a.exp_avg optimizer_state host of @a
// CHECK: sched.global @a.exp_avg_sq optimizer_state host of @a
// CHECK: sched.global @b.exp_avg optimizer_state host of @b
// CHECK: sched.global @b.exp_avg_sq optimizer_state host of @b
// CHECK: sched.global @a.copy weight_copy of @a : memref<4x4xf32>
// CHECK: sched.global @b.copy weight_copy of @b : memref<4xf32>
// CHECK-LABEL: sched.program @step
// CHECK-DAG: %[[AC:.*]] = sched.get_global @a.copy
// CHECK-DAG: %[[BC:.*]] = sched.get_global @b.copy
// CHECK: sched.launch "f" on 0 micro_batch 0 ins(%[[AC]], %[[BC]] :
// CHECK: sched.launch "step_guard" on 0
// CHECK-NEXT: sched.event.record [[S:[0-9]+]] value 1 on 0
// CHECK-NEXT: sched.event.wait [[S]] value 1 on 1
// CHECK-NEXT: %[[NORM:.*]] = sched.alloc host : memref<f32>
// CHECK-NEXT: %[[N:.*]] = sched.get_global @grad_norm
// CHECK-NEXT: sched.launch "copy" on 1 ins(%[[N]] : memref<f32>) outs(%[[NORM]] : memref<f32>)
// CHECK-NEXT: %[[SKIP:.*]] = sched.alloc host : memref<f32>
// CHECK-NEXT: %[[K:.*]] = sched.get_global @step_skipped
// CHECK-NEXT: sched.launch "copy" on 1 ins(%[[K]] : memref<f32>) outs(%[[SKIP]] : memref<f32>)
// CHECK-NEXT: %[[GAH:.*]] = sched.alloc host : memref<4x4xf32>
// CHECK-NEXT: %[[GA:.*]] = sched.get_global @a.grad
// CHECK-NEXT: sched.launch "copy" on 1 ins(%[[GA]] : memref<4x4xf32>) outs(%[[GAH]] : memref<4x4xf32>) {braid.phase = #braid.phase<optimizer>}
// CHECK-NEXT: sched.event.record [[O:[0-9]+]] value 1 on 1
// CHECK-NEXT: sched.event.wait [[O]] value 1 on 2
// CHECK-NEXT: %[[A:.*]] = sched.get_global @a :
// CHECK-NEXT: %[[MA:.*]] = sched.get_global @a.exp_avg :
// CHECK-NEXT: %[[VA:.*]] = sched.get_global @a.exp_avg_sq :
// CHECK-NEXT: sched.launch "adamw" on 2 ins(%[[GAH]], %[[NORM]], %[[SKIP]] : {{.*}}) outs(%[[A]], %[[MA]], %[[VA]] : {{.*}}) params {{{.*}}weight_decay = 1.000000e-01 : f64}
// CHECK-NEXT: sched.event.record [[U:[0-9]+]] value 1 on 2
// CHECK-NEXT: sched.event.wait [[U]] value 1 on 3
// CHECK-NEXT: %[[A2:.*]] = sched.get_global @a :
// CHECK-NEXT: %[[AC2:.*]] = sched.get_global @a.copy :
// CHECK-NEXT: sched.launch "copy" on 3 ins(%[[A2]] : memref<4x4xf32>) outs(%[[AC2]] : memref<4x4xf32>)
// CHECK-NEXT: sched.event.record [[D:[0-9]+]] value 1 on 3
// The next bucket: b, its AdamW on the same host copies of norm and skip.
// CHECK-NEXT: %[[GBH:.*]] = sched.alloc host : memref<4xf32>
// CHECK: sched.launch "copy" on 1 {{.*}} outs(%[[GBH]] : memref<4xf32>)
// CHECK-NEXT: sched.event.record [[O]] value 2 on 1
// CHECK-NEXT: sched.event.wait [[O]] value 2 on 2
// CHECK: sched.launch "adamw" on 2 ins(%[[GBH]], %[[NORM]], %[[SKIP]] : {{.*}} weight_decay = 0.000000e+00 : f64}
// CHECK-NEXT: sched.event.record [[U]] value 2 on 2
// CHECK-NEXT: sched.event.wait [[U]] value 2 on 3
// CHECK: sched.launch "copy" on 3
// CHECK-NEXT: sched.event.record [[D]] value 2 on 3
// CHECK-NEXT: sched.readback
// CHECK-NEXT: sched.event.wait [[D]] value 2 on 0
// CHECK-NEXT: }
// CHECK-NOT: "adamw" on 0
// CHECK-LABEL: sched.program @init init
// CHECK: sched.launch "copy" on 0 ins(%{{.*}} : memref<4x4xf32>) outs(%{{.*}} : memref<4x4xf32>)
// CHECK: sched.launch "copy" on 0 ins(%{{.*}} : memref<4xf32>) outs(%{{.*}} : memref<4xf32>)
module {
sched.global @a parameter : memref<4x4xf32> info <name = "a", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = ones, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @a.grad gradient of @a : memref<4x4xf32>
sched.global @b.grad gradient of @b : memref<4xf32>
sched.global @a.exp_avg optimizer_state of @a : memref<4x4xf32>
sched.global @a.exp_avg_sq optimizer_state of @a : memref<4x4xf32>
sched.global @b.exp_avg optimizer_state of @b : memref<4xf32>
sched.global @b.exp_avg_sq optimizer_state of @b : memref<4xf32>
sched.global @loss_sum scalar role loss_sum : memref<f32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>
sched.program @step step {
  %a = sched.get_global @a : memref<4x4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %ga = sched.get_global @a.grad : memref<4x4xf32>
  %gb = sched.get_global @b.grad : memref<4xf32>
  %x = sched.alloc : memref<4xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%a, %b : memref<4x4xf32>, memref<4xf32>) outs(%x : memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
  sched.launch "g" on 0 micro_batch 0 ins(%x : memref<4xf32>) outs(%ga, %gb : memref<4x4xf32>, memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  %sum = sched.get_global @loss_sum : memref<f32>
  %norm = sched.get_global @grad_norm : memref<f32>
  %skip = sched.get_global @step_skipped : memref<f32>
  sched.launch "grad_norm" on 0 ins(%ga, %gb : memref<4x4xf32>, memref<4xf32>) outs(%norm : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  sched.launch "step_guard" on 0 ins(%sum, %norm : memref<f32>, memref<f32>) outs(%skip : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  %ma = sched.get_global @a.exp_avg : memref<4x4xf32>
  %va = sched.get_global @a.exp_avg_sq : memref<4x4xf32>
  sched.launch "adamw" on 0 ins(%ga, %norm, %skip : memref<4x4xf32>, memref<f32>, memref<f32>) outs(%a, %ma, %va : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  %mb = sched.get_global @b.exp_avg : memref<4xf32>
  %vb = sched.get_global @b.exp_avg_sq : memref<4xf32>
  sched.launch "adamw" on 0 ins(%gb, %norm, %skip : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %mb, %vb : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  sched.readback %norm to 1 on 0 : memref<f32>
}
}

// -----

// braid.bucket_mb (here about 100 bytes): a and b make one bucket, both
// gradients copied before the host stream starts, both AdamW launches
// together (braid-fuse-adamw then fuses them), both copies back together.
// CHECK-LABEL: sched.program @step
// CHECK: sched.launch "copy" on 1 {{.*}}memref<4x4xf32>
// CHECK-NEXT: sched.alloc host : memref<4xf32>
// CHECK-NEXT: sched.get_global @b.grad
// CHECK-NEXT: sched.launch "copy" on 1 {{.*}}memref<4xf32>
// CHECK-NEXT: sched.event.record [[O:[0-9]+]] value 1 on 1
// CHECK-NEXT: sched.event.wait [[O]] value 1 on 2
// CHECK: sched.launch "adamw" on 2
// CHECK: sched.launch "adamw" on 2
// CHECK-NEXT: sched.event.record [[U:[0-9]+]] value 1 on 2
// CHECK-NEXT: sched.event.wait [[U]] value 1 on 3
// CHECK: sched.launch "copy" on 3
// CHECK: sched.launch "copy" on 3
// CHECK-NEXT: sched.event.record [[D:[0-9]+]] value 1 on 3
// CHECK-NEXT: sched.readback
// CHECK-NEXT: sched.event.wait [[D]] value 1 on 0
module attributes {braid.bucket_mb = 1.0e-04 : f64} {
sched.global @a parameter : memref<4x4xf32> info <name = "a", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = ones, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @a.grad gradient of @a : memref<4x4xf32>
sched.global @b.grad gradient of @b : memref<4xf32>
sched.global @a.exp_avg optimizer_state of @a : memref<4x4xf32>
sched.global @a.exp_avg_sq optimizer_state of @a : memref<4x4xf32>
sched.global @b.exp_avg optimizer_state of @b : memref<4xf32>
sched.global @b.exp_avg_sq optimizer_state of @b : memref<4xf32>
sched.global @loss_sum scalar role loss_sum : memref<f32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>
sched.program @step step {
  %a = sched.get_global @a : memref<4x4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %ga = sched.get_global @a.grad : memref<4x4xf32>
  %gb = sched.get_global @b.grad : memref<4xf32>
  %x = sched.alloc : memref<4xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%a, %b : memref<4x4xf32>, memref<4xf32>) outs(%x : memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
  sched.launch "g" on 0 micro_batch 0 ins(%x : memref<4xf32>) outs(%ga, %gb : memref<4x4xf32>, memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  %sum = sched.get_global @loss_sum : memref<f32>
  %norm = sched.get_global @grad_norm : memref<f32>
  %skip = sched.get_global @step_skipped : memref<f32>
  sched.launch "grad_norm" on 0 ins(%ga, %gb : memref<4x4xf32>, memref<4xf32>) outs(%norm : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  sched.launch "step_guard" on 0 ins(%sum, %norm : memref<f32>, memref<f32>) outs(%skip : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  %ma = sched.get_global @a.exp_avg : memref<4x4xf32>
  %va = sched.get_global @a.exp_avg_sq : memref<4x4xf32>
  sched.launch "adamw" on 0 ins(%ga, %norm, %skip : memref<4x4xf32>, memref<f32>, memref<f32>) outs(%a, %ma, %va : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  %mb = sched.get_global @b.exp_avg : memref<4xf32>
  %vb = sched.get_global @b.exp_avg_sq : memref<4xf32>
  sched.launch "adamw" on 0 ins(%gb, %norm, %skip : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %mb, %vb : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  sched.readback %norm to 1 on 0 : memref<f32>
}
}

// -----

// BF16: a keeps its bf16 copy (no f32 one), which the host stream casts
// into a host bf16 buffer after AdamW and stream 3 copies to the device
// (half the bytes of the master); the step's and the init's casts on
// stream 0 go. b, read as f32, gets an f32 copy.
// CHECK: module attributes {braid.optimizer_offload_report = [{to_device = 48 : i64, to_host = 88 : i64}]
// CHECK-NOT: @a.copy
// CHECK: sched.global @b.copy weight_copy of @b : memref<4xf32>
// CHECK-LABEL: sched.program @step
// CHECK: sched.launch "adamw" on 2
// CHECK-NEXT: %[[H:.*]] = sched.alloc host : memref<4x4xbf16>
// CHECK-NEXT: %[[A:.*]] = sched.get_global @a :
// CHECK-NEXT: sched.launch "cast" on 2 ins(%[[A]] : memref<4x4xf32>) outs(%[[H]] : memref<4x4xbf16>)
// CHECK-NEXT: sched.event.record [[U:[0-9]+]] value 1 on 2
// CHECK-NEXT: sched.event.wait [[U]] value 1 on 3
// CHECK-NEXT: %[[C:.*]] = sched.get_global @a.bf16 :
// CHECK-NEXT: sched.launch "copy" on 3 ins(%[[H]] : memref<4x4xbf16>) outs(%[[C]] : memref<4x4xbf16>)
// CHECK-NOT: "cast" on 0
// CHECK-LABEL: sched.program @init init
// CHECK: %[[H:.*]] = sched.alloc host : memref<4x4xbf16>
// CHECK-NEXT: %[[A:.*]] = sched.get_global @a :
// CHECK-NEXT: sched.launch "cast" on 2 ins(%[[A]] : memref<4x4xf32>) outs(%[[H]] : memref<4x4xbf16>)
// CHECK-NEXT: sched.event.record [[E:[0-9]+]] value 1 on 2
// CHECK-NEXT: sched.event.wait [[E]] value 1 on 0
// CHECK-NEXT: %[[C:.*]] = sched.get_global @a.bf16 :
// CHECK-NEXT: sched.launch "copy" on 0 ins(%[[H]] : memref<4x4xbf16>) outs(%[[C]] : memref<4x4xbf16>)
// CHECK: sched.launch "copy" on 0 ins(%{{.*}} : memref<4xf32>) outs(%{{.*}} : memref<4xf32>)
// CHECK-NOT: "cast" on 0
module {
sched.global @a parameter : memref<4x4xf32> info <name = "a", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq, compute_copy = @a.bf16>
sched.global @b parameter : memref<4xf32> info <name = "b", init = ones, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @a.grad gradient of @a : memref<4x4xf32>
sched.global @b.grad gradient of @b : memref<4xf32>
sched.global @a.exp_avg optimizer_state of @a : memref<4x4xf32>
sched.global @a.exp_avg_sq optimizer_state of @a : memref<4x4xf32>
sched.global @b.exp_avg optimizer_state of @b : memref<4xf32>
sched.global @b.exp_avg_sq optimizer_state of @b : memref<4xf32>
sched.global @a.bf16 weight_copy of @a : memref<4x4xbf16>
sched.global @loss_sum scalar role loss_sum : memref<f32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>
sched.program @step step {
  %a = sched.get_global @a : memref<4x4xf32>
  %a16 = sched.get_global @a.bf16 : memref<4x4xbf16>
  %b = sched.get_global @b : memref<4xf32>
  %ga = sched.get_global @a.grad : memref<4x4xf32>
  %gb = sched.get_global @b.grad : memref<4xf32>
  %x = sched.alloc : memref<4xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%a16, %b : memref<4x4xbf16>, memref<4xf32>) outs(%x : memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
  sched.launch "g" on 0 micro_batch 0 ins(%x : memref<4xf32>) outs(%ga, %gb : memref<4x4xf32>, memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  %sum = sched.get_global @loss_sum : memref<f32>
  %norm = sched.get_global @grad_norm : memref<f32>
  %skip = sched.get_global @step_skipped : memref<f32>
  sched.launch "grad_norm" on 0 ins(%ga, %gb : memref<4x4xf32>, memref<4xf32>) outs(%norm : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  sched.launch "step_guard" on 0 ins(%sum, %norm : memref<f32>, memref<f32>) outs(%skip : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  %ma = sched.get_global @a.exp_avg : memref<4x4xf32>
  %va = sched.get_global @a.exp_avg_sq : memref<4x4xf32>
  sched.launch "adamw" on 0 ins(%ga, %norm, %skip : memref<4x4xf32>, memref<f32>, memref<f32>) outs(%a, %ma, %va : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  %mb = sched.get_global @b.exp_avg : memref<4xf32>
  %vb = sched.get_global @b.exp_avg_sq : memref<4xf32>
  sched.launch "adamw" on 0 ins(%gb, %norm, %skip : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %mb, %vb : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  sched.launch "cast" on 0 ins(%a : memref<4x4xf32>) outs(%a16 : memref<4x4xbf16>) {braid.phase = #braid.phase<optimizer>}
  sched.readback %norm to 1 on 0 : memref<f32>
}
sched.program @init init {
  %a = sched.get_global @a : memref<4x4xf32>
  %a16 = sched.get_global @a.bf16 : memref<4x4xbf16>
  sched.launch "cast" on 0 ins(%a : memref<4x4xf32>) outs(%a16 : memref<4x4xbf16>)
}
}

// -----

// Refused: the optimizer already fused.
module {
sched.global @a parameter : memref<4x4xf32> info <name = "a", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = ones, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @a.grad gradient of @a : memref<4x4xf32>
sched.global @b.grad gradient of @b : memref<4xf32>
sched.global @a.exp_avg optimizer_state of @a : memref<4x4xf32>
sched.global @a.exp_avg_sq optimizer_state of @a : memref<4x4xf32>
sched.global @b.exp_avg optimizer_state of @b : memref<4xf32>
sched.global @b.exp_avg_sq optimizer_state of @b : memref<4xf32>
sched.global @loss_sum scalar role loss_sum : memref<f32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>
sched.program @step step {
  %a = sched.get_global @a : memref<4x4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %ga = sched.get_global @a.grad : memref<4x4xf32>
  %gb = sched.get_global @b.grad : memref<4xf32>
  %x = sched.alloc : memref<4xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%a, %b : memref<4x4xf32>, memref<4xf32>) outs(%x : memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
  sched.launch "g" on 0 micro_batch 0 ins(%x : memref<4xf32>) outs(%ga, %gb : memref<4x4xf32>, memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  %sum = sched.get_global @loss_sum : memref<f32>
  %norm = sched.get_global @grad_norm : memref<f32>
  %skip = sched.get_global @step_skipped : memref<f32>
  sched.launch "grad_norm" on 0 ins(%ga, %gb : memref<4x4xf32>, memref<4xf32>) outs(%norm : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  sched.launch "step_guard" on 0 ins(%sum, %norm : memref<f32>, memref<f32>) outs(%skip : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  %ma = sched.get_global @a.exp_avg : memref<4x4xf32>
  %va = sched.get_global @a.exp_avg_sq : memref<4x4xf32>
  sched.launch "adamw" on 0 ins(%ga, %norm, %skip : memref<4x4xf32>, memref<f32>, memref<f32>) outs(%a, %ma, %va : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  // expected-error @+1 {{braid-fuse-adamw: it splits the optimizer into buckets}}
  sched.launch "multi_adamw" on 0 ins(%ga, %norm, %skip : memref<4x4xf32>, memref<f32>, memref<f32>) outs(%a, %ma, %va : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>)
  %mb = sched.get_global @b.exp_avg : memref<4xf32>
  %vb = sched.get_global @b.exp_avg_sq : memref<4xf32>
  sched.launch "adamw" on 0 ins(%gb, %norm, %skip : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %mb, %vb : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  sched.readback %norm to 1 on 0 : memref<f32>
}
}

// -----

// Refused: ZeRO.
// expected-error @+1 {{optimizer offload does not combine with ZeRO (braid.zero_stage 1): choose one}}
module attributes {braid.zero_stage = 1 : i64} {
sched.global @a parameter : memref<4x4xf32> info <name = "a", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = ones, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @a.grad gradient of @a : memref<4x4xf32>
sched.global @b.grad gradient of @b : memref<4xf32>
sched.global @a.exp_avg optimizer_state of @a : memref<4x4xf32>
sched.global @a.exp_avg_sq optimizer_state of @a : memref<4x4xf32>
sched.global @b.exp_avg optimizer_state of @b : memref<4xf32>
sched.global @b.exp_avg_sq optimizer_state of @b : memref<4xf32>
sched.global @loss_sum scalar role loss_sum : memref<f32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>
sched.program @step step {
  %a = sched.get_global @a : memref<4x4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %ga = sched.get_global @a.grad : memref<4x4xf32>
  %gb = sched.get_global @b.grad : memref<4xf32>
  %x = sched.alloc : memref<4xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%a, %b : memref<4x4xf32>, memref<4xf32>) outs(%x : memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
  sched.launch "g" on 0 micro_batch 0 ins(%x : memref<4xf32>) outs(%ga, %gb : memref<4x4xf32>, memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  %sum = sched.get_global @loss_sum : memref<f32>
  %norm = sched.get_global @grad_norm : memref<f32>
  %skip = sched.get_global @step_skipped : memref<f32>
  sched.launch "grad_norm" on 0 ins(%ga, %gb : memref<4x4xf32>, memref<4xf32>) outs(%norm : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  sched.launch "step_guard" on 0 ins(%sum, %norm : memref<f32>, memref<f32>) outs(%skip : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  %ma = sched.get_global @a.exp_avg : memref<4x4xf32>
  %va = sched.get_global @a.exp_avg_sq : memref<4x4xf32>
  sched.launch "adamw" on 0 ins(%ga, %norm, %skip : memref<4x4xf32>, memref<f32>, memref<f32>) outs(%a, %ma, %va : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  %mb = sched.get_global @b.exp_avg : memref<4xf32>
  %vb = sched.get_global @b.exp_avg_sq : memref<4xf32>
  sched.launch "adamw" on 0 ins(%gb, %norm, %skip : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %mb, %vb : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  sched.readback %norm to 1 on 0 : memref<f32>
}
}

// -----

// Refused: a step without step_guard.
module {
sched.global @a parameter : memref<4x4xf32> info <name = "a", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = ones, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @a.grad gradient of @a : memref<4x4xf32>
sched.global @b.grad gradient of @b : memref<4xf32>
sched.global @a.exp_avg optimizer_state of @a : memref<4x4xf32>
sched.global @a.exp_avg_sq optimizer_state of @a : memref<4x4xf32>
sched.global @b.exp_avg optimizer_state of @b : memref<4xf32>
sched.global @b.exp_avg_sq optimizer_state of @b : memref<4xf32>
sched.global @loss_sum scalar role loss_sum : memref<f32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>
// expected-error @+1 {{the step has no step_guard launch}}
sched.program @step step {
  %a = sched.get_global @a : memref<4x4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %ga = sched.get_global @a.grad : memref<4x4xf32>
  %gb = sched.get_global @b.grad : memref<4xf32>
  %x = sched.alloc : memref<4xf32>
  sched.launch "f" on 0 micro_batch 0 ins(%a, %b : memref<4x4xf32>, memref<4xf32>) outs(%x : memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>}
  sched.launch "g" on 0 micro_batch 0 ins(%x : memref<4xf32>) outs(%ga, %gb : memref<4x4xf32>, memref<4xf32>) {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>}
  %sum = sched.get_global @loss_sum : memref<f32>
  %norm = sched.get_global @grad_norm : memref<f32>
  %skip = sched.get_global @step_skipped : memref<f32>
  sched.launch "grad_norm" on 0 ins(%ga, %gb : memref<4x4xf32>, memref<4xf32>) outs(%norm : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  sched.launch "guard" on 0 ins(%sum, %norm : memref<f32>, memref<f32>) outs(%skip : memref<f32>) {braid.phase = #braid.phase<optimizer>}
  %ma = sched.get_global @a.exp_avg : memref<4x4xf32>
  %va = sched.get_global @a.exp_avg_sq : memref<4x4xf32>
  sched.launch "adamw" on 0 ins(%ga, %norm, %skip : memref<4x4xf32>, memref<f32>, memref<f32>) outs(%a, %ma, %va : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  %mb = sched.get_global @b.exp_avg : memref<4xf32>
  %vb = sched.get_global @b.exp_avg_sq : memref<4xf32>
  sched.launch "adamw" on 0 ins(%gb, %norm, %skip : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %mb, %vb : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, grad_clip = 1.0 : f64} {braid.phase = #braid.phase<optimizer>}
  sched.readback %norm to 1 on 0 : memref<f32>
}
}
