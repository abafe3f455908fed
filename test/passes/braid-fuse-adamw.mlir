// RUN: braid-opt %S/Inputs/fuse-adamw-step.mlir --braid-lower-to-sched --braid-fuse-adamw | FileCheck %s --check-prefix=STEP
// RUN: braid-opt %s --split-input-file --braid-fuse-adamw | FileCheck %s

// The lowered step: the three adamw launches become one multi_adamw after
// grad_norm, decayed tensors (table, w) first, then b; the fills at the
// start of the step, the micro-batches and everything else stay.
// STEP-LABEL: sched.program @step
// STEP-COUNT-4: sched.launch "fill"
// STEP: sched.repeat 4 {
// STEP: sched.readback
// STEP: %[[G0:.+]] = sched.get_global @table.grad
// STEP: %[[G1:.+]] = sched.get_global @w.grad
// STEP: %[[G2:.+]] = sched.get_global @b.grad
// STEP: %[[NORM:.+]] = sched.get_global @grad_norm
// STEP: sched.launch "grad_norm"
// STEP: %[[SKIP:.+]] = sched.get_global @step_skipped
// STEP: sched.launch "step_guard"
// STEP-NOT: "adamw"
// STEP: sched.launch "multi_adamw" on 0 ins(%[[G0]], %[[G1]], %[[G2]], %[[NORM]], %[[SKIP]] : memref<16x8xf32>, memref<8x8xf32>, memref<8xf32>, memref<f32>, memref<f32>) outs(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : memref<16x8xf32>, memref<8x8xf32>, memref<8xf32>, memref<16x8xf32>, memref<8x8xf32>, memref<8xf32>, memref<16x8xf32>, memref<8x8xf32>, memref<8xf32>) params {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, decayed = 2 : i64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
// STEP-NOT: "adamw"
// STEP: sched.readback

// Hand-written programs: the buffers of three parameters.
sched.global @a parameter : memref<4xf32> info <name = "a", init = zeros, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = zeros, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @c parameter : memref<4xf32> info <name = "c", init = zeros, grad = @c.grad, exp_avg = @c.exp_avg, exp_avg_sq = @c.exp_avg_sq>
sched.global @a.grad gradient of @a : memref<4xf32>
sched.global @b.grad gradient of @b : memref<4xf32>
sched.global @c.grad gradient of @c : memref<4xf32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>

// Decayed tensors go first, whatever the launch order; each part keeps it.
// CHECK-LABEL: sched.program @optimizer
// CHECK-NEXT: %[[A:.+]] = sched.get_global @a :
// CHECK-NEXT: %[[AG:.+]] = sched.get_global @a.grad
// CHECK-NEXT: %[[B:.+]] = sched.get_global @b :
// CHECK-NEXT: %[[BG:.+]] = sched.get_global @b.grad
// CHECK-NEXT: %[[C:.+]] = sched.get_global @c :
// CHECK-NEXT: %[[CG:.+]] = sched.get_global @c.grad
// CHECK-NEXT: %[[N:.+]] = sched.get_global @grad_norm
// CHECK-NEXT: %[[S:.+]] = sched.get_global @step_skipped
// CHECK-NEXT: sched.launch "multi_adamw" on 0 ins(%[[BG]], %[[AG]], %[[CG]], %[[N]], %[[S]] : {{.+}}) outs(%[[B]], %[[A]], %[[C]], %[[B]], %[[A]], %[[C]], %[[B]], %[[A]], %[[C]] : {{.+}}) params {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, decayed = 1 : i64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK-NEXT: }
sched.program @optimizer step {
  %a = sched.get_global @a : memref<4xf32>
  %ag = sched.get_global @a.grad : memref<4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %bg = sched.get_global @b.grad : memref<4xf32>
  %c = sched.get_global @c : memref<4xf32>
  %cg = sched.get_global @c.grad : memref<4xf32>
  %n = sched.get_global @grad_norm : memref<f32>
  %s = sched.get_global @step_skipped : memref<f32>
  sched.launch "adamw" on 0 ins(%ag, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%a, %a, %a : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.0 : f64}
  sched.launch "adamw" on 0 ins(%bg, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %b, %b : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.1 : f64}
  sched.launch "adamw" on 0 ins(%cg, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%c, %c, %c : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.0 : f64}
}

