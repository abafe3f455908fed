//===- SchedOps.td - sched dialect ops --------------------------*- tablegen -*-===//

#ifndef SCHED_OPS_TD
#define SCHED_OPS_TD

include "SchedAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Sched_GlobalOp : Sched_Op<"global", [Symbol]> {
  let summary = "A persistent buffer of the rank";
  let description = [{
    `kind` is one of parameter, gradient, optimizer_state, weight_copy,
    input, scalar, and decides what else the global states:
    - a parameter, its `info` (#sched.param_info: the Hugging Face name,
      initialisation, weight decay, checkpoint layout, the globals of its
      gradient and moments and, in BF16 plans, `compute_copy`, the weight
      copy compute reads);
    - a gradient, an optimizer state or a weight copy, the parameter it
      belongs to (`of`);
    - an input, its role: tokens, labels or positions; a scalar, its role:
      loss, loss_sum, grad_norm or step_skipped.

    A weight copy is the value of a parameter that the micro-batch reads
    (bf16 in BF16 plans; f32 when the master lives on the host): the
    `init` program writes it once from the fp32 master and the `step`
    program after every AdamW step.

    A `host` parameter or optimizer state lives in the rank's host arena
    (optimizer offload): only launches on the module's host streams
    (`sched.host_streams`) and `copy` launches use it.

    ```mlir
    sched.global @w parameter : memref<192x64xf32>
        info <name = "model.layers.0.self_attn.q_proj.weight", init = normal,
              init_std = 2.000000e-02, weight_decay = true, grad = @w.grad,
              exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq,
              compute_copy = @w.bf16>
    sched.global @w.grad gradient of @w : memref<192x64xf32>
    sched.global @w.bf16 weight_copy of @w : memref<192x64xbf16>
    sched.global @tokens input role tokens : memref<8x64xi32> offset(4096)
    sched.global @loss scalar role loss : memref<f32>
    sched.global @w.exp_avg optimizer_state host of @w : memref<192x64xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Sched_GlobalKindAttr:$kind,
                       OptionalAttr<FlatSymbolRefAttr>:$of,
                       OptionalAttr<Sched_RoleAttr>:$role,
                       TypeAttrOf<Sched_Buffer>:$type,
                       OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<Sched_ParamInfoAttr>:$info,
                       OptionalAttr<Sched_ShardAttr>:$shard,
                       UnitAttr:$host);
  let assemblyFormat = [{
    $sym_name custom<Keyword>($kind) (`host` $host^)? (`of` $of^)?
    (`role` custom<Keyword>($role)^)? `:` $type
    (`offset` `(` $offset^ `)`)? (`shard` $shard^)? (`info` $info^)?
    attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_ProgramOp : Sched_Op<"program", [Symbol, SingleBlock, NoTerminator,
                                          IsolatedFromAbove]> {
  let summary = "An ordered instruction list the runtime runs as a unit";
  let description = [{
    `kind` says when the runtime runs the program; a plan has one `step`
    program and at most one `init`. A `step` program runs once per
    optimizer step: it holds, for every micro-batch in the schedule's
    order, the staging of its inputs and its launches (each with its
    `micro_batch`), then the optimizer. An `init` program runs once after
    the parameters are initialised or restored and before the first step.
    Instructions on one stream run in order; instructions on different
    streams are ordered only by events, whose records and waits the
    verifier checks (see `sched.event.wait`).

    ```mlir
    sched.program @step step {
      %t = sched.get_global @embed : memref<256x64xf32>
      %ids = sched.get_global @tokens : memref<8x64xi32>
      sched.stage %ids micro_batch 0 on 0 : memref<8x64xi32>
      %x = sched.alloc : memref<8x64x64xf32>
      sched.launch "embedding" on 0 micro_batch 0 ins(%t, %ids : memref<256x64xf32>, memref<8x64xi32>)
          outs(%x : memref<8x64x64xf32>)
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       Sched_ProgramKindAttr:$kind);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$sym_name custom<Keyword>($kind) attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

def Sched_GetGlobalOp : Sched_Op<"get_global",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The buffer of a sched.global inside a program";
  let description = [{
    ```mlir
    %w = sched.get_global @w0 : memref<192x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$global);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = "$global attr-dict `:` type($result)";
}

def Sched_AllocOp : Sched_Op<"alloc", [MemoryEffects<[MemAlloc]>]> {
  let summary = "A transient buffer; its lifetime spans its first to last use";
  let description = [{
    `braid-plan-memory` sets `offset`; buffers whose lifetimes do not
    overlap may share bytes. A `host` buffer lives in the rank's host
    arena (pinned host memory on a GPU), which the planner lays out apart
    from the device arena: only `copy` launches (braid-offload's copies of
    saved activations, optimizer offload's of gradients and weights) and
    launches on the module's host streams read or write it.

    ```mlir
    %x = sched.alloc offset(4096) : memref<8x64x64xf32>
    %h = sched.alloc host offset(0) : memref<8x64x64xf32>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset, UnitAttr:$host);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat =
      "(`host` $host^)? (`offset` `(` $offset^ `)`)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Sched_ViewOp : Sched_Op<"view", [Pure]> {
  let summary = "A contiguous slice of a buffer along one dimension";
  let description = [{
    Indices [first, first + n) of dimension `dim` of `source`, n being the
    result's size there; every dimension before `dim` has size 1 and every
    one after is whole, so the slice is one contiguous run of the source's
    bytes. braid-overlap computes and sums a row-parallel GEMM's output
    piece by piece through views; the plan names them as tensors inside
    their base's bytes.

    ```mlir
    %y1 = sched.view %y dim 0 first 2 : memref<8x64x64xf32> -> memref<2x64x64xf32>
    ```
  }];
  let arguments = (ins Sched_Buffer:$source, I64Attr:$dim, I64Attr:$first);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $source `dim` $dim `first` $first attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sched_LaunchOp : Sched_Op<"launch", [AttrSizedOperandSegments]> {
  let summary = "Run a kernel on a stream";
  let description = [{
    `kernel` names an entry of the runtime's kernel registry
    (docs/kernels.md lists them with their operands and parameters). The
    kernel reads `ins` and writes `outs`; with `accumulate = 1` in `params`
    it adds into `outs`. `micro_batch` is the micro-batch of the step the
    launch computes (absent for the optimizer's launches, which read 0): the
    key of its random draws.

    ```mlir
    sched.launch "linear" on 0 micro_batch 1 ins(%x, %w : memref<8x64x64xf32>, memref<192x64xf32>)
        outs(%y : memref<8x64x192xf32>)
    ```
  }];
  let arguments = (ins StrAttr:$kernel, I32Attr:$stream,
                       OptionalAttr<I32Attr>:$micro_batch,
                       Variadic<Sched_Buffer>:$ins, Variadic<Sched_Buffer>:$outs,
                       OptionalAttr<DictionaryAttr>:$params);
  let assemblyFormat = [{
    $kernel `on` $stream (`micro_batch` $micro_batch^)?
    (`ins` `(` $ins^ `:` type($ins) `)`)?
    (`outs` `(` $outs^ `:` type($outs) `)`)?
    (`params` $params^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_StageOp : Sched_Op<"stage"> {
  let summary = "Copy one micro-batch's staged values into an input buffer";
  let description = [{
    Before it runs `step`, the runtime stages the inputs of every
    micro-batch of the step (tokens, labels, positions) in host memory.
    `sched.stage` copies micro-batch `micro_batch`'s values of the input
    global `buffer` into it, on `stream`, in program order.

    ```mlir
    %tokens = sched.get_global @tokens : memref<8x64xi32>
    sched.stage %tokens micro_batch 1 on 0 : memref<8x64xi32>
    ```
  }];
  let arguments = (ins Sched_Buffer:$buffer, I32Attr:$micro_batch,
                       I32Attr:$stream);
  let assemblyFormat =
      "$buffer `micro_batch` $micro_batch `on` $stream attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Sched_ReadbackOp : Sched_Op<"readback"> {
  let summary = "Copy a scalar into a host readback slot";
  let description = [{
    The value `buffer` (an f32 scalar global) has at this point of `stream`
    goes to the host's readback slot `slot`, which the runtime reads after
    the step: each micro-batch's loss, the gradient norm, the skipped flag.

    ```mlir
    %loss = sched.get_global @loss : memref<f32>
    sched.readback %loss to 1 on 0 : memref<f32>
    ```
  }];
  let arguments = (ins Sched_Buffer:$buffer, I32Attr:$slot, I32Attr:$stream);
  let assemblyFormat =
      "$buffer `to` $slot `on` $stream attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Sched_RepeatOp : Sched_Op<"repeat", [SingleBlock, NoTerminator]> {
  let summary = "Run a body once per iteration, micro-batches offset";
  let description = [{
    Runs `body` `count` times, for iterations 0..count-1. In iteration i,
    the micro-batch of every `sched.launch` and `sched.stage` in the body
    (0 when a launch states none) and the slot of every `sched.readback`
    are offset by i: the plain schedule states one micro-batch once for the
    `count` micro-batches of a step. The body holds launches, stages,
    readbacks, buffers, global reads and collectives along tp (braid-shard's
    sums) only, and its buffers are its own,
    so one pass over it is the lifetime of every iteration.

    ```mlir
    sched.repeat 16 {
      %tokens = sched.get_global @tokens : memref<8x64xi32>
      sched.stage %tokens micro_batch 0 on 0 : memref<8x64xi32>
      ...
      sched.readback %loss to 0 on 0 : memref<f32>
    }
    ```
  }];
  let arguments = (ins I32Attr:$count);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$count attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Sched_CollectiveOp : Sched_Op<"collective", [AttrSizedOperandSegments]> {
  let summary = "A collective over this rank's group along a mesh axis";
  let description = [{
    Queued on `stream` like a launch. Every rank of the group along `axis`
    runs the same collectives in the same order.
    - `all_reduce_sum` makes each buffer, in place, the sum of its values
      over the group; the buffers are f32 gradient or scalar globals (along
      tp also transient f32 activations), and there are no outputs.
    - `reduce_scatter_sum` writes into each output this rank's part (rows
      along dimension 0, as #sched.shard) of the group's sum of the matching
      buffer, whose first dimension is the group's size times the output's.
    - `all_gather` writes into each output the group's matching buffers,
      stacked along dimension 0 in rank order.
    - `shift` (with `offset`) sends each buffer to the rank `offset` places
      on along the axis (modulo the group's size) and writes into the
      matching output, of the same type, what the rank `offset` places
      before sent: a step of a ring (context parallel's ring attention).
    - `dispatch` and `combine` (along ep, plan.proto DISPATCH and COMBINE):
      buffers (rows, counts), one output: expert parallel's exchange of
      token rows by the group's gathered i32 counts, and its way back.
    - `replicate_experts` and `reduce_replicas` (along ep, plan.proto
      REPLICATE_EXPERTS and REDUCE_REPLICAS): buffers (f32 stacked expert
      weights, i32 hot experts), one output: hot-expert replication's copy
      of the hot experts' weights from their owners, and the sum of the
      copies' gradients back into the owners in rank order.

    ```mlir
    sched.collective all_reduce_sum dp(%g0, %loss_sum : memref<64x32xf32>, memref<f32>) on 1
    sched.collective reduce_scatter_sum dp(%full : memref<64x32xf32>) into(%g0 : memref<32x32xf32>) on 1
    sched.collective shift cp(%k : memref<8x32x64xf32>) into(%k1 : memref<8x32x64xf32>) on 0 {offset = 1 : si32}
    ```
  }];
  let arguments = (ins Sched_CollectiveKindAttr:$kind,
                       Sched_MeshAxisAttr:$axis,
                       Variadic<Sched_Buffer>:$buffers,
                       Variadic<Sched_Buffer>:$outputs, I32Attr:$stream,
                       OptionalAttr<SI32Attr>:$offset);
  let assemblyFormat = [{
    custom<Keyword>($kind) custom<Keyword>($axis) `(` $buffers `:`
    type($buffers) `)` (`into` `(` $outputs^ `:` type($outputs) `)`)?
    `on` $stream attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_SendOp : Sched_Op<"send"> {
  let summary = "Send a buffer to a pipeline peer";
  let description = [{
    Sends `buffer` to the rank `peer_offset` places along the pipeline
    axis (modulo its size: +1 the next pipeline rank, -1 the previous) on
    `channel` (0 activations, 1 gradients), blocking `stream` until the
    peer has received it. Sends and receives of one channel between two
    ranks meet in program order; braid-schedule's check proves that the
    schedule they follow cannot deadlock.

    ```mlir
    sched.send %h to 1 channel 0 on 2 : memref<8x64x64xf32>
    ```
  }];
  let arguments = (ins Sched_Buffer:$buffer, SI32Attr:$peer_offset,
                       I32Attr:$channel, I32Attr:$stream);
  let assemblyFormat = [{
    $buffer `to` $peer_offset `channel` $channel `on` $stream attr-dict `:`
    type($buffer)
  }];
  let hasVerifier = 1;
}

def Sched_RecvOp : Sched_Op<"recv"> {
  let summary = "Receive a buffer from a pipeline peer";
  let description = [{
    Receives into `buffer` what the rank `peer_offset` places along the
    pipeline axis sends on `channel`, blocking `stream` until it has
    arrived (see `sched.send`).

    ```mlir
    sched.recv %h from -1 channel 0 on 1 : memref<8x64x64xf32>
    ```
  }];
  let arguments = (ins Sched_Buffer:$buffer, SI32Attr:$peer_offset,
                       I32Attr:$channel, I32Attr:$stream);
  let assemblyFormat = [{
    $buffer `from` $peer_offset `channel` $channel `on` $stream attr-dict `:`
    type($buffer)
  }];
  let hasVerifier = 1;
}

def Sched_MarkOp : Sched_Op<"mark"> {
  let summary = "Bracket one part of a micro-batch's work through a stage";
  let description = [{
    Marks where the forward (`"F"`), input gradient (`"B"`) or weight
    gradient (`"W"`) of micro-batch `micro_batch` through stage `stage`
    (in model order) begins on `stream`, or, with `end`, where it ends.
    braid-lower-pipeline brackets each part of its schedule's entries so;
    a traced run (braid-run --trace) timestamps the marks as their stream
    reaches them, and does nothing with them otherwise.

    ```mlir
    sched.mark "F" stage 1 mb 3 on 0
    sched.mark end "F" stage 1 mb 3 on 0
    ```
  }];
  let arguments = (ins StrAttr:$part, I32Attr:$stage, I32Attr:$micro_batch,
                       UnitAttr:$end, I32Attr:$stream);
  let assemblyFormat = [{
    (`end` $end^)? $part `stage` $stage `mb` $micro_batch `on` $stream
    attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_EventRecordOp : Sched_Op<"event.record"> {
  let summary = "Set an event's timeline to a value when the stream gets here";
  let description = [{
    Events are timelines, as timeline semaphores are: each starts a program
    run at 0, and this op sets `event` to `value` once every op before it on
    `stream` has run. One stream records an event in a program, with values
    that rise in program order from 1 (the program's verifier checks it).

    ```mlir
    sched.event.record 0 value 1 on 0
    ```
  }];
  let arguments = (ins I32Attr:$event, I64Attr:$value, I32Attr:$stream);
  let assemblyFormat = "$event `value` $value `on` $stream attr-dict";
  let hasVerifier = 1;
}

def Sched_EventWaitOp : Sched_Op<"event.wait"> {
  let summary = "Block a stream until an event reaches a value";
  let description = [{
    Nothing after this op on `stream` starts before `event` reaches
    `value`, that is, before the record of exactly that value has run. That
    record comes earlier in program order, so the order never depends on
    which stream finishes first, and running the program's ops one by one
    in program order is always possible (no stream waits forever).

    ```mlir
    sched.event.record 0 value 1 on 0
    sched.event.wait 0 value 1 on 1
    ```
  }];
  let arguments = (ins I32Attr:$event, I64Attr:$value, I32Attr:$stream);
  let assemblyFormat = "$event `value` $value `on` $stream attr-dict";
  let hasVerifier = 1;
}

#endif // SCHED_OPS_TD
