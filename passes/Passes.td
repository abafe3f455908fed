//===- Passes.td - Braid compiler passes -----------------------*- tablegen -*-===//
//
// The training pipeline, in order: braid-import, braid-autodiff,
// braid-lower-to-sched, braid-plan-memory, braid-emit-plan. Each runs alone in
// braid-opt; `braidc` runs them all (`braid-training-pipeline`).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PASSES_TD
#define BRAID_PASSES_TD

include "mlir/Pass/PassBase.td"

def ImportSpecPass : Pass<"braid-import", "mlir::ModuleOp"> {
  let summary = "Build the forward graph of a model spec";
  let description = [{
    Reads a model spec (protobuf text) and fills the empty module with one
    function, `@train_step`, holding the forward graph of one micro-batch in
    the `braid` dialect. Parameters are function arguments carrying a
    `braid.param` dictionary (Hugging Face name, initialisation, weight
    decay, checkpoint layout); token, label and position ids are arguments
    carrying `braid.input`; the single result is the mean loss. The module
    records the model and training settings in `braid.model` and
    `braid.train`, which the plan emitter copies into the plan.

    The graph is the unfused reference of docs/numerics.md, e.g. for one
    Llama attention block:

    ```mlir
    %h, %rstd = braid.rms_norm %x, %g {eps = 1.0e-05 : f32} : ...
    %q = braid.linear %h, %wq : ...
    %qr = braid.rope %q {num_heads = 4 : i64, theta = 1.0e+04 : f32} : ...
    %kr = braid.rope %k {num_heads = 2 : i64, theta = 1.0e+04 : f32} : ...
    %kk = braid.repeat_kv %kr {num_heads = 4 : i64, num_kv_heads = 2 : i64} : ...
    %o, %p = braid.attention %qr, %kk, %vv {...} : ...
    ```
  }];
  let options = [
    Option<"specPath", "spec", "std::string", /*default=*/"\"\"",
           "Path of the model spec (.pbtxt) to import">,
  ];
  let dependentDialects = ["::braid::BraidDialect", "::mlir::func::FuncDialect"];
}

def AutodiffPass : Pass<"braid-autodiff", "mlir::ModuleOp"> {
  let summary = "Append the backward graph, split into input and weight gradients";
  let description = [{
    Reverse-mode differentiation of `@train_step` with respect to every
    `braid.param` argument. Each forward op with weights yields an
    input-gradient op (`*_grad_input`, B) and a weight-gradient op
    (`*_grad_weight`, W); ops without weights yield only the B op. Values with
    several uses (the residual stream, tied embeddings) sum their gradient
    contributions with `braid.add`. The function then returns the loss
    followed by one gradient per parameter, each result tagged with
    `braid.grad_of`.

    Before:
    ```mlir
    %y = braid.linear %x, %w : ...
    ```
    After (backward part):
    ```mlir
    %dx = braid.linear_grad_input %dy, %w : ...
    %dw = braid.linear_grad_weight %dy, %x : ...
    ```
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def LowerToSchedPass : Pass<"braid-lower-to-sched", "mlir::ModuleOp"> {
  let summary = "Turn the training step into per-rank programs of launches";
  let description = [{
    One rank, one compute stream, ops in order. Parameters, their gradients,
    AdamW moments, inputs and the loss/grad-norm scalars become
    `sched.global`s; every other tensor becomes a `sched.alloc`. Every
    `braid` op becomes a `sched.launch` of the kernel of the same name.

    Gradients reach their persistent buffers without extra copies: a weight
    gradient op whose results all feed parameter gradients writes straight
    into the gradient globals with `accumulate = 1`, which also sums tied
    parameters and micro-batches; any other producer is followed by an
    `accumulate` launch. The `cross_entropy_grad_input` scale becomes
    1/num_micro_batches. A second program, `@optimizer`, computes the global
    gradient norm, runs AdamW (with clipping) on every parameter and zeroes
    the gradients.
  }];
  let dependentDialects = ["::braid::sched::SchedDialect",
                           "::mlir::func::FuncDialect"];
}

def PlanMemoryPass : Pass<"braid-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign static arena offsets from buffer liveness";
  let description = [{
    Persistent globals are laid out first, grouped by kind (parameters,
    gradients, optimizer state, inputs, scalars). Transient `sched.alloc`s
    get offsets above them: each program's buffers are live from their first
    to their last launch, and are placed largest first at the lowest offset
    that overlaps no live-range-overlapping buffer already placed. All
    offsets are 64-byte aligned. The module's `sched.memory` attribute
    records the byte counts the plan's memory report carries; with
    `report=true` the pass prints that report.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the memory report to stdout">,
  ];
  let statistics = [
    Statistic<"numTransient", "num-transient", "Transient buffers placed">,
  ];
}

def EmitPlanPass : Pass<"braid-emit-plan", "mlir::ModuleOp"> {
  let summary = "Write the planned sched module as a plan (protobuf)";
  let description = [{
    Serialises globals, allocs (as tensors), programs, the model and
    training settings and the memory report into `braid.plan.Plan`. Refuses
    a module that is not fully planned (an alloc or global without an
    offset). `format=text` writes protobuf text, for reading and tests.
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "Output file ('-' for stdout)">,
    Option<"format", "format", "std::string", /*default=*/"\"binary\"",
           "binary or text">,
  ];
}

#endif // BRAID_PASSES_TD
