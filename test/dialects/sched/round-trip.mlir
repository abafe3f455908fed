// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// A parameter carries its info: name, initialisation, weight decay and the
// globals of its gradient and moments, printed in that order.
// CHECK-LABEL: sched.global @w parameter : memref<8x4xf32>
// CHECK-SAME: info <name = "model.layers.0.mlp.up_proj.weight", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>{{$}}
sched.global @w parameter : memref<8x4xf32> info <weight_decay = true, name = "model.layers.0.mlp.up_proj.weight", init_std = 0.02, init = normal, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>

// A bf16 parameter initialised to ones, with its arena offset; the flags
// that are false and the std of a non-normal init are left out.
// CHECK-LABEL: sched.global @g parameter : memref<4xbf16> offset(128) info <name = "model.norm.weight", init = ones, grad = @g.grad, exp_avg = @g.exp_avg, exp_avg_sq = @g.exp_avg_sq>{{$}}
sched.global @g parameter : memref<4xbf16> offset(128) info <name = "model.norm.weight", init = ones, weight_decay = false, checkpoint_transposed = false, grad = @g.grad, exp_avg = @g.exp_avg, exp_avg_sq = @g.exp_avg_sq>

// A parameter initialised to zeros.
// CHECK-LABEL: sched.global @b parameter : memref<8xf32> info <name = "model.layers.0.mlp.up_proj.bias", init = zeros,
sched.global @b parameter : memref<8xf32> info <name = "model.layers.0.mlp.up_proj.bias", init = zeros, grad = @b.grad, exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq>

// A GPT-2 weight that checkpoints store transposed.
// CHECK-LABEL: sched.global @c parameter : memref<12x4xf32> info <name = "transformer.h.0.attn.c_attn.weight", init = normal, init_std = 2.000000e-02, weight_decay = true, checkpoint_transposed = true,
sched.global @c parameter : memref<12x4xf32> info <name = "transformer.h.0.attn.c_attn.weight", init = normal, init_std = 2.0e-02, weight_decay = true, checkpoint_transposed = true, grad = @c.grad, exp_avg = @c.exp_avg, exp_avg_sq = @c.exp_avg_sq>

// A gradient names its parameter.
// CHECK-LABEL: sched.global @w.grad gradient of @w : memref<8x4xf32>{{$}}
sched.global @w.grad gradient of @w : memref<8x4xf32>

// Optimizer state.
// CHECK-LABEL: sched.global @w.exp_avg optimizer_state of @w : memref<8x4xf32> offset(0){{$}}
sched.global @w.exp_avg optimizer_state of @w : memref<8x4xf32> offset(0)

// A parameter of a BF16 plan names the weight copy that compute reads.
// CHECK-LABEL: sched.global @q parameter : memref<8x4xf32> info <{{.*}}, compute_copy = @q.bf16>
sched.global @q parameter : memref<8x4xf32> info <name = "model.layers.0.self_attn.q_proj.weight", init = normal, init_std = 0.02, grad = @q.grad, exp_avg = @q.exp_avg, exp_avg_sq = @q.exp_avg_sq, compute_copy = @q.bf16>

// The weight copy names its parameter.
// CHECK-LABEL: sched.global @q.bf16 weight_copy of @q : memref<8x4xbf16> offset(256)
sched.global @q.bf16 weight_copy of @q : memref<8x4xbf16> offset(256)

// The init program casts the master into its copy.
// CHECK-LABEL: sched.program @init init {
// CHECK: %[[Q:.+]] = sched.get_global @q : memref<8x4xf32>
// CHECK: %[[QB:.+]] = sched.get_global @q.bf16 : memref<8x4xbf16>
// CHECK: sched.launch "cast" on 0 ins(%[[Q]] : memref<8x4xf32>) outs(%[[QB]] : memref<8x4xbf16>)
sched.program @init init {
  %q = sched.get_global @q : memref<8x4xf32>
  %qb = sched.get_global @q.bf16 : memref<8x4xbf16>
  sched.launch "cast" on 0 ins(%q : memref<8x4xf32>) outs(%qb : memref<8x4xbf16>)
}

// Token ids are an i32 input.
// CHECK-LABEL: sched.global @tokens input role tokens : memref<2x3xi32>
sched.global @tokens input role tokens : memref<2x3xi32>

// Labels.
// CHECK-LABEL: sched.global @labels input role labels : memref<2x3xi32>
sched.global @labels input role labels : memref<2x3xi32>

// Positions.
// CHECK-LABEL: sched.global @positions input role positions : memref<2x3xi32>
sched.global @positions input role positions : memref<2x3xi32>

// Rank-0 scalars: each micro-batch's loss, their sum, the gradient norm and
// the skipped flag.
// CHECK-LABEL: sched.global @loss scalar role loss : memref<f32>
// CHECK-LABEL: sched.global @loss_sum scalar role loss_sum : memref<f32>
// CHECK-LABEL: sched.global @grad_norm scalar role grad_norm : memref<f32>
// CHECK-LABEL: sched.global @step_skipped scalar role step_skipped : memref<f32>
sched.global @loss scalar role loss : memref<f32>
sched.global @loss_sum scalar role loss_sum : memref<f32>
sched.global @grad_norm scalar role grad_norm : memref<f32>
sched.global @step_skipped scalar role step_skipped : memref<f32>

