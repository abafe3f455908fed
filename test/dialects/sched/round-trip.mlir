// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// A parameter carries its name, initialisation and weight decay; info keys print sorted.
// CHECK-LABEL: sched.global @w "parameter" : memref<8x4xf32>
// CHECK-SAME: info {init = "normal", init_std = 2.000000e-02 : f32, name = "model.layers.0.mlp.up_proj.weight", weight_decay = true}
sched.global @w "parameter" : memref<8x4xf32> info {name = "model.layers.0.mlp.up_proj.weight", init = "normal", init_std = 0.02 : f32, weight_decay = true}

// A bf16 parameter initialised to ones, with its arena offset.
// CHECK-LABEL: sched.global @g "parameter" : memref<4xbf16> offset(128) info {init = "ones", name = "model.norm.weight"}
sched.global @g "parameter" : memref<4xbf16> offset(128) info {name = "model.norm.weight", init = "ones"}

// A parameter initialised to zeros.
// CHECK-LABEL: sched.global @b "parameter" : memref<8xf32> info {init = "zeros", name = "model.layers.0.mlp.up_proj.bias"}
sched.global @b "parameter" : memref<8xf32> info {name = "model.layers.0.mlp.up_proj.bias", init = "zeros"}

// A gradient needs no info.
// CHECK-LABEL: sched.global @dw "gradient" : memref<8x4xf32> info {}
sched.global @dw "gradient" : memref<8x4xf32> info {}

// Optimizer state.
// CHECK-LABEL: sched.global @m "optimizer_state" : memref<8x4xf32> offset(0) info {}
sched.global @m "optimizer_state" : memref<8x4xf32> offset(0) info {}

// A parameter of a BF16 plan names the weight copy that compute reads.
// CHECK-LABEL: sched.global @q "parameter" : memref<8x4xf32> info {compute_copy = "q.bf16", init = "normal", name = "model.layers.0.self_attn.q_proj.weight"}
sched.global @q "parameter" : memref<8x4xf32> info {name = "model.layers.0.self_attn.q_proj.weight", init = "normal", compute_copy = "q.bf16"}

// The weight copy names its parameter.
// CHECK-LABEL: sched.global @q.bf16 "weight_copy" : memref<8x4xbf16> offset(256) info {of = "q"}
sched.global @q.bf16 "weight_copy" : memref<8x4xbf16> offset(256) info {of = "q"}

// The init program casts the master into its copy.
// CHECK-LABEL: sched.program @init {
// CHECK: %[[Q:.+]] = sched.get_global @q : memref<8x4xf32>
// CHECK: %[[QB:.+]] = sched.get_global @q.bf16 : memref<8x4xbf16>
// CHECK: sched.launch "cast" on 0 ins(%[[Q]] : memref<8x4xf32>) outs(%[[QB]] : memref<8x4xbf16>)
sched.program @init {
  %q = sched.get_global @q : memref<8x4xf32>
  %qb = sched.get_global @q.bf16 : memref<8x4xbf16>
  sched.launch "cast" on 0 ins(%q : memref<8x4xf32>) outs(%qb : memref<8x4xbf16>)
}

// Token ids are an i32 input.
// CHECK-LABEL: sched.global @tokens "input" : memref<2x3xi32> info {role = "tokens"}
sched.global @tokens "input" : memref<2x3xi32> info {role = "tokens"}

// Labels.
// CHECK-LABEL: sched.global @labels "input" : memref<2x3xi32> info {role = "labels"}
sched.global @labels "input" : memref<2x3xi32> info {role = "labels"}

// Positions.
// CHECK-LABEL: sched.global @positions "input" : memref<2x3xi32> info {role = "positions"}
sched.global @positions "input" : memref<2x3xi32> info {role = "positions"}

// A rank-0 scalar such as the loss.
// CHECK-LABEL: sched.global @loss "scalar" : memref<f32> info {}
sched.global @loss "scalar" : memref<f32> info {}

// A program reads globals, allocates transient buffers and launches kernels.
// CHECK-LABEL: sched.program @micro_batch {
// CHECK: %[[IDS:.+]] = sched.get_global @tokens : memref<2x3xi32>
// CHECK: %[[W:.+]] = sched.get_global @w : memref<8x4xf32>
// CHECK: %[[DW:.+]] = sched.get_global @dw : memref<8x4xf32>
// CHECK: %[[X:.+]] = sched.alloc : memref<2x3x4xf32>
// CHECK: %[[Y:.+]] = sched.alloc offset(96) : memref<2x3x8xf32>
// CHECK: sched.launch "zero" on 0 outs(%[[X]] : memref<2x3x4xf32>)
// CHECK: sched.launch "linear" on 1 ins(%[[X]], %[[W]] : memref<2x3x4xf32>, memref<8x4xf32>) outs(%[[Y]] : memref<2x3x8xf32>){{$}}
// CHECK: sched.launch "linear_grad_weight" on 0 ins(%[[Y]], %[[X]] : memref<2x3x8xf32>, memref<2x3x4xf32>) outs(%[[DW]] : memref<8x4xf32>) params {accumulate = 1 : i64}
// CHECK: }
sched.program @micro_batch {
  %ids = sched.get_global @tokens : memref<2x3xi32>
  %w = sched.get_global @w : memref<8x4xf32>
  %dw = sched.get_global @dw : memref<8x4xf32>
  %x = sched.alloc : memref<2x3x4xf32>
  %y = sched.alloc offset(96) : memref<2x3x8xf32>
  sched.launch "zero" on 0 outs(%x : memref<2x3x4xf32>)
  sched.launch "linear" on 1 ins(%x, %w : memref<2x3x4xf32>, memref<8x4xf32>) outs(%y : memref<2x3x8xf32>)
  sched.launch "linear_grad_weight" on 0 ins(%y, %x : memref<2x3x8xf32>, memref<2x3x4xf32>) outs(%dw : memref<8x4xf32>) params {accumulate = 1 : i64}
}

// Streams are joined by recording an event on one and waiting on another.
// An event is a timeline: stream 1 moves event 3 to 1, then to 2; stream 0
// waits for each value, stream 2 only for the second.
// CHECK-LABEL: sched.program @optimizer {
// CHECK: sched.event.record 3 value 1 on 1
// CHECK: sched.event.wait 3 value 1 on 0
// CHECK: sched.event.record 3 value 2 on 1
// CHECK: sched.event.wait 3 value 2 on 0
// CHECK: sched.event.wait 3 value 2 on 2
// CHECK: }
sched.program @optimizer {
  sched.event.record 3 value 1 on 1
  sched.event.wait 3 value 1 on 0
  sched.event.record 3 value 2 on 1
  sched.event.wait 3 value 2 on 0
  sched.event.wait 3 value 2 on 2
}

// A program may be empty.
// CHECK-LABEL: sched.program @empty {
// CHECK-NEXT: }
sched.program @empty {
}

// A step: one micro-batch's stages, launches and loss readback repeated for
// each of 8 micro-batches, then a readback after them.
// CHECK-LABEL: sched.program @step {
// CHECK: sched.repeat 8 {
// CHECK: sched.stage %{{.+}} micro_batch 0 on 0 : memref<2x3xi32>
// CHECK: sched.launch "zero" on 0 micro_batch 0 outs(%{{.+}} : memref<2x3x4xf32>)
// CHECK: sched.readback %{{.+}} to 0 on 0 : memref<f32>
// CHECK: }
// CHECK: sched.readback %{{.+}} to 8 on 0 : memref<f32>
sched.program @step {
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
