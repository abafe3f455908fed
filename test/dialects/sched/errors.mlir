// RUN: braid-opt %s -split-input-file -verify-diagnostics

// global: the kind is one of six.
// expected-error @+1 {{expected one of [parameter, gradient, optimizer_state, weight_copy, input, scalar, buffer] for what a persistent buffer holds, got: weight}}
sched.global @w weight : memref<4xf32>

// -----

// global: a parameter carries its info.
// expected-error @+1 {{'sched.global' op a parameter needs its info <name = ..., init = ..., grad = ..., exp_avg = ..., exp_avg_sq = ...>}}
sched.global @w parameter : memref<4xf32>

// -----

// global: the info names the parameter.
// expected-error @+1 {{struct is missing required parameter: name}}
sched.global @w parameter : memref<4xf32> info <init = zeros, grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: the info says how the parameter is initialised.
// expected-error @+1 {{struct is missing required parameter: init}}
sched.global @w parameter : memref<4xf32> info <name = "model.norm.weight", grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: an initialisation outside normal, zeros and ones.
// expected-error @+2 {{expected one of [normal, zeros, ones] for how a parameter is initialised, got: uniform}}
// expected-error @+1 {{failed to parse Sched_ParamInfoAttr parameter 'init'}}
sched.global @w parameter : memref<4xf32> info <name = "model.norm.weight", init = uniform, grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: the info names the parameter's gradient and moments.
// expected-error @+1 {{struct is missing required parameter: grad}}
sched.global @w parameter : memref<4xf32> info <name = "model.norm.weight", init = ones, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: a normal initialisation has its std.
// expected-error @+1 {{parameter 'model.norm.weight' has init = normal, so it needs a finite positive init_std, not 0}}
sched.global @w parameter : memref<4xf32> info <name = "model.norm.weight", init = normal, grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: the other initialisations have none.
// expected-error @+1 {{parameter 'model.norm.weight' has init = ones, which takes no init_std (0), not}}
sched.global @w parameter : memref<4xf32> info <name = "model.norm.weight", init = ones, init_std = 0.02, grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: the flags are true or false.
// expected-error @+2 {{expected true or false}}
// expected-error @+1 {{failed to parse Sched_ParamInfoAttr parameter 'weight_decay'}}
sched.global @w parameter : memref<4xf32> info <name = "model.norm.weight", init = ones, weight_decay = 1, grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: a parameter names its weight copy by symbol.
// expected-error @+2 {{invalid kind of attribute specified}}
// expected-error @+1 {{failed to parse Sched_ParamInfoAttr parameter 'compute_copy'}}
sched.global @w parameter : memref<4xf32> info <name = "model.norm.weight", init = ones, grad = @g, exp_avg = @m, exp_avg_sq = @v, compute_copy = "w.bf16">

// -----

// global: only parameters carry info.
// expected-error @+1 {{'sched.global' op a gradient has no info; only parameters do}}
sched.global @w.grad gradient of @w : memref<4xf32> info <name = "w", init = ones, grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: a parameter has no role.
// expected-error @+1 {{'sched.global' op a parameter has no role; only inputs and scalars do}}
sched.global @w parameter role tokens : memref<4xf32> info <name = "w", init = ones, grad = @g, exp_avg = @m, exp_avg_sq = @v>

// -----

// global: a weight copy names its parameter.
// expected-error @+1 {{'sched.global' op a weight_copy names the parameter it belongs to: `of @NAME`}}
sched.global @w.bf16 weight_copy : memref<4xbf16>

// -----

// global: so does an optimizer state.
// expected-error @+1 {{'sched.global' op an optimizer_state names the parameter it belongs to: `of @NAME`}}
sched.global @w.exp_avg optimizer_state : memref<4xf32>

// -----

// global: an input belongs to no parameter.
// expected-error @+1 {{'sched.global' op an input belongs to no parameter; only gradients, optimizer states, weight copies and buffers' accumulators name one}}
sched.global @ids input of @w role tokens : memref<2x3xi32>

// -----

// global: a weight copy holds floats.
// expected-error @+1 {{'sched.global' op weight_copy must hold f32 or bf16 values, not 'i32'}}
sched.global @w.i32 weight_copy of @w : memref<4xi32>

// -----

// global: an input carries its role.
// expected-error @+1 {{'sched.global' op the role of an input is tokens, labels or positions}}
sched.global @ids input : memref<2x3xi32>

// -----

// global: a role outside the seven.
// expected-error @+1 {{expected one of [tokens, labels, positions, loss, loss_sum, grad_norm, step_skipped] for the role of an input or a scalar global, got: mask}}
sched.global @ids input role mask : memref<2x3xi32>

