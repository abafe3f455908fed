// RUN: braid-opt %s --braid-plan-memory | FileCheck %s
// RUN: braid-opt %s --braid-plan-memory=report=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// A BF16 module: the weight copy is laid out after the optimizer state and
// before the inputs; every buffer counts at its element type's size (a
// 2x4x16 bf16 buffer is 256 bytes, where its f32 twin would be 512).
// CHECK: sched.memory = {activation_peak_bytes = 576 : i64, arena_bytes = 960 : i64, gradient_bytes = 64 : i64, input_bytes = 36 : i64, optimizer_bytes = 64 : i64, parameter_bytes = 64 : i64, saved_activation_bytes = 288 : i64, weight_copy_bytes = 32 : i64}

// CHECK: sched.global @loss scalar role loss : memref<f32> offset(320)
// CHECK: sched.global @tokens input role tokens : memref<2x4xi32> offset(256)
// CHECK: sched.global @w.bf16 weight_copy of @w : memref<16xbf16> offset(192)
// CHECK: sched.global @w.exp_avg optimizer_state of @w : memref<16xf32> offset(128)
// CHECK: sched.global @w.grad gradient of @w : memref<16xf32> offset(64)
// CHECK: sched.global @w parameter : memref<16xf32> offset(0)
sched.global @loss scalar role loss : memref<f32>
sched.global @tokens input role tokens : memref<2x4xi32>
sched.global @w.bf16 weight_copy of @w : memref<16xbf16>
sched.global @w.exp_avg optimizer_state of @w : memref<16xf32>
sched.global @w.grad gradient of @w : memref<16xf32>
sched.global @w parameter : memref<16xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq, compute_copy = @w.bf16>

// The init program has no transient buffers.
// CHECK-LABEL: sched.program @init init {
// CHECK-NOT: sched.alloc
sched.program @init init {
  %w = sched.get_global @w : memref<16xf32>
  %c = sched.get_global @w.bf16 : memref<16xbf16>
  sched.launch "cast" on 0 ins(%w : memref<16xf32>) outs(%c : memref<16xbf16>)
}

// Transients start at 384. %a (256 B, launches 0-2) and %d (256 B, launches
// 2-3) meet at launch 2; the f32 row statistics %s (32 B, launches 1-2) go
// above both. %a and %s cross into the backward: 288 bytes saved.
// CHECK-LABEL: sched.program @step step {
// CHECK: sched.alloc offset(384) : memref<2x4x16xbf16>
// CHECK: sched.alloc offset(896) : memref<2x4xf32>
// CHECK: sched.alloc offset(640) : memref<2x4x16xbf16>
sched.program @step step {
  %wb = sched.get_global @w.bf16 : memref<16xbf16>
  %ids = sched.get_global @tokens : memref<2x4xi32>
  %g = sched.get_global @w.grad : memref<16xf32>
  %l = sched.get_global @loss : memref<f32>
  %a = sched.alloc : memref<2x4x16xbf16>
  sched.launch "k1" on 0 ins(%wb, %ids : memref<16xbf16>, memref<2x4xi32>) outs(%a : memref<2x4x16xbf16>)
  %s = sched.alloc : memref<2x4xf32>
  sched.launch "k2" on 0 ins(%a : memref<2x4x16xbf16>) outs(%l, %s : memref<f32>, memref<2x4xf32>)
  %d = sched.alloc : memref<2x4x16xbf16>
  sched.launch "k3_grad_input" on 0 ins(%a, %s : memref<2x4x16xbf16>, memref<2x4xf32>) outs(%d : memref<2x4x16xbf16>) {braid.phase = #braid.phase<input_grad>}
  sched.launch "k4_grad_weight" on 0 ins(%d : memref<2x4x16xbf16>) outs(%g : memref<16xf32>) params {accumulate = 1 : i64} {braid.phase = #braid.phase<weight_grad>}
}

// The report prints the weight copies after the optimizer state.
// REPORT: memory report (rank 0)
// REPORT-NEXT: parameters{{ +}}64 bytes
// REPORT-NEXT: gradients{{ +}}64 bytes
// REPORT-NEXT: optimizer state{{ +}}64 bytes
// REPORT-NEXT: weight copies{{ +}}32 bytes
// REPORT-NEXT: inputs and scalars{{ +}}36 bytes
// REPORT-NEXT: activations (peak){{ +}}576 bytes
// REPORT-NEXT:{{ +}}saved for backward{{ +}}288 bytes
// REPORT-NEXT: arena{{ +}}960 bytes
