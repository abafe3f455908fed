// RUN: braid-opt %s -split-input-file -verify-diagnostics

// global: the kind is one of six.
// expected-error @+1 {{'sched.global' op unknown kind 'weight'; expected parameter, gradient, optimizer_state, weight_copy, input or scalar}}
sched.global @w "weight" : memref<4xf32> info {}

// -----

// global: a parameter carries its name.
// expected-error @+1 {{'sched.global' op parameter needs a string 'name' in info}}
sched.global @w "parameter" : memref<4xf32> info {init = "zeros"}

// -----

// global: a parameter carries its initialisation.
// expected-error @+1 {{'sched.global' op parameter needs info.init = normal, zeros or ones}}
sched.global @w "parameter" : memref<4xf32> info {name = "model.norm.weight"}

// -----

// global: an initialisation outside normal, zeros and ones.
// expected-error @+1 {{'sched.global' op parameter needs info.init = normal, zeros or ones}}
sched.global @w "parameter" : memref<4xf32> info {name = "model.norm.weight", init = "uniform"}

// -----

// global: a parameter names its weight copy by a string.
// expected-error @+1 {{'sched.global' op parameter info.compute_copy must be the string name of its weight_copy global}}
sched.global @w "parameter" : memref<4xf32> info {name = "model.norm.weight", init = "ones", compute_copy = @w.bf16}

// -----

// global: a weight copy names its parameter.
// expected-error @+1 {{'sched.global' op weight_copy needs a string 'of' in info naming its parameter}}
sched.global @w.bf16 "weight_copy" : memref<4xbf16> info {}

// -----

// global: a weight copy holds floats.
// expected-error @+1 {{'sched.global' op weight_copy must hold f32 or bf16 values, not 'i32'}}
sched.global @w.i32 "weight_copy" : memref<4xi32> info {of = "w"}

// -----

// global: an input carries its role.
// expected-error @+1 {{'sched.global' op input needs info.role = tokens, labels or positions}}
sched.global @ids "input" : memref<2x3xi32> info {}

// -----

// global: a role outside tokens, labels and positions.
// expected-error @+1 {{'sched.global' op input needs info.role = tokens, labels or positions}}
sched.global @ids "input" : memref<2x3xi32> info {role = "mask"}

// -----

// global: arena offsets are non-negative.
// expected-error @+1 {{'sched.global' op offset must be non-negative}}
sched.global @dw "gradient" : memref<4xf32> offset(-64) info {}

// -----

// global: f64 buffers are not supported.
// expected-error @+1 {{'sched.global' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped memref of 32-bit float or bfloat16 type or 32-bit signless integer values}}
sched.global @m "optimizer_state" : memref<4xf64> info {}

// -----

// program: the body is a single block.
// expected-error @+1 {{'sched.program' op expects region #0 to have 0 or 1 blocks}}
"sched.program"() <{sym_name = "p"}> ({
^bb0:
  "sched.event.record"() <{event = 0 : i32, stream = 0 : i32, value = 1 : i64}> : () -> ()
^bb1:
  "sched.event.record"() <{event = 1 : i32, stream = 0 : i32, value = 1 : i64}> : () -> ()
}) : () -> ()

// -----

// get_global: the symbol must exist.
sched.program @p {
  // expected-error @+1 {{'sched.get_global' op 'missing' does not name a sched.global}}
  %w = sched.get_global @missing : memref<4xf32>
}

// -----

// get_global: the symbol must be a global, not a program.
sched.program @p {
  // expected-error @+1 {{'sched.get_global' op 'p' does not name a sched.global}}
  %w = sched.get_global @p : memref<4xf32>
}

// -----

// get_global: the buffer type matches the global's.
sched.global @w "gradient" : memref<4xf32> info {}
sched.program @p {
  // expected-error @+1 {{'sched.get_global' op type 'memref<4xbf16>' differs from the global's 'memref<4xf32>'}}
  %w = sched.get_global @w : memref<4xbf16>
}

// -----

// get_global: f64 buffers are not supported.
sched.program @p {
  // expected-error @+1 {{'sched.get_global' op result #0 must be statically shaped memref of 32-bit float or bfloat16 type or 32-bit signless integer values, but got 'memref<4xf64>'}}
  %w = sched.get_global @w : memref<4xf64>
}

// -----

// alloc: buffers have static shapes.
sched.program @p {
  // expected-error @+1 {{'sched.alloc' op result #0 must be statically shaped memref of 32-bit float or bfloat16 type or 32-bit signless integer values, but got 'memref<?x4xf32>'}}
  %x = sched.alloc : memref<?x4xf32>
}

// -----