// -----

// global: the role of an input is not a scalar's.
// expected-error @+1 {{'sched.global' op the role of an input is tokens, labels or positions, not loss}}
sched.global @ids input role loss : memref<2x3xi32>

// -----

// global: nor the other way round.
// expected-error @+1 {{'sched.global' op the role of a scalar is loss, loss_sum, grad_norm or step_skipped, not tokens}}
sched.global @loss scalar role tokens : memref<f32>

// -----

// global: arena offsets are non-negative.
// expected-error @+1 {{'sched.global' op offset must be non-negative}}
sched.global @dw gradient of @w : memref<4xf32> offset(-64)

// -----

// global: f64 buffers are not supported.
// expected-error @+1 {{'sched.global' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped memref of 32-bit float or bfloat16 type or 32-bit signless integer values}}
sched.global @m optimizer_state of @w : memref<4xf64>

// -----

// program: the kind says when the runtime runs it.
// expected-error @+1 {{expected one of [step, init] for when the runtime runs a program, got: warm_up}}
sched.program @p warm_up {
}

// -----

// program: the kind is not optional.
// expected-error @+1 {{expected keyword for when the runtime runs a program}}
sched.program @p {
}

// -----

// program: the body is a single block.
// expected-error @+1 {{'sched.program' op expects region #0 to have 0 or 1 blocks}}
"sched.program"() <{kind = #sched<program_kind step>, sym_name = "p"}> ({
^bb0:
  "sched.event.record"() <{event = 0 : i32, stream = 0 : i32, value = 1 : i64}> : () -> ()
^bb1:
  "sched.event.record"() <{event = 1 : i32, stream = 0 : i32, value = 1 : i64}> : () -> ()
}) : () -> ()

// -----

// get_global: the symbol must exist.
sched.program @p step {
  // expected-error @+1 {{'sched.get_global' op 'missing' does not name a sched.global}}
  %w = sched.get_global @missing : memref<4xf32>
}

// -----

// get_global: the symbol must be a global, not a program.
sched.program @p step {
  // expected-error @+1 {{'sched.get_global' op 'p' does not name a sched.global}}
  %w = sched.get_global @p : memref<4xf32>
}

// -----

// get_global: the buffer type matches the global's.
sched.global @w gradient of @v : memref<4xf32>
sched.program @p step {
  // expected-error @+1 {{'sched.get_global' op type 'memref<4xbf16>' differs from the global's 'memref<4xf32>'}}
  %w = sched.get_global @w : memref<4xbf16>
}

// -----

// get_global: f64 buffers are not supported.
sched.program @p step {
  // expected-error @+1 {{'sched.get_global' op result #0 must be statically shaped memref of 32-bit float or bfloat16 type or 32-bit signless integer values, but got 'memref<4xf64>'}}
  %w = sched.get_global @w : memref<4xf64>
}

// -----

// alloc: buffers have static shapes.
sched.program @p step {
  // expected-error @+1 {{'sched.alloc' op result #0 must be statically shaped memref of 32-bit float or bfloat16 type or 32-bit signless integer values, but got 'memref<?x4xf32>'}}
  %x = sched.alloc : memref<?x4xf32>
}

// -----

// alloc: an offset is a byte position in the arena.
sched.program @p step {
  // expected-error @+1 {{'sched.alloc' op offset must be non-negative}}
  %x = sched.alloc offset(-64) : memref<4xf32>
}

// -----

// launch: the kernel is named.
sched.program @p step {
  %x = sched.alloc : memref<4xf32>
  // expected-error @+1 {{'sched.launch' op needs a kernel name}}
  sched.launch "" on 0 outs(%x : memref<4xf32>)
}

// -----

// launch: a kernel that writes nothing.
sched.program @p step {
  %x = sched.alloc : memref<4xf32>
  // expected-error @+1 {{'sched.launch' op needs at least one output buffer}}
  sched.launch "gelu" on 0 ins(%x : memref<4xf32>)
}

// -----

