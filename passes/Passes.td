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
    the `braid` dialect. It is the model's one pipeline stage, marked
    `braid.stage = #braid.stage<0>`; later passes find it by that mark
    (dialects/braid/StageFunctions.h), not by its name. Token, label and
    position ids are arguments carrying `braid.input`, parameters arguments
    carrying `braid.param` (Hugging Face name, initialisation, weight decay,
    checkpoint layout), both typed attributes (BraidAttrs.td):
    ```mlir
    func.func @train_step(%arg0: tensor<8x64xi32> {braid.input = #braid.input<tokens>}, ...,
        %arg2: tensor<256x64xf32> {braid.param = #braid.param<name = "model.embed_tokens.weight", init = normal, init_std = 2.000000e-02, weight_decay = true, checkpoint_transposed = false>}, ...)
        -> (tensor<f32> {braid.loss}) attributes {braid.stage = #braid.stage<0>}
    ```
    The single result is the mean loss. The module
    records the model and training settings in the typed attributes
    `braid.model` and `braid.train` (BraidAttrs.td), which the plan emitter
    copies into the plan:
    ```mlir
    module attributes {braid.model = #braid.model<family = llama, vocab_size = 256, ...>,
                       braid.name = "llama-tiny",
                       braid.train = #braid.train<seed = 1234, ..., decay = cosine, min_lr = 3.000000e-04, precision = fp32>} {
    ```

    Every op is marked with the layer it belongs to: `#braid.layer<L>` for
    transformer layer L, `#braid.layer<embedding>` before the first layer,
    `#braid.layer<loss>` after the last (final norm, head, loss):
    ```mlir
    %q = braid.linear %h, %wq {braid.layer = #braid.layer<0>} : ...
    ```

    With `train.precision: BF16` activations are bf16, parameters stay f32
    arguments, and each parameter is cast once at the top of the step; all
    compute reads the cast. `braid.train` then records `precision = bf16`:

    ```mlir
    %wq = braid.cast %arg5 : (tensor<64x64xf32>) -> tensor<64x64xbf16>
    ...
    %q = braid.linear %h, %wq : (tensor<8x64x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64x64xbf16>
    ```

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
    (marks left out).
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
    Reverse-mode differentiation of the stage function (the one
    `braid.stage` function of a one-stage module) with respect to every
    `braid.param` argument. Each forward op's gradient rule is its
    `DifferentiableOp::buildGradient` (the interface is declared in
    BraidBase.td); weight-gradient ops carry the `WeightGradient` trait.
    Each forward op with weights yields an
    input-gradient op (`*_grad_input`, B) and a weight-gradient op
    (`*_grad_weight`, W); ops without weights yield only the B op. Values with
    several uses (the residual stream, tied embeddings) sum their gradient
    contributions with `braid.add`. The function then returns the loss
    followed by one gradient per parameter, each result tagged with
    `braid.grad_of` and the parameter's name:
    ```mlir
    -> (tensor<f32> {braid.loss}, tensor<16x8xf32> {braid.grad_of = "emb"}, ...)
    ```

    Every op gets its phase: `forward` for the ops there were, and for the
    ops autodiff adds `weight_grad` (W ops, and sums of their results) or
    `input_grad`; added ops take the layer of the op they differentiate.

    Before:
    ```mlir
    %y = braid.linear %x, %w {braid.layer = #braid.layer<0>} : ...
    ```
    After:
    ```mlir
    %y = braid.linear %x, %w {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<forward>} : ...
    // backward
    %dx = braid.linear_grad_input %dy, %w {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<input_grad>} : ...
    %dw = braid.linear_grad_weight %dy, %x {braid.layer = #braid.layer<0>, braid.phase = #braid.phase<weight_grad>} : ...
    ```

    Mixed precision: when the weight is `braid.cast` of an f32 parameter,
    the W op yields the parameter's f32 gradient directly from the bf16
    activations and gradients, with no cast back:
    ```mlir
    %wb = braid.cast %w : (tensor<8x4xf32>) -> tensor<8x4xbf16>
    %y = braid.linear %x, %wb : (tensor<2x4xbf16>, tensor<8x4xbf16>) -> tensor<2x8xbf16>
    // backward
    %dx = braid.linear_grad_input %dy, %wb : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
    %dw = braid.linear_grad_weight %dy, %x : (tensor<2x8xbf16>, tensor<2x4xbf16>) -> tensor<8x4xf32>
    ```
    Any other cast passes its gradient back through the opposite cast.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def ShardPass : Pass<"braid-shard", "mlir::ModuleOp"> {
  let summary = "Lay the step out over the context- and tensor-parallel ranks";
  let description = [{
    Where braid.mesh has cp > 1, first cuts every sequence over the CP ranks
    (ShardContext.cpp): each rank keeps two chunks of 2 x CP, r and
    2 x CP - 1 - r, so causal attention's work is balanced. The inputs are
    taken apart (`braid.take_part` along cp), every activation's sequence
    dimension shrinks to the rank's part, RoPE and dropout learn their
    positions in the whole sequence (`cp`, `cp_dim`), and attention reaches
    the other ranks' keys: by ring attention, CP flash-attention steps over
    key and value blocks passed on by `braid.comm.shift` and joined by
    `braid.attention_merge` (backward passes the blocks and their
    gradients back the other way), or, with braid.cp_all_gather, by
    gathering the keys and values along the sequence and reduce-scattering
    their gradients:

    ```mlir
    %o0, %l0 = braid.flash_attention %q, %k, %v {cp = true, cp_kv_step = 0 : i64, ...}
    %k1 = braid.comm.shift %k {axis = #braid.axis<cp>, offset = 1 : i64} : ...
    %v1 = braid.comm.shift %v {axis = #braid.axis<cp>, offset = 1 : i64} : ...
    %o1, %l1 = braid.flash_attention %q, %k1, %v1 {cp = true, cp_kv_step = 1 : i64, ...}
    %o, %l = braid.attention_merge %o0, %l0, %o1, %l1 {num_heads = 4 : i64} : ...
    ```

    Weight gradients stay whole: each rank's is its tokens' part of the
    sum, which braid-lower-to-sched sums over CP.

    Where braid.mesh has tp > 1, it then propagates a layout (replicated, split
    along one dimension, or partial: a whole-shaped part of a sum) through
    the differentiated step in program order, Megatron-LM's way: a linear
    over a replicated input is column-parallel, one over a split input
    row-parallel; the token embedding and the LM head are split along the
    vocabulary; norms and residual adds read replicated values. A partial
    value that an op reads whole is summed by a `braid.comm.all_reduce`
    right after it is made; the cross-entropy over vocabulary-split logits
    becomes `braid.cross_entropy_stats`, an all-gather of three numbers per
    token and `braid.cross_entropy_combine`. Types become each rank's own,
    and every op and parameter records its layout in `braid.tp`:

    ```mlir
    %q = braid.linear %h, %wq {braid.tp = [#braid.tp<split, dim = 2, blocks = 1>]}
        : (tensor<8x64x64xf32>, tensor<32x64xf32>) -> tensor<8x64x32xf32>
    %o = braid.linear %a, %wo {braid.tp = [#braid.tp<partial, dim = 0, blocks = 1>]}
        : (tensor<8x64x32xf32>, tensor<64x32xf32>) -> tensor<8x64x64xf32>
    %s = braid.comm.all_reduce %o {axis = #braid.axis<tp>} : ...
    ```

    A module without a CP or TP group is left as it is.
  }];
  let dependentDialects = ["::braid::BraidDialect"];
}