// alloc: an offset is a byte position in the arena.
sched.program @p {
  // expected-error @+1 {{'sched.alloc' op offset must be non-negative}}
  %x = sched.alloc offset(-64) : memref<4xf32>
}

// -----

// launch: the kernel is named.
sched.program @p {
  %x = sched.alloc : memref<4xf32>
  // expected-error @+1 {{'sched.launch' op needs a kernel name}}
  sched.launch "" on 0 outs(%x : memref<4xf32>)
}

// -----

// launch: a kernel that writes nothing.
sched.program @p {
  %x = sched.alloc : memref<4xf32>
  // expected-error @+1 {{'sched.launch' op needs at least one output buffer}}
  sched.launch "gelu" on 0 ins(%x : memref<4xf32>)
}

// -----

// launch: streams are numbered from 0.
sched.program @p {
  %x = sched.alloc : memref<4xf32>
  // expected-error @+1 {{'sched.launch' op stream must be non-negative}}
  sched.launch "zero" on -1 outs(%x : memref<4xf32>)
}

// -----

// launch: operands are memref buffers, not tensors.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'sched.launch' op operand #0 must be variadic of statically shaped memref of 32-bit float or bfloat16 type or 32-bit signless integer values, but got 'tensor<4xf32>'}}
  sched.launch "zero" on 0 outs(%x : tensor<4xf32>)
  return
}

// -----

// event.record: events are numbered from 0.
sched.program @p {
  // expected-error @+1 {{'sched.event.record' op event and stream must be non-negative}}
  sched.event.record -1 value 1 on 0
}

// -----

// event.record: streams are numbered from 0.
sched.program @p {
  // expected-error @+1 {{'sched.event.record' op event and stream must be non-negative}}
  sched.event.record 0 value 1 on -2
}

// -----

// event.wait: events are numbered from 0.
sched.program @p {
  // expected-error @+1 {{'sched.event.wait' op event and stream must be non-negative}}
  sched.event.wait -3 value 1 on 1
}

// -----

// event.wait: streams are numbered from 0.
sched.program @p {
  // expected-error @+1 {{'sched.event.wait' op event and stream must be non-negative}}
  sched.event.wait 0 value 1 on -1
}

// -----

// Events are timelines whose values start at 1.
sched.program @p {
  // expected-error @+1 {{'sched.event.record' op event values start at 1}}
  sched.event.record 0 value 0 on 0
}

// -----

// A wait names a value recorded earlier in program order: a record that
// comes later could leave the stream waiting forever.
sched.program @p {
  // expected-error @+1 {{'sched.event.wait' op waits for event 0 to reach 1, but no instruction before it records that value, so stream 1 could wait forever}}
  sched.event.wait 0 value 1 on 1
  sched.event.record 0 value 1 on 0
}

// -----

// A wait names a value that some record sets exactly.
sched.program @p {
  sched.event.record 0 value 2 on 0
  // expected-error @+1 {{waits for event 0 to reach 1, but no instruction before it records that value}}
  sched.event.wait 0 value 1 on 1
}

// -----

// One stream records an event: with two, which record released a wait
// would depend on which stream finished first.
sched.program @p {
  sched.event.record 0 value 1 on 0
  // expected-error @+1 {{'sched.event.record' op records event 0 on stream 1, but stream 0 records it too; one stream records an event}}
  sched.event.record 0 value 2 on 1
}

// -----

// An event's values rise in program order.
sched.program @p {
  sched.event.record 0 value 2 on 0
  // expected-error @+1 {{'sched.event.record' op records event 0 with value 2 after value 2; an event's values rise in program order}}
  sched.event.record 0 value 2 on 0
}

// -----

// repeat: at least once.
sched.program @p {
  // expected-error @+1 {{'sched.repeat' op repeats at least once}}
  sched.repeat 0 {
  }
}

// -----

// repeat: no events in a body (its iterations would need their own).
sched.program @p {
  sched.repeat 2 {
    // expected-error @+1 {{cannot be in a sched.repeat body}}
    sched.event.record 0 value 1 on 0
  }
}

// -----

// readback: an f32 scalar.
sched.global @x "scalar" : memref<2xf32> info {}
sched.program @p {
  %x = sched.get_global @x : memref<2xf32>
  // expected-error @+1 {{'sched.readback' op reads back an f32 scalar, not 'memref<2xf32>'}}
  sched.readback %x to 0 on 0 : memref<2xf32>
}

// -----

// stage: into a global.
sched.program @p {
  %x = sched.alloc : memref<2xi32>
  // expected-error @+1 {{'sched.stage' op stages into a global (an input), not a transient buffer}}
  sched.stage %x micro_batch 0 on 0 : memref<2xi32>
}