// launch: streams are numbered from 0.
sched.program @p step {
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
sched.program @p step {
  // expected-error @+1 {{'sched.event.record' op event and stream must be non-negative}}
  sched.event.record -1 value 1 on 0
}

// -----

// event.record: streams are numbered from 0.
sched.program @p step {
  // expected-error @+1 {{'sched.event.record' op event and stream must be non-negative}}
  sched.event.record 0 value 1 on -2
}

// -----

// event.wait: events are numbered from 0.
sched.program @p step {
  // expected-error @+1 {{'sched.event.wait' op event and stream must be non-negative}}
  sched.event.wait -3 value 1 on 1
}

// -----

// event.wait: streams are numbered from 0.
sched.program @p step {
  // expected-error @+1 {{'sched.event.wait' op event and stream must be non-negative}}
  sched.event.wait 0 value 1 on -1
}

// -----

// Events are timelines whose values start at 1.
sched.program @p step {
  // expected-error @+1 {{'sched.event.record' op event values start at 1}}
  sched.event.record 0 value 0 on 0
}

// -----

// A wait names a value recorded earlier in program order: a record that
// comes later could leave the stream waiting forever.
sched.program @p step {
  // expected-error @+1 {{'sched.event.wait' op waits for event 0 to reach 1, but no instruction before it records that value, so stream 1 could wait forever}}
  sched.event.wait 0 value 1 on 1
  sched.event.record 0 value 1 on 0
}

// -----

// A wait names a value that some record sets exactly.
sched.program @p step {
  sched.event.record 0 value 2 on 0
  // expected-error @+1 {{waits for event 0 to reach 1, but no instruction before it records that value}}
  sched.event.wait 0 value 1 on 1
}

// -----

// One stream records an event: with two, which record released a wait
// would depend on which stream finished first.
sched.program @p step {
  sched.event.record 0 value 1 on 0
  // expected-error @+1 {{'sched.event.record' op records event 0 on stream 1, but stream 0 records it too; one stream records an event}}
  sched.event.record 0 value 2 on 1
}

// -----

// An event's values rise in program order.
sched.program @p step {
  sched.event.record 0 value 2 on 0
  // expected-error @+1 {{'sched.event.record' op records event 0 with value 2 after value 2; an event's values rise in program order}}
  sched.event.record 0 value 2 on 0
}

// -----

// repeat: at least once.
sched.program @p step {
  // expected-error @+1 {{'sched.repeat' op repeats at least once}}
  sched.repeat 0 {
  }
}

// -----

// repeat: no events in a body (its iterations would need their own).
sched.program @p step {
  sched.repeat 2 {
    // expected-error @+1 {{cannot be in a sched.repeat body}}
    sched.event.record 0 value 1 on 0
  }
}

// -----

// readback: an f32 scalar.
sched.global @x scalar role loss : memref<2xf32>
sched.program @p step {
  %x = sched.get_global @x : memref<2xf32>
  // expected-error @+1 {{'sched.readback' op reads back an f32 scalar, not 'memref<2xf32>'}}
  sched.readback %x to 0 on 0 : memref<2xf32>
}

// -----

// stage: into a global.
sched.program @p step {
  %x = sched.alloc : memref<2xi32>
  // expected-error @+1 {{'sched.stage' op stages into a global (an input), not a transient buffer}}
  sched.stage %x micro_batch 0 on 0 : memref<2xi32>
}

// -----

// mark: of F, B or W.
sched.program @p step {
  // expected-error @+1 {{'sched.mark' op part must be "F", "B" or "W", not "BW"}}
  sched.mark "BW" stage 0 mb 0 on 0
}

// -----

// collective: a shift says how far it moves its buffers.
sched.program @p step {
  %x = sched.alloc : memref<4xf32>
  %y = sched.alloc : memref<4xf32>
  // expected-error @+1 {{'sched.collective' op shift needs a non-zero offset}}
  sched.collective shift cp(%x : memref<4xf32>) into(%y : memref<4xf32>) on 0
}

// -----

// collective: a shift's output is another buffer of its buffer's type.
sched.program @p step {
  %x = sched.alloc : memref<4xf32>
  %y = sched.alloc : memref<8xf32>
  // expected-error @+1 {{'sched.collective' op shifts 'memref<4xf32>' into 'memref<8xf32>'; each output is another buffer of its buffer's type}}
  sched.collective shift cp(%x : memref<4xf32>) into(%y : memref<8xf32>) on 0 {offset = 1 : si32}
}

// -----

// collective: only a shift has an offset.
sched.program @p step {
  %x = sched.alloc : memref<4xf32>
  %y = sched.alloc : memref<8xf32>
  // expected-error @+1 {{'sched.collective' op only shift has an offset}}
  sched.collective all_gather cp(%x : memref<4xf32>) into(%y : memref<8xf32>) on 0 {offset = 1 : si32}
}

// -----

// repeat: collectives along dp reduce once per step, outside the body.
sched.global @g.grad gradient of @g : memref<4xf32>
sched.program @p step {
  sched.repeat 2 {
    %x = sched.get_global @g.grad : memref<4xf32>
    // expected-error @+1 {{'sched.collective' op cannot be in a sched.repeat body, which holds launches, stages, readbacks, buffers, global reads and collectives along tp, cp and ep only}}
    sched.collective all_reduce_sum dp(%x : memref<4xf32>) on 1
  }
}