def RecomputePass : Pass<"braid-recompute", "mlir::ModuleOp"> {
  let summary = "Compute forward values again in the backward instead of keeping them";
  let description = [{
    Under a policy (the `policy` option, or the module's `braid.recompute`
    from the spec's compile.recompute; docs/memory.md "Recompute"), after
    braid-partition (or, with `auto`, the one per pipeline rank of least
    recompute FLOPs whose plan fits the module's braid.memory_budget, each
    candidate planned on a copy by the passes that follow: `fusion` names
    the compilation's fusions for them): `full` and `uniform-N` take the layers of each
    pipeline stage in groups (1 or N consecutive layers), `block-N` each
    stage's first N layers one by one, and a list of op kinds (`selective`
    for the attention core, `norm`, `activation`, op names) the ops of
    those kinds in each layer. Policies separated by `|` apply one per
    pipeline rank or one per stage.
    In each group, the forward ops whose results a backward op reads, and
    the group's ops they read in turn, are cloned right before the first
    backward op that reads one of them, marked `braid.recomputed` and
    phase `input_grad`; the backward ops read the clones. A group's op
    that a forward op outside the group reads (its output) is kept and
    never cloned, and so is what the group reads from outside (its input,
    the weights): the checkpoints. Clones keep their attributes, so fused
    ops recompute fused and dropout draws the same mask. The numbers do
    not change.

    With the module's `braid.moe_adaptive_rows` (K, from the spec's
    model.moe.adaptive_recompute) each MoE block's gate and up GEMMs that
    the policy keeps are adapted after it: the forward keeps their first
    K rows (`braid.moe_keep_rows`), and the backward clones them with
    `recompute_above = K` (they compute only when the rank received more
    rows) and reads `braid.moe_restore_rows` of the two, then the SwiGLU
    cloned from those (docs/moe.md, "Adaptive recompute").

    ```mlir
    %y, %rstd = braid.rms_norm %x, %w {braid.phase = #braid.phase<forward>}
    ...
    %y2, %rstd2 = braid.rms_norm %x, %w {braid.phase = #braid.phase<input_grad>, braid.recomputed}
    %dx = braid.rms_norm_grad_input %dy, %x, %w, %rstd2 ...
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "none, auto, full, selective, uniform-N, block-N or op kinds "
           "(default: the module's braid.recompute, else none)">,
    Option<"fusion", "fusion", "std::string", /*default=*/"\"none\"",
           "The fusions of the compilation (docs/fusion.md), with which "
           "auto plans its candidates">,
    Option<"compare", "compare", "bool", /*default=*/"false",
           "Also plan the module without recompute, for the memory "
           "report's saving">,
  ];
  let statistics = [
    Statistic<"numRecomputed", "num-recomputed", "Forward ops cloned into the backward">,
    Statistic<"numAdapted", "num-adapted", "Expert GEMMs kept or recomputed at run time">,
  ];
}

def PartitionPass : Pass<"braid-partition", "mlir::ModuleOp"> {
  let summary = "Cut the layers into pipeline stages, padded with empty layers";
  let description = [{
    Where the module has `braid.pipeline` (pipeline_parallel above 1), cuts
    the model's layers into the pipeline's stages in model order (P x V of
    them, V chunks per rank; two per rank for DualPipeV) and records them
    in `braid.partition`, one dictionary per stage (docs/pipeline.md):

    ```mlir
    module attributes {braid.partition = [{embedding, first = 0 : i64, layers = 3 : i64, padding = 1 : i64},
        {first = 3 : i64, layers = 4 : i64, padding = 0 : i64}, ...,
        {first = 11 : i64, layers = 3 : i64, loss, padding = 1 : i64} ], ...}
    ```

    With the spec's `pipeline_layout` the stages are the layout's.
    Otherwise every stage has ceil(layers / stages) slots, and the empty
    ones (padding, which runs nothing and holds no memory) go one at a time
    to the stage that costs most, counting the embedding and the loss (its
    LM head) at their forward FLOPs; a stage keeps one layer at least.
    More stages than layers is an error. A module without
    `braid.pipeline` is left as it is.
  }];
}

def SchedulePass : Pass<"braid-schedule", "mlir::ModuleOp"> {
  let summary = "Order each pipeline rank's F, B and W, and prove it cannot deadlock";
  let description = [{
    Where the module has `braid.pipeline`, writes each rank's order of
    forwards (F), input gradients (B), weight gradients (W), whole
    backwards (BW) and overlapped pairs (F+BW) for the step's micro-batches
    in `braid.schedule`, from the family `braid.pipeline` names (GPipe,
    1F1B, interleaved 1F1B, ZB-H1, DualPipeV; docs/pipeline.md):

    ```mlir
    module attributes {braid.schedule = {micro_batches = 3 : i64,
        ranks = ["F0 F1 BW0 F2 BW1 BW2", "F0 BW0 F1 BW1 F2 BW2"] }, ...}
    ```

    A module that already has `braid.schedule` keeps its orders (to check
    one written by hand). Either way the schedule is then run in the
    pipeline's model of execution (passes/pipeline/Simulate.h): every
    send must meet its receive and no rank may wait forever. A schedule
    that fails is an error naming the rank, the micro-batch and the entry.
  }];
}

def LowerToSchedPass : Pass<"braid-lower-to-sched", "mlir::ModuleOp"> {
  let summary = "Turn the training step into the step program of a stage";
  let description = [{
    One rank, one compute stream, ops in order. Parameters, their gradients,
    AdamW moments, inputs and the loss, loss-sum, grad-norm and
    step-skipped scalars become
    `sched.global`s; every other tensor becomes a `sched.alloc`. Every
    `braid` op becomes a `sched.launch` of the kernel of the same name.
    Every argument of the stage function is a `braid.param`, whose
    `#braid.param` becomes the global's `#sched.param_info`, or a
    `braid.input`, whose role names the input global.

    The one program `@step` is a whole optimizer step in the plain
    schedule: it zeroes the gradients and the loss sum, then a
    `sched.repeat` over the step's micro-batches states one micro-batch
    once (its inputs' `sched.stage`, its launches, its loss's
    `sched.readback` into slot i in iteration i), then the optimizer runs
    and the norm and the skipped flag are read back. Each global states its
    kind and what belongs to it, each program its kind:

    ```mlir
    sched.global @w parameter : memref<8x4xf32> info <name = "w", init = normal, init_std = 2.000000e-02, weight_decay = true, grad = @w.grad, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
    sched.global @w.grad gradient of @w : memref<8x4xf32>
    sched.global @tokens input role tokens : memref<2x4xi32>
    sched.global @loss scalar role loss : memref<f32>
    sched.program @step step {
      sched.launch "fill" on 0 outs(%g0 : ...) ...
      sched.repeat 4 {
        sched.stage %tokens micro_batch 0 on 0 : memref<2x4xi32>
        sched.launch "embedding" on 0 ins(%table, %tokens : ...) outs(%x : ...)
        ...
        sched.readback %loss to 0 on 0 : memref<f32>
      }
      sched.launch "grad_norm" on 0 ...
      sched.readback %norm to 4 on 0 : memref<f32>
      sched.readback %skipped to 5 on 0 : memref<f32>
    }
    ```

    Gradients reach their persistent buffers without extra copies: a weight
    gradient op whose results all feed parameter gradients writes straight
    into the gradient globals with `accumulate = 1`, which also sums tied
    parameters and micro-batches; any other producer is followed by an
    `accumulate` launch. The `cross_entropy_grad_input` scale becomes
    1/num_micro_batches, and each micro-batch adds its loss to `@loss_sum`.
    The optimizer computes the global gradient norm, decides with
    `step_guard` whether the step is finite (the loss sum and the norm) and
    runs AdamW (with clipping) on every parameter unless it is not. The
    decision stays on the device:

    ```mlir
    sched.launch "grad_norm" on 0 ins(%g0, %g1 : ...) outs(%norm : memref<f32>)
    sched.launch "step_guard" on 0 ins(%sum, %norm : memref<f32>, memref<f32>) outs(%skip : memref<f32>)
    sched.launch "adamw" on 0 ins(%g0, %norm, %skip : ...) outs(%w0, %m0, %v0 : ...)
    ```

    Data parallel (`braid.mesh` with `dp` above 1): the scale is
    1/(num_micro_batches x dp), and after the micro-batches a
    `sched.collective all_reduce_sum dp` on the communication stream sums
    every gradient and `@loss_sum` over the ranks, between two events:

    ```mlir
    sched.event.record 1 value 1 on 0
    sched.event.wait 1 value 1 on 1
    sched.collective all_reduce_sum dp(%g0, %g1, %sum : ...) on 1
    sched.event.record 2 value 1 on 1
    sched.event.wait 2 value 1 on 0
    ```

    The `braid.cast` of an f32 parameter (BF16 precision) is not a launch:
    it becomes a persistent `weight_copy` global `@NAME.bf16`, named by the
    parameter's `compute_copy`, which the micro-batches read. A program
    `@init` (run once after the parameters are initialised or restored)
    and the end of `@step` write it from the master:
    ```mlir
    sched.global @w.bf16 weight_copy of @w : memref<8x4xbf16>
    sched.program @init init {
      %w = sched.get_global @w : memref<8x4xf32>
      %c = sched.get_global @w.bf16 : memref<8x4xbf16>
      sched.launch "cast" on 0 ins(%w : memref<8x4xf32>) outs(%c : memref<8x4xbf16>)
    }
    ```
  }];
  let options = [
    Option<"optimizerStream", "optimizer-stream", "unsigned", /*default=*/"0",
           "Stream of the optimizer's launches and readbacks; on a stream "
           "other than 0 it waits, through an event, for the micro-batches">,
  ];
  let dependentDialects = ["::braid::sched::SchedDialect",
                           "::mlir::func::FuncDialect"];
}