// A program (of kind step or init; the dialect does not count them, the plan
// emitter does) reads globals, allocates transient buffers and launches
// kernels.
// CHECK-LABEL: sched.program @micro_batch step {
// CHECK: %[[IDS:.+]] = sched.get_global @tokens : memref<2x3xi32>
// CHECK: %[[W:.+]] = sched.get_global @w : memref<8x4xf32>
// CHECK: %[[DW:.+]] = sched.get_global @w.grad : memref<8x4xf32>
// CHECK: %[[X:.+]] = sched.alloc : memref<2x3x4xf32>
// CHECK: %[[Y:.+]] = sched.alloc offset(96) : memref<2x3x8xf32>
// CHECK: sched.launch "zero" on 0 outs(%[[X]] : memref<2x3x4xf32>)
// CHECK: sched.launch "linear" on 1 ins(%[[X]], %[[W]] : memref<2x3x4xf32>, memref<8x4xf32>) outs(%[[Y]] : memref<2x3x8xf32>){{$}}
// CHECK: sched.launch "linear_grad_weight" on 0 ins(%[[Y]], %[[X]] : memref<2x3x8xf32>, memref<2x3x4xf32>) outs(%[[DW]] : memref<8x4xf32>) params {accumulate = 1 : i64}
// CHECK: }
sched.program @micro_batch step {
  %ids = sched.get_global @tokens : memref<2x3xi32>
  %w = sched.get_global @w : memref<8x4xf32>
  %dw = sched.get_global @w.grad : memref<8x4xf32>
  %x = sched.alloc : memref<2x3x4xf32>
  %y = sched.alloc offset(96) : memref<2x3x8xf32>
  sched.launch "zero" on 0 outs(%x : memref<2x3x4xf32>)
  sched.launch "linear" on 1 ins(%x, %w : memref<2x3x4xf32>, memref<8x4xf32>) outs(%y : memref<2x3x8xf32>)
  sched.launch "linear_grad_weight" on 0 ins(%y, %x : memref<2x3x8xf32>, memref<2x3x4xf32>) outs(%dw : memref<8x4xf32>) params {accumulate = 1 : i64}
}

// Streams are joined by recording an event on one and waiting on another.
// An event is a timeline: stream 1 moves event 3 to 1, then to 2; stream 0
// waits for each value, stream 2 only for the second.
// CHECK-LABEL: sched.program @optimizer step {
// CHECK: sched.event.record 3 value 1 on 1
// CHECK: sched.event.wait 3 value 1 on 0
// CHECK: sched.event.record 3 value 2 on 1
// CHECK: sched.event.wait 3 value 2 on 0
// CHECK: sched.event.wait 3 value 2 on 2
// CHECK: }
sched.program @optimizer step {
  sched.event.record 3 value 1 on 1
  sched.event.wait 3 value 1 on 0
  sched.event.record 3 value 2 on 1
  sched.event.wait 3 value 2 on 0
  sched.event.wait 3 value 2 on 2
}

// Marks bracket one part of a micro-batch's work through a stage.
// CHECK-LABEL: sched.program @marked step {
// CHECK-NEXT: sched.mark "W" stage 3 mb 5 on 2
// CHECK-NEXT: sched.mark end "W" stage 3 mb 5 on 2
sched.program @marked step {
  sched.mark "W" stage 3 mb 5 on 2
  sched.mark end "W" stage 3 mb 5 on 2
}

// A program may be empty.
// CHECK-LABEL: sched.program @empty step {
// CHECK-NEXT: }
sched.program @empty step {
}

// A step: one micro-batch's stages, launches and loss readback repeated for
// each of 8 micro-batches, then a readback after them.
// CHECK-LABEL: sched.program @step step {
// CHECK: sched.repeat 8 {
// CHECK: sched.stage %{{.+}} micro_batch 0 on 0 : memref<2x3xi32>
// CHECK: sched.launch "zero" on 0 micro_batch 0 outs(%{{.+}} : memref<2x3x4xf32>)
// CHECK: sched.readback %{{.+}} to 0 on 0 : memref<f32>
// CHECK: }
// CHECK: sched.readback %{{.+}} to 8 on 0 : memref<f32>
sched.program @step step {
  sched.repeat 8 {
    %ids = sched.get_global @tokens : memref<2x3xi32>
    sched.stage %ids micro_batch 0 on 0 : memref<2x3xi32>
    %x = sched.alloc : memref<2x3x4xf32>
    sched.launch "zero" on 0 micro_batch 0 outs(%x : memref<2x3x4xf32>)
    %l = sched.get_global @loss : memref<f32>
    sched.readback %l to 0 on 0 : memref<f32>
  }
  %n = sched.get_global @loss : memref<f32>
  sched.readback %n to 8 on 0 : memref<f32>
}

// Context parallel's ring step inside a micro-batch: a shift along cp, its
// offset kept.
// CHECK-LABEL: sched.program @ring step {
// CHECK: sched.repeat 2 {
// CHECK: sched.collective shift cp(%[[K:.+]] : memref<2x4x8xf32>) into(%{{.+}} : memref<2x4x8xf32>) on 0 {offset = 1 : si32}
// CHECK: sched.collective shift cp(%[[K]] : memref<2x4x8xf32>) into(%{{.+}} : memref<2x4x8xf32>) on 0 {offset = -1 : si32}
sched.program @ring step {
  sched.repeat 2 {
    %k = sched.alloc : memref<2x4x8xf32>
    %k1 = sched.alloc : memref<2x4x8xf32>
    %k2 = sched.alloc : memref<2x4x8xf32>
    sched.collective shift cp(%k : memref<2x4x8xf32>) into(%k1 : memref<2x4x8xf32>) on 0 {offset = 1 : si32}
    sched.collective shift cp(%k : memref<2x4x8xf32>) into(%k2 : memref<2x4x8xf32>) on 0 {offset = -1 : si32}
  }
}
