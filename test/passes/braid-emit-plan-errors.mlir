// RUN: braid-opt %s --braid-emit-plan=output=%t.plan --split-input-file --verify-diagnostics --allow-unregistered-dialect
// RUN: not braid-opt %S/braid-emit-plan.mlir --braid-emit-plan=output=%t/missing/dir/x.plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=WRITE
// WRITE: braid-emit-plan: cannot write

// An unplanned global has no offset.
// expected-error @+1 {{'sched.global' op has no offset: run braid-plan-memory first}}
sched.global @w "parameter" : memref<4xf32> info {name = "w", init = "ones"}

// -----

// Without the loss scalar there is nothing for the runtime to report.
// expected-error @+1 {{needs the @loss, @loss_sum, @grad_norm and @step_skipped scalar globals (run braid-lower-to-sched first)}}
module {
  sched.global @w "parameter" : memref<4xf32> offset(0) info {name = "w", init = "ones", grad = "w", exp_avg = "w", exp_avg_sq = "w"}
}

// -----

// A parameter must name its gradient global.
module {
  // expected-error @+1 {{info.grad does not name a sched.global}}
  sched.global @w "parameter" : memref<4xf32> offset(0) info {name = "w", init = "ones", grad = "nope", exp_avg = "w", exp_avg_sq = "w"}
}

// -----

// A buffer must come from sched.get_global or sched.alloc.
module attributes {braid.model = {}, braid.train = {}, sched.memory = {}} {
  sched.global @loss "scalar" : memref<f32> offset(0) info {role = "loss"}
  sched.global @grad_norm "scalar" : memref<f32> offset(64) info {role = "grad_norm"}
  sched.global @loss_sum "scalar" : memref<f32> offset(128) info {role = "loss_sum"}
  sched.global @step_skipped "scalar" : memref<f32> offset(192) info {role = "step_skipped"}
  // expected-error @+1 {{uses a buffer that is neither a global nor an alloc}}
  sched.program @step {
    %b = "test.buffer"() : () -> memref<4xf32>
    sched.launch "fill" on 0 outs(%b : memref<4xf32>)
  }
}

// -----

// Kernel parameters are integers or floats.
module attributes {braid.model = {}, braid.train = {}, sched.memory = {}} {
  sched.global @loss "scalar" : memref<f32> offset(0) info {role = "loss"}
  sched.global @grad_norm "scalar" : memref<f32> offset(64) info {role = "grad_norm"}
  sched.global @loss_sum "scalar" : memref<f32> offset(128) info {role = "loss_sum"}
  sched.global @step_skipped "scalar" : memref<f32> offset(192) info {role = "step_skipped"}
  sched.program @step {
    %l = sched.get_global @loss : memref<f32>
    // expected-error @+1 {{parameter 'value' is neither an integer nor a float}}
    sched.launch "fill" on 0 outs(%l : memref<f32>) params {value = "zero"}
  }
}

// -----

// The settings of braid-import must be on the module.
// expected-error @+1 {{needs braid.model and braid.train (run braid-import first)}}
module attributes {sched.memory = {}} {
  sched.global @loss "scalar" : memref<f32> offset(0) info {role = "loss"}
  sched.global @grad_norm "scalar" : memref<f32> offset(64) info {role = "grad_norm"}
  sched.global @loss_sum "scalar" : memref<f32> offset(128) info {role = "loss_sum"}
  sched.global @step_skipped "scalar" : memref<f32> offset(192) info {role = "step_skipped"}
}

// -----

// So must the memory report of braid-plan-memory.
// expected-error @+1 {{needs sched.memory (run braid-plan-memory first)}}
module attributes {braid.model = {}, braid.train = {}} {
  sched.global @loss "scalar" : memref<f32> offset(0) info {role = "loss"}
  sched.global @grad_norm "scalar" : memref<f32> offset(64) info {role = "grad_norm"}
  sched.global @loss_sum "scalar" : memref<f32> offset(128) info {role = "loss_sum"}
  sched.global @step_skipped "scalar" : memref<f32> offset(192) info {role = "step_skipped"}
}

// -----

// A parameter's compute copy must be a global.
module {
  // expected-error @+1 {{info.compute_copy does not name a sched.global}}
  sched.global @w "parameter" : memref<4xf32> offset(0) info {name = "w", init = "ones", grad = "w", exp_avg = "w", exp_avg_sq = "w", compute_copy = "w.bf16"}
}

// -----

// ... and a weight copy of the parameter's shape.
module {
  // expected-error @+1 {{info.compute_copy names 'w.bf16', which is not a weight_copy global of the parameter's shape}}
  sched.global @w "parameter" : memref<4xf32> offset(0) info {name = "w", init = "ones", grad = "w", exp_avg = "w", exp_avg_sq = "w", compute_copy = "w.bf16"}
  sched.global @w.bf16 "weight_copy" : memref<2x2xbf16> offset(64) info {of = "w"}
}

// -----

// ... not some other kind of buffer.
module {
  // expected-error @+1 {{info.compute_copy names 'w.grad', which is not a weight_copy global of the parameter's shape}}
  sched.global @w "parameter" : memref<4xf32> offset(0) info {name = "w", init = "ones", grad = "w.grad", exp_avg = "w", exp_avg_sq = "w", compute_copy = "w.grad"}
  sched.global @w.grad "gradient" : memref<4xf32> offset(64) info {of = "w"}
}

// -----

// The precision is fp32 or bf16.
// expected-error @+1 {{braid.train precision 'fp16' is neither fp32 nor bf16}}
module attributes {braid.model = {}, braid.train = {precision = "fp16"}, sched.memory = {}} {
  sched.global @loss "scalar" : memref<f32> offset(0) info {role = "loss"}
  sched.global @grad_norm "scalar" : memref<f32> offset(64) info {role = "grad_norm"}
  sched.global @loss_sum "scalar" : memref<f32> offset(128) info {role = "loss_sum"}
  sched.global @step_skipped "scalar" : memref<f32> offset(192) info {role = "step_skipped"}
}

// -----

// A training setting is never read as a silent 0: the first one missing is
// named.
// expected-error @+1 {{braid.model has no family (a setting braid-import records; run it first)}}
module attributes {braid.model = {}, braid.train = {}, sched.memory = {}} {
  sched.global @loss "scalar" : memref<f32> offset(0) info {role = "loss"}
  sched.global @grad_norm "scalar" : memref<f32> offset(64) info {role = "grad_norm"}
  sched.global @loss_sum "scalar" : memref<f32> offset(128) info {role = "loss_sum"}
  sched.global @step_skipped "scalar" : memref<f32> offset(192) info {role = "step_skipped"}
}

// -----

// The runtime runs programs by kind: @step and @init.
module attributes {braid.model = {}, braid.train = {}, sched.memory = {}} {
  sched.global @loss "scalar" : memref<f32> offset(0) info {role = "loss"}
  sched.global @grad_norm "scalar" : memref<f32> offset(64) info {role = "grad_norm"}
  sched.global @loss_sum "scalar" : memref<f32> offset(128) info {role = "loss_sum"}
  sched.global @step_skipped "scalar" : memref<f32> offset(192) info {role = "step_skipped"}
  // expected-error @+1 {{is neither @step nor @init, the programs a plan runs}}
  sched.program @warm_up {
  }
}