def LowerPipelinePass : Pass<"braid-lower-pipeline", "mlir::ModuleOp"> {
  let summary = "Split the step into one program per pipeline rank, in the schedule's order";
  let description = [{
    Where the module has `braid.partition` and `braid.schedule`, turns
    braid-lower-to-sched's step (one `sched.repeat` of the whole model's
    micro-batch) into one nested module per pipeline rank, marked
    `braid.pipeline_rank`, holding the globals the rank owns (its stages'
    parameters, gradients and moments) and the shared inputs and scalars,
    its init program and its step program. The step states each entry of
    the rank's order (braid.schedule): the F, B or W launches of that
    micro-batch through that stage, the inputs staged again before each
    piece that reads them, and the activations and gradients its
    neighbours exchange as `sched.send` / `sched.recv` on streams of their
    own (docs/pipeline.md, "The step program"):

    ```mlir
    module @pp1 attributes {braid.pipeline_rank = 1 : i64, ...} {
      sched.program @step step {
        %h = sched.alloc : memref<1x16x64xf32>
        sched.recv %h from -1 channel 0 on 1 : memref<1x16x64xf32>
        sched.event.record 2 value 1 on 1
        sched.event.record 1 value 1 on 0
        sched.event.wait 2 value 1 on 0
        sched.launch "rms_norm" on 0 micro_batch 0 ins(%h, ...) ...
        ...
        sched.send %g to -1 channel 1 on 2 : memref<1x16x64xf32>
        ...
        sched.collective all_reduce_sum pp(%loss_sum : memref<f32>) on 0
        ...
      }
    }
    ```

    After the micro-batches the loss sum is all-reduced over the pipeline,
    and the gradient norm is the norm of the ranks' norms, gathered over
    it. A module without `braid.schedule` is left as it is.
  }];
}