// -----

sched.global @a parameter : memref<4xf32> info <name = "a", init = zeros, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = zeros, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @c parameter : memref<4xf32> info <name = "c", init = zeros, grad = @c.grad, exp_avg = @c.exp_avg, exp_avg_sq = @c.exp_avg_sq>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>

// Two different decay values: one launch could carry only one, so the
// launches are left alone. A repeated body is never touched: the optimizer
// is not in one.
// CHECK-LABEL: sched.program @optimizer
// CHECK-NOT: multi_adamw
// CHECK-COUNT-2: sched.launch "adamw"
// CHECK-LABEL: sched.program @step
// CHECK-NEXT: sched.repeat 2
// CHECK-NOT: multi_adamw
// CHECK-COUNT-2: sched.launch "adamw"
sched.program @optimizer step {
  %a = sched.get_global @a : memref<4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %n = sched.get_global @grad_norm : memref<f32>
  %s = sched.get_global @step_skipped : memref<f32>
  sched.launch "adamw" on 0 ins(%a, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%a, %a, %a : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.1 : f64}
  sched.launch "adamw" on 0 ins(%b, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %b, %b : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.2 : f64}
}
sched.program @step step {
  sched.repeat 2 {
  %a = sched.get_global @a : memref<4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %n = sched.get_global @grad_norm : memref<f32>
  %s = sched.get_global @step_skipped : memref<f32>
  sched.launch "adamw" on 0 ins(%a, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%a, %a, %a : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.1 : f64}
  sched.launch "adamw" on 0 ins(%b, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %b, %b : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.1 : f64}
  }
}

// -----

sched.global @a parameter : memref<4xf32> info <name = "a", init = zeros, grad = @a.grad, exp_avg = @a.exp_avg, exp_avg_sq = @a.exp_avg_sq>
sched.global @b parameter : memref<4xf32> info <name = "b", init = zeros, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>
sched.global @c parameter : memref<4xf32> info <name = "c", init = zeros, grad = @c.grad, exp_avg = @c.exp_avg, exp_avg_sq = @c.exp_avg_sq>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>

// A launch between two adamw launches ends the run: a and b are not merged
// across the fill; b and c (after it) are. Launches with another beta2 form
// their own group.
// CHECK-LABEL: sched.program @optimizer
// CHECK: sched.launch "adamw" on 0 ins(%[[A:.+]], %{{.+}} :
// CHECK-NEXT: sched.launch "fill"
// CHECK-NEXT: sched.launch "multi_adamw" on 0 ins(%[[B:.+]], %[[C:.+]], %{{.+}}, %{{.+}} : memref<4xf32>, memref<4xf32>, memref<f32>, memref<f32>) {{.+}} beta2 = 0.99899999999999999 : f64, decayed = 0 : i64
// CHECK-NEXT: sched.launch "adamw" on 0 ins(%[[A]], {{.+}} beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, weight_decay = 0.000000e+00 : f64}
// CHECK-NEXT: }
sched.program @optimizer step {
  %a = sched.get_global @a : memref<4xf32>
  %b = sched.get_global @b : memref<4xf32>
  %c = sched.get_global @c : memref<4xf32>
  %n = sched.get_global @grad_norm : memref<f32>
  %s = sched.get_global @step_skipped : memref<f32>
  sched.launch "adamw" on 0 ins(%a, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%a, %a, %a : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.0 : f64}
  sched.launch "fill" on 0 outs(%a : memref<4xf32>) params {value = 0.0 : f64}
  sched.launch "adamw" on 0 ins(%b, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%b, %b, %b : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.0 : f64}
  sched.launch "adamw" on 0 ins(%c, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%c, %c, %c : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.0 : f64}
  sched.launch "adamw" on 0 ins(%a, %n, %s : memref<4xf32>, memref<f32>, memref<f32>) outs(%a, %a, %a : memref<4xf32>, memref<4xf32>, memref<4xf32>) params {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, grad_clip = 1.0 : f64, weight_decay = 0.0 : f64}
}
