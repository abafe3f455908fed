// RUN: braid-opt %s --split-input-file --braid-plan-memory | FileCheck %s

// Two streams, no event: stream 1 still reads %a when stream 0, later in
// program order, writes %c. Program position would let %c take %a's bytes;
// the planner keeps them apart.
// CHECK-LABEL: sched.program @step
// CHECK: %[[A:.+]] = sched.alloc offset(64) : memref<64xf32>
// CHECK: %[[B:.+]] = sched.alloc offset(320) : memref<64xf32>
// CHECK: %[[C:.+]] = sched.alloc offset(576) : memref<64xf32>
sched.global @w parameter : memref<16xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
sched.program @step step {
  %w = sched.get_global @w : memref<16xf32>
  %a = sched.alloc : memref<64xf32>
  sched.launch "k1" on 0 ins(%w : memref<16xf32>) outs(%a : memref<64xf32>)
  %b = sched.alloc : memref<64xf32>
  sched.launch "k2" on 1 ins(%a : memref<64xf32>) outs(%b : memref<64xf32>)
  %c = sched.alloc : memref<64xf32>
  sched.launch "k3" on 0 ins(%w : memref<16xf32>) outs(%c : memref<64xf32>)
  sched.launch "k4" on 0 ins(%c : memref<64xf32>) outs(%w : memref<16xf32>)
}

// -----

// The same with an event: stream 0 waits for stream 1 to finish with %a,
// so %c may take its bytes.
// CHECK-LABEL: sched.program @step
// CHECK: %[[A:.+]] = sched.alloc offset(64) : memref<64xf32>
// CHECK: %[[B:.+]] = sched.alloc offset(320) : memref<64xf32>
// CHECK: %[[C:.+]] = sched.alloc offset(64) : memref<64xf32>
sched.global @w parameter : memref<16xf32> info <name = "w", init = ones, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
sched.program @step step {
  %w = sched.get_global @w : memref<16xf32>
  %a = sched.alloc : memref<64xf32>
  sched.launch "k1" on 0 ins(%w : memref<16xf32>) outs(%a : memref<64xf32>)
  %b = sched.alloc : memref<64xf32>
  sched.launch "k2" on 1 ins(%a : memref<64xf32>) outs(%b : memref<64xf32>)
  sched.event.record 0 value 1 on 1
  sched.event.wait 0 value 1 on 0
  %c = sched.alloc : memref<64xf32>
  sched.launch "k3" on 0 ins(%w : memref<16xf32>) outs(%c : memref<64xf32>)
  sched.launch "k4" on 0 ins(%c : memref<64xf32>) outs(%w : memref<16xf32>)
}
