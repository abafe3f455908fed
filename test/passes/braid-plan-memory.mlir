// RUN: braid-opt %s --braid-plan-memory | FileCheck %s
// RUN: braid-opt %s --braid-plan-memory=report=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// The module records the totals; %b (below) is what crosses into the
// backward.
// CHECK: sched.memory = {activation_peak_bytes = 320 : i64, arena_bytes = 512 : i64, gradient_bytes = 64 : i64, input_bytes = 4 : i64, optimizer_bytes = 0 : i64, parameter_bytes = 64 : i64, saved_activation_bytes = 40 : i64}

// Persistent globals are packed by kind at 64-byte alignment, whatever their
// order in the module: parameter, gradient, then the scalar.
// CHECK: sched.global @loss scalar role loss : memref<f32> offset(128)
// CHECK: sched.global @w.grad gradient of @w : memref<16xf32> offset(64)
// CHECK: sched.global @w parameter : memref<16xf32> offset(0)
sched.global @loss scalar role loss : memref<f32>
sched.global @w.grad gradient of @w : memref<16xf32>
sched.global @w parameter : memref<16xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>

// Transients start at 192. %a (256 B, launches 0-1) and %c (256 B, launches
// 2-3) never live together and share offset 192; %b (40 B, launches 1-2)
// overlaps both and goes above them.
// CHECK-LABEL: sched.program @step step {
// CHECK: %[[A:.+]] = sched.alloc offset(192) : memref<64xf32>
// CHECK: %[[B:.+]] = sched.alloc offset(448) : memref<10xf32>
// CHECK: %[[C:.+]] = sched.alloc offset(192) : memref<64xf32>
sched.program @step step {
  %w = sched.get_global @w : memref<16xf32>
  %g = sched.get_global @w.grad : memref<16xf32>
  %a = sched.alloc : memref<64xf32>
  sched.launch "k1" on 0 ins(%w : memref<16xf32>) outs(%a : memref<64xf32>)
  %b = sched.alloc : memref<10xf32>
  sched.launch "k2" on 0 ins(%a : memref<64xf32>) outs(%b : memref<10xf32>)
  %c = sched.alloc : memref<64xf32>
  sched.launch "k3_grad_input" on 0 ins(%b : memref<10xf32>) outs(%c : memref<64xf32>) {braid.phase = #braid.phase<input_grad>}
  sched.launch "k4_grad_weight" on 0 ins(%c : memref<64xf32>) outs(%g : memref<16xf32>) {braid.phase = #braid.phase<weight_grad>}
}

// REPORT: memory report (rank 0)
// REPORT-NEXT: parameters{{ +}}64 bytes
// REPORT-NEXT: gradients{{ +}}64 bytes
// REPORT-NEXT: optimizer state{{ +}}0 bytes
// REPORT-NEXT: inputs and scalars{{ +}}4 bytes
// REPORT-NEXT: activations (peak){{ +}}320 bytes
// REPORT-NEXT:{{ +}}saved for backward{{ +}}40 bytes
// REPORT-NEXT: arena{{ +}}512 bytes
