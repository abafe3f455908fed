//===- SchedAttrs.td - sched dialect attributes -----------------*- tablegen -*-===//
//
// What a sched.global is (its kind, and what the plan needs to know about
// it) and what a sched.program is run as, as enums and a typed parameter
// description rather than strings and dictionaries: a misspelt kind, role
// or initialisation is a parse error.
//
//===----------------------------------------------------------------------===//

#ifndef SCHED_ATTRS_TD
#define SCHED_ATTRS_TD

include "SchedBase.td"
include "dialects/BoolParameter.td"
include "dialects/F64Parameter.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Globals
//===----------------------------------------------------------------------===//

def Sched_GlobalKind : I32EnumAttr<"GlobalKind",
    "what a persistent buffer holds", [
    I32EnumAttrCase<"Parameter", 0, "parameter">,
    I32EnumAttrCase<"Gradient", 1, "gradient">,
    I32EnumAttrCase<"OptimizerState", 2, "optimizer_state">,
    I32EnumAttrCase<"WeightCopy", 3, "weight_copy">,
    I32EnumAttrCase<"Input", 4, "input">,
    I32EnumAttrCase<"Scalar", 5, "scalar">,
    // Model state that is not trained (an MoE layer's expert bias): kept
    // across steps and in checkpoints, zero at the start. With `of`, the
    // step's accumulator that updates the buffer it names (its load),
    // zeroed each step and not checkpointed.
    I32EnumAttrCase<"Buffer", 6, "buffer">]> {
  let cppNamespace = "::braid::sched";
  let genSpecializedAttr = 0;
}

// `parameter`, `gradient`, ... in sched.global.
def Sched_GlobalKindAttr : EnumAttr<Sched_Dialect, Sched_GlobalKind,
                                    "global_kind">;

// What the runtime writes into an input (tokens, labels, positions) or
// reads back from a scalar (the rest).
def Sched_Role : I32EnumAttr<"Role",
    "the role of an input or a scalar global", [
    I32EnumAttrCase<"Tokens", 0, "tokens">,
    I32EnumAttrCase<"Labels", 1, "labels">,
    I32EnumAttrCase<"Positions", 2, "positions">,
    I32EnumAttrCase<"Loss", 3, "loss">,
    I32EnumAttrCase<"LossSum", 4, "loss_sum">,
    I32EnumAttrCase<"GradNorm", 5, "grad_norm">,
    I32EnumAttrCase<"StepSkipped", 6, "step_skipped">]> {
  let cppNamespace = "::braid::sched";
  let genSpecializedAttr = 0;
}

// `role tokens`, `role loss`, ... in sched.global.
def Sched_RoleAttr : EnumAttr<Sched_Dialect, Sched_Role, "role">;

def Sched_InitKind : I32EnumAttr<"InitKind",
    "how a parameter is initialised", [
    I32EnumAttrCase<"Normal", 0, "normal">,
    I32EnumAttrCase<"Zeros", 1, "zeros">,
    I32EnumAttrCase<"Ones", 2, "ones">]> {
  let cppNamespace = "::braid::sched";
  let genSpecializedAttr = 0;
}

// A bool that is false unless written `true`.
def Sched_FlagParameter : BoolParameter<"true or false", "false">;

