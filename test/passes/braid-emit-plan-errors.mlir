// RUN: braid-opt %s --braid-emit-plan --split-input-file --verify-diagnostics

// An unplanned global has no offset.
// expected-error @+1 {{'sched.global' op has no offset: run braid-plan-memory first}}
sched.global @w "parameter" : memref<4xf32> info {name = "w", init = "ones"}

// -----

// Without the loss scalar there is nothing for the runtime to report.
// expected-error @+1 {{needs the @loss and @grad_norm scalar globals (run braid-lower-to-sched first)}}
module {
  sched.global @w "parameter" : memref<4xf32> offset(0) info {name = "w", init = "ones", grad = "w", exp_avg = "w", exp_avg_sq = "w"}
}

// -----

// A parameter must name its gradient global.
module {
  // expected-error @+1 {{info.grad does not name a sched.global}}
  sched.global @w "parameter" : memref<4xf32> offset(0) info {name = "w", init = "ones", grad = "nope", exp_avg = "w", exp_avg_sq = "w"}
}