def OverlapPass : Pass<"braid-overlap", "mlir::ModuleOp"> {
  let summary = "Reduce gradient buckets while the last micro-batch's backward runs";
  let description = [{
    With `braid.tp_comm_chunks` it first hides the TP group's sums
    (passes/TpOverlap.cpp): each row-parallel GEMM and the all-reduce of
    its output run in pieces over `sched.view`s, a piece summed on the TP
    stream while the next computes (events 5 and 6); each backward sum runs
    on the TP stream behind the weight-gradient launches that preceded it.
    Under sequence parallel each all-gather along the sequence becomes a
    ring of shifts whose blocks the GEMMs reading it compute on as they
    arrive, and each reduce-scatter a ring whose steps compute one part's
    rows, add the received partial sum and pass it on; backward's
    re-gathers for the weight gradients are passed round the ring on the
    TP stream ahead of where they are read. This TP part also runs on the
    pipeline ranks' stage programs (nested modules); the rest does not.

    With `braid.ep_comm_overlap` it then runs expert parallel's collectives
    along ep on a stream of their own (the first free after the TP part's;
    the first free event pair, from 5, hands work over and back), in every
    step and stage program, and orders each layer's stream-0 ops so that
    the compute that needs no exchange runs while one is in flight
    (passes/EpOverlap.cpp): in the forward the shared expert and the
    router's losses beside the dispatch and the combine, in the backward
    the router's and the shared expert's gradients beside the output
    gradient's dispatch, and the experts' weight gradients beside the
    combine of their input gradients. Every buffer keeps the order of its
    readers and writers.

    Runs on braid-lower-to-sched's data-parallel step, whose gradients are
    summed by the collectives of one hand-over after every micro-batch (or,
    with ZeRO stage 2, of one hand-over after each micro-batch: each is
    split as below, and stream 0 keeps at most two buckets of transient
    gradients in flight; docs/passes.md). The last
    micro-batch is taken out of the `sched.repeat` (the repeat runs one
    iteration fewer, or goes when nothing is left), so that its launches
    have their own places in the program. Its gradients become final one by
    one as its backward runs; they are grouped, in that order, into buckets
    of at least `bucket-mb` MiB (0: one gradient per bucket), and each
    bucket is summed on the communication stream as soon as the launch that
    last writes one of its gradients is done, while stream 0 goes on with
    the backward. Event 1 counts the buckets handed over (stream 0 raises
    it to k after bucket k's last writer; the communication stream waits for
    k); the loss sum goes with the last bucket, after the micro-batch adds
    its loss; event 2 counts the buckets done, and stream 0 waits for the
    last before the optimizer.

    Before (braid-lower-to-sched) and after, with two buckets:

    ```mlir
    sched.repeat 2 { ...stages, launches, readback to 0... }
    sched.event.record 1 value 1 on 0
    sched.event.wait 1 value 1 on 1
    sched.collective all_reduce_sum dp(%g0, %g1, %g2, %sum : ...) on 1
    sched.event.record 2 value 1 on 1
    sched.event.wait 2 value 1 on 0
    ```
    ```mlir
    sched.repeat 1 { ... }
    ...launches of micro-batch 1...
    sched.launch "linear_grad_weight" on 0 micro_batch 1 ... outs(%g2 : ...)
    sched.event.record 1 value 1 on 0
    sched.event.wait 1 value 1 on 1
    sched.collective all_reduce_sum dp(%g2 : ...) on 1
    ...the rest of the backward...
    sched.launch "accumulate" on 0 micro_batch 1 ins(%loss : ...) outs(%sum : ...)
    sched.event.record 1 value 2 on 0
    sched.event.wait 1 value 2 on 1
    sched.collective all_reduce_sum dp(%g1, %g0, %sum : ...) on 1
    sched.event.record 2 value 1 on 1
    sched.event.wait 2 value 1 on 0
    ```

    A step without a data-parallel reduction is left as it is.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"-1",
           "Least bucket size in MiB (0: one gradient per bucket); -1: the "
           "module's braid.bucket_mb (the spec's parallel.bucket_mb)">,
    Option<"commChunks", "comm-chunks", "int64_t", /*default=*/"-1",
           "Pieces each bucket's collective is cut into, each handed over "
           "when its own buffers are final; -1: the module's "
           "braid.comm_chunks (the spec's parallel.comm_chunks), or 1">,
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "Gradient buckets reduced">,
    Statistic<"tpChunkedGemms", "tp-chunked-gemms",
              "Row-parallel GEMMs summed piece by piece">,
    Statistic<"tpHiddenSums", "tp-hidden-sums",
              "Backward TP sums run behind weight gradients">,
    Statistic<"tpGatherRings", "tp-gather-rings",
              "Sequence-parallel all-gathers run as rings beside their GEMMs">,
    Statistic<"tpScatterRings", "tp-scatter-rings",
              "Sequence-parallel reduce-scatters run as rings beside their "
              "GEMMs">,
    Statistic<"tpPrefetchedGathers", "tp-prefetched-gathers",
              "Sequence-parallel re-gathers passed round the ring ahead of "
              "their reader">,
    Statistic<"tpPairs", "tp-pairs",
              "Pairs of micro-batches run interleaved">,
    Statistic<"tpMovedWhole", "tp-moved-whole",
              "TP collectives of paired micro-batches moved whole to the TP "
              "stream">,
    Statistic<"epExchanges", "ep-exchanges",
              "Collectives along ep moved to the EP stream">,
    Statistic<"epHidden", "ep-hidden",
              "Of them, those with their layer's compute beside them">,
  ];
}

def OffloadPass : Pass<"braid-offload", "mlir::ModuleOp"> {
  let summary = "Keep chosen layers' saved activations in host memory between forward and backward";
  let description = [{
    Under `targets` (or the module's `braid.offload`, from the spec's
    compile.offload; docs/memory.md "Activation offload"): every buffer of
    the step program that a forward launch of a chosen layer writes and a
    backward launch of the same micro-batch reads later (used by launches
    only, its forward uses on one stream and its backward uses on one) is
    copied to a `host` buffer on a copy-out stream after its last forward
    use, and back into a new device buffer, which the backward launches
    read instead, on a copy-in stream one layer ahead of its first backward
    use (the two streams the rank leaves free first). Events order the
    copies: the copy out waits for the forward stream's record after the
    last forward use, and the forward stream waits for the copy out where
    the layer after next begins (so one layer's copy runs beside the next
    one's forward); the copy in waits for the backward stream's record
    where the layer above the reading one begins its backward, and for the
    copy out, and the backward stream waits for the copy in right before
    the first backward use. A `sched.repeat` whose body holds such a buffer
    is stated out micro-batch by micro-batch first. The numbers do not
    change.

    ```mlir
    sched.launch "swiglu" on 0 micro_batch 0 ins(%g, %u : ...) outs(%a : ...)
    sched.event.record 4 value 3 on 0
    sched.event.wait 4 value 3 on 3
    sched.launch "copy" on 3 micro_batch 0 ins(%a : ...) outs(%a.host : ...)
    sched.event.record 5 value 3 on 3
    ...
    sched.event.record 4 value 9 on 0
    sched.event.wait 4 value 9 on 4
    sched.event.wait 5 value 3 on 4
    sched.launch "copy" on 4 micro_batch 0 ins(%a.host : ...) outs(%a2 : ...)
    sched.event.record 6 value 2 on 4
    ...
    sched.event.wait 6 value 2 on 0
    sched.launch "swiglu_grad_input" on 0 micro_batch 0 ins(%dy, %a2 ...)
    ```
  }];
  let options = [
    Option<"targets", "targets", "std::string", /*default=*/"\"\"",
           "activations, or activations: followed by layers (N, N-M) and "
           "stages (stage-S) separated by commas (default: the module's "
           "braid.offload, else none)">,
    Option<"compare", "compare", "bool", /*default=*/"false",
           "Also plan the module without offload, for the memory report's "
           "saving">,
  ];
}

def OptimizerOffloadPass : Pass<"braid-offload-optimizer", "mlir::ModuleOp"> {
  let summary = "Keep fp32 masters and Adam moments on the host and run AdamW there";
  let description = [{
    Under `enable` (or the module's `braid.offload` naming `optimizer`,
    from the spec's compile.offload; docs/memory.md "Optimizer offload"):
    every parameter the step's `adamw` launches update, and its moments,
    become `host` globals; compute reads a device weight copy (the bf16
    one of BF16 plans, else a new f32 `@NAME.copy`, the parameter's
    `compute_copy`). After `step_guard` the gradients go to host buffers
    on a to-host stream, bucket by bucket (`bucket-mb`, default the
    module's `braid.bucket_mb`, else one bucket per parameter); AdamW runs
    on a host stream (listed in the module's `sched.host_streams`) as each
    bucket arrives, BF16 plans cast the masters to bf16 there, and a
    to-device stream copies the weights back; the optimizer stream waits
    for the last bucket at the end of the step. The `init` program fills
    the weight copies the same way. Runs before braid-fuse-adamw, which
    fuses each bucket's launches. Refused with ZeRO.

    ```mlir
    sched.global @w parameter host : memref<8x4xf32> info <..., compute_copy = @w.copy>
    sched.global @w.copy weight_copy of @w : memref<8x4xf32>
    ...
    sched.launch "step_guard" on 0 ins(%sum, %norm : ...) outs(%skip : ...)
    sched.event.record 3 value 1 on 0
    sched.event.wait 3 value 1 on 2
    sched.launch "copy" on 2 ins(%norm : memref<f32>) outs(%norm.host : memref<f32>)
    sched.launch "copy" on 2 ins(%skip : memref<f32>) outs(%skip.host : memref<f32>)
    sched.launch "copy" on 2 ins(%g : memref<8x4xf32>) outs(%g.host : memref<8x4xf32>)
    sched.event.record 4 value 1 on 2
    sched.event.wait 4 value 1 on 3
    sched.launch "adamw" on 3 ins(%g.host, %norm.host, %skip.host : ...) outs(%w, %m, %v : ...)
    sched.event.record 5 value 1 on 3
    sched.event.wait 5 value 1 on 4
    sched.launch "copy" on 4 ins(%w : memref<8x4xf32>) outs(%w.copy : memref<8x4xf32>)
    sched.event.record 6 value 1 on 4
    ...
    sched.event.wait 6 value 1 on 0
    ```
  }];
  let options = [
    Option<"enable", "enable", "bool", /*default=*/"false",
           "Offload the optimizer whatever the module's braid.offload says">,
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"-1",
           "Least MiB of parameters per bucket (0: one bucket per "
           "parameter; default: the module's braid.bucket_mb, else 0)">,
    Option<"compare", "compare", "bool", /*default=*/"false",
           "Also plan the module without optimizer offload, for the memory "
           "report's saving">,
  ];
}

def PlanMemoryPass : Pass<"braid-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign static arena offsets from buffer liveness";
  let description = [{
    Persistent globals are laid out first, grouped by kind (parameters,
    gradients, optimizer state, weight copies, inputs, scalars). Each buffer
    counts at its element type's size (bf16: 2 bytes). Transient `sched.alloc`s
    get offsets above them: each program's buffers are live from their first
    launch to the last launch not ordered after all of their uses (on one
    stream, their last use; across streams only events order launches), and
    are placed largest first at the lowest offset that overlaps no
    live-range-overlapping buffer already placed. Here `%c` may not take
    `%a`'s bytes, though it comes later: stream 1 may still be reading `%a`.
    With `sched.event.record 0 value 1 on 1` after `k2` and
    `sched.event.wait 0 value 1 on 0` before `k3` it may: the wait orders
    after it exactly the record of that value.

    ```mlir
    sched.launch "k1" on 0 ins(%w : ...) outs(%a : memref<64xf32>)
    sched.launch "k2" on 1 ins(%a : memref<64xf32>) outs(%b : ...)
    sched.launch "k3" on 0 ins(%w : ...) outs(%c : memref<64xf32>)
    ```

    All
    offsets are 64-byte aligned. The module's `sched.memory` attribute
    records the byte counts the plan's memory report carries
    (`weight_copy_bytes` only when there are weight copies, `host_bytes`
    only when some buffer is a `host` one: braid-offload's copies, which
    the pass places in a host arena of their own, from offset 0); with
    `report=true` the pass prints that report. What is saved for backward
    is what is live at the first launch marked `input_grad` or
    `weight_grad` in the program of kind `step`, and the per-layer figures
    follow that program's launches' `braid.layer` marks.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the memory report to stderr">,
  ];
  let statistics = [
    Statistic<"numTransient", "num-transient", "Transient buffers placed">,
  ];
}

def EmitPlanPass : Pass<"braid-emit-plan", "mlir::ModuleOp"> {
  let summary = "Write the planned sched module as a plan (protobuf)";
  let description = [{
    Serialises globals, allocs (as tensors), programs, the model and
    training settings and the memory report into `braid.plan.Plan`. Weight
    copies become WEIGHT_COPY tensors, each parameter's `compute_copy` the
    copy's tensor id, and the precision `TrainConfig.precision` (`FP32`
    or `BF16`, as the decay is `COSINE` or `CONSTANT`). Refuses
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