def Sched_ParamInfoAttr : AttrDef<Sched_Dialect, "ParamInfo"> {
  let mnemonic = "param_info";
  let summary = "What the plan needs to know about a parameter";
  let description = [{
    The Hugging Face `name` (checkpoints use it), the initialisation (`init`
    and, for `normal`, its `init_std`), whether AdamW decays it
    (`weight_decay`), whether the checkpoint stores it transposed
    (`checkpoint_transposed`, GPT-2's Conv1D layout), the globals of its
    gradient and AdamW moments, and, in BF16 plans, the weight copy that
    compute reads (`compute_copy`). `weight_decay`, `checkpoint_transposed`
    and `compute_copy` may be left out (false, false, none); `init_std` too
    when `init` is `zeros` or `ones`.

    ```mlir
    sched.global @w parameter : memref<192x64xf32>
        info <name = "model.layers.0.self_attn.q_proj.weight", init = normal,
              init_std = 2.000000e-02, weight_decay = true, grad = @w.grad,
              exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq>
    ```
  }];
  let parameters = (ins StringRefParameter<"the Hugging Face name">:$name,
                        AttrParameter<"::braid::sched::InitKind",
                                      "normal, zeros or ones">:$init,
                        F64Parameter<"the std of a normal init", "0.0">:$init_std,
                        Sched_FlagParameter:$weight_decay,
                        Sched_FlagParameter:$checkpoint_transposed,
                        AttrParameter<"::mlir::FlatSymbolRefAttr",
                                      "its gradient">:$grad,
                        AttrParameter<"::mlir::FlatSymbolRefAttr",
                                      "its first moment">:$exp_avg,
                        AttrParameter<"::mlir::FlatSymbolRefAttr",
                                      "its second moment">:$exp_avg_sq,
                        OptionalParameter<"::mlir::FlatSymbolRefAttr",
                                          "its weight copy">:$compute_copy);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

def Sched_ProgramKind : I32EnumAttr<"ProgramKind",
    "when the runtime runs a program", [
    I32EnumAttrCase<"Step", 0, "step">,
    I32EnumAttrCase<"Init", 1, "init">]> {
  let cppNamespace = "::braid::sched";
  let genSpecializedAttr = 0;
}

// `step` or `init` in sched.program.
def Sched_ProgramKindAttr : EnumAttr<Sched_Dialect, Sched_ProgramKind,
                                     "program_kind">;

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Sched_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "what a collective computes", [
    I32EnumAttrCase<"AllReduceSum", 0, "all_reduce_sum">,
    I32EnumAttrCase<"ReduceScatterSum", 1, "reduce_scatter_sum">,
    I32EnumAttrCase<"AllGather", 2, "all_gather">,
    I32EnumAttrCase<"Shift", 3, "shift">,
    I32EnumAttrCase<"Dispatch", 4, "dispatch">,
    I32EnumAttrCase<"Combine", 5, "combine">,
    I32EnumAttrCase<"ReplicateExperts", 6, "replicate_experts">,
    I32EnumAttrCase<"ReduceReplicas", 7, "reduce_replicas">]> {
  let cppNamespace = "::braid::sched";
  let genSpecializedAttr = 0;
}

def Sched_CollectiveKindAttr : EnumAttr<Sched_Dialect, Sched_CollectiveKind,
                                        "collective_kind">;

// The axes of the rank mesh, innermost first (TP, CP, PP, DP), and dp_cp:
// the ranks that differ in their DP and CP coordinates only, over which
// context parallel sums the gradients (plan.proto MeshAxis DP_CP); ep and
// edp: expert parallel's groups within DP (the ranks that hold every
// expert once between them, and the ranks that hold the same experts).
def Sched_MeshAxis : I32EnumAttr<"MeshAxis", "an axis of the rank mesh", [
    I32EnumAttrCase<"Tp", 0, "tp">,
    I32EnumAttrCase<"Cp", 1, "cp">,
    I32EnumAttrCase<"Pp", 2, "pp">,
    I32EnumAttrCase<"Dp", 3, "dp">,
    I32EnumAttrCase<"DpCp", 4, "dp_cp">,
    I32EnumAttrCase<"Ep", 5, "ep">,
    I32EnumAttrCase<"Edp", 6, "edp">]> {
  let cppNamespace = "::braid::sched";
  let genSpecializedAttr = 0;
}

def Sched_MeshAxisAttr : EnumAttr<Sched_Dialect, Sched_MeshAxis, "mesh_axis">;

def Sched_ShardAttr : AttrDef<Sched_Dialect, "Shard"> {
  let mnemonic = "shard";
  let summary = "The part of a whole tensor a global holds on each rank";
  let description = [{
    The global is one of the equal parts, along dimension `dim`, that the
    ranks of a group along `axis` hold of a whole tensor: rank k of the group
    holds rows [k * n, (k + 1) * n), n being the global's own size of that
    dimension. The whole tensor's shape is the global's with `dim`
    multiplied by the group's size (the module's braid.mesh). With `blocks`
    above 1 (left out: 1) that dimension of the whole tensor is `blocks`
    equal consecutive blocks, and rank k holds part k of each, in order
    (a TP-split GPT-2 q/k/v projection: its rows of q, of k and of v).
    With `dp_rows` (ZeRO over a tensor-parallel part, axis tp, or over an
    expert-parallel share of an MoE layer's experts, axis ep) the global
    holds, of that part, the rows of the rank's index in its ZeRO group:
    its first dimension is the part's divided by that group's size, the DP
    group for a TP part, the edp group (the ranks that hold the same
    experts) for an EP share.

    ```mlir
    sched.global @w parameter : memref<96x64xf32> shard <axis = dp, dim = 0>
        info <...>
    sched.global @qkv parameter : memref<96x64xf32> shard <axis = tp, dim = 0, blocks = 3>
        info <...>
    sched.global @o parameter : memref<32x32xf32> shard <axis = tp, dim = 1, dp_rows = true>
        info <...>
    ```
  }];
  let parameters = (ins AttrParameter<"::braid::sched::MeshAxis",
                                      "tp, cp, pp, dp or ep">:$axis,
                        "unsigned":$dim,
                        DefaultValuedParameter<"unsigned", "1">:$blocks,
                        DefaultValuedParameter<"bool", "false">:$dp_rows);
  let assemblyFormat = "`<` struct(params) `>`";
  let skipDefaultBuilders = 1;
  let builders = [
    AttrBuilder<(ins "::braid::sched::MeshAxis":$axis, "unsigned":$dim,
                     CArg<"unsigned", "1">:$blocks,
                     CArg<"bool", "false">:$dp_rows), [{
      return $_get($_ctxt, axis, dim, blocks, dp_rows);
    }]>];
}

#endif // SCHED_ATTRS_TD
