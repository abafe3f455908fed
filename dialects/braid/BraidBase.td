//===- BraidBase.td - the braid dialect -------------------------*- tablegen -*-===//
//
// `braid` says *what* is computed: tensor ops at transformer granularity with
// global (logical) shapes. Forward ops come from spec import; each backward
// op is split into an input-gradient op (`*_grad_input`, "B") and, where the
// op has weights, a weight-gradient op (`*_grad_weight`, "W"), so that later
// schedules can move W work into pipeline bubbles.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_BASE_TD
#define BRAID_BASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def Braid_Dialect : Dialect {
  let name = "braid";
  let cppNamespace = "::braid";
  let summary = "Transformer training ops: forward, input gradient, weight gradient";
  let description = [{
    Ops operate on ranked tensors of f32 or bf16 activations and i32 token
    ids. Parameters and data enter as arguments of the training-step function;
    typed argument attributes (BraidAttrs.td) say what each one is:
    `braid.param = #braid.param<name = ..., init = ..., ...>` or
    `braid.input = #braid.input<tokens>` (`labels`, `positions`).

    Every op of a training step carries two marks, discardable attributes
    that passes read instead of guessing from names: `braid.layer`, the
    transformer layer it belongs to (or the embedding or the loss), set at
    import; and `braid.phase`, forward, input gradient (B), weight gradient
    (W) or optimizer, set by autodiff.

    The module carries the settings braid-import records, as typed
    attributes (BraidAttrs.td): `braid.model = #braid.model<...>` and
    `braid.train = #braid.train<...>`. The function that holds a pipeline
    stage's graph is marked `braid.stage = #braid.stage<N>`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    // The names of the two marks.
    static constexpr ::llvm::StringLiteral kLayerMark = "braid.layer";
    static constexpr ::llvm::StringLiteral kPhaseMark = "braid.phase";
    // On an op of a mixture-of-experts block (a unit attribute, set by
    // braid-import): what the MoE recompute levels recompute.
    static constexpr ::llvm::StringLiteral kMoeBlockMark = "braid.moe_block";
    // The module's settings: a ModelAttr and a TrainAttr.
    static constexpr ::llvm::StringLiteral kModelAttr = "braid.model";
    static constexpr ::llvm::StringLiteral kTrainAttr = "braid.train";
    static constexpr ::llvm::StringLiteral kMeshAttr = "braid.mesh";
    // The least gradient bucket in MiB (braid-overlap): an f64 of 0 or more.
    static constexpr ::llvm::StringLiteral kBucketMbAttr = "braid.bucket_mb";
    // The ZeRO stage (braid-lower-to-sched): an i64 of 1, 2 or 3; absent
    // for stage 0.
    static constexpr ::llvm::StringLiteral kZeroStageAttr = "braid.zero_stage";
    // How many pieces each bucket's and each gather's collective is cut
    // into (braid-overlap, braid-lower-to-sched): an i64 above 1; absent
    // for whole collectives.
    static constexpr ::llvm::StringLiteral kCommChunksAttr = "braid.comm_chunks";
    // The pipeline (passes/PipelineAttrs.h), on the module where
    // pipeline_parallel is above 1: the spec's settings (a dictionary set
    // by braid-import), the stages' layers (braid-partition) and each
    // rank's order (braid-schedule).
    static constexpr ::llvm::StringLiteral kPipelineAttr = "braid.pipeline";
    static constexpr ::llvm::StringLiteral kPartitionAttr = "braid.partition";
    static constexpr ::llvm::StringLiteral kScheduleAttr = "braid.schedule";
    // On each nested module of a lowered pipeline (braid-lower-pipeline):
    // the pipeline rank (PP coordinate) whose globals and programs it
    // holds, an i64.
    static constexpr ::llvm::StringLiteral kPipelineRankAttr = "braid.pipeline_rank";
    // The mark of a stage function: a StageAttr.
    static constexpr ::llvm::StringLiteral kStageAttr = "braid.stage";
    // What an argument of a stage function is: a ParamAttr or an
    // InputRoleAttr.
    static constexpr ::llvm::StringLiteral kParamAttr = "braid.param";
    static constexpr ::llvm::StringLiteral kInputAttr = "braid.input";
    // The parameter whose gradient a result of the differentiated step is:
    // the name in its braid.param.
    static constexpr ::llvm::StringLiteral kGradOfAttr = "braid.grad_of";
    // How a value is laid out over the tensor-parallel ranks (braid-shard):
    // on an op, an array of TpLayoutAttr, one per result; on a parameter
    // argument, one TpLayoutAttr.
    static constexpr ::llvm::StringLiteral kTpAttr = "braid.tp";
    // On the module: norms, dropout and residual adds hold each TP rank's
    // part of the sequence (a unit attribute, set by braid-import).
    static constexpr ::llvm::StringLiteral kSequenceParallelAttr =
        "braid.sequence_parallel";
    // On the module: the pieces braid-overlap cuts each row-parallel
    // linear and its TP sum into (an i64 above 1, set by braid-import from
    // tp_comm_overlap); absent: whole.
    static constexpr ::llvm::StringLiteral kTpCommChunksAttr =
        "braid.tp_comm_chunks";
    // On the module, with kTpCommChunksAttr: braid-overlap interleaves the
    // step's micro-batches two by two (a unit attribute, set by
    // braid-import from tp_comm_pair_micro_batches).
    static constexpr ::llvm::StringLiteral kTpCommPairsAttr =
        "braid.tp_comm_pairs";
    // On the module: braid-overlap runs expert parallel's exchanges on a
    // stream of their own, beside their layer's compute (a unit
    // attribute, set by braid-import from ep_comm_overlap).
    static constexpr ::llvm::StringLiteral kEpCommOverlapAttr =
        "braid.ep_comm_overlap";
    // On the module: under adaptive recompute, the rows of each MoE
    // layer's gate and up activations a rank keeps for the backward (an
    // i64, set by braid-import from model.moe.adaptive_recompute);
    // braid-recompute recomputes them when the rank receives more.
    static constexpr ::llvm::StringLiteral kMoeAdaptiveRowsAttr =
        "braid.moe_adaptive_rows";
    // On the module: under hot-expert replication, the experts each MoE
    // layer may replicate (an i64, set by braid-import from
    // model.moe.hot_experts); the runtime logs when replication switches.
    static constexpr ::llvm::StringLiteral kMoeHotExpertsAttr =
        "braid.moe_hot_experts";
    // On the module: braid-recompute's policy (a string, set by
    // braid-import from compile.recompute when it is not none).
    static constexpr ::llvm::StringLiteral kRecomputeAttr =
        "braid.recompute";
    // On the module: the device bytes each rank may plan (an i64, set by
    // braid-import from compile.memory_budget_gb when it is above 0).
    static constexpr ::llvm::StringLiteral kMemoryBudgetAttr =
        "braid.memory_budget";
    // On the module: braid-offload's targets (a string, set by
    // braid-import from compile.offload when it is not none).
    static constexpr ::llvm::StringLiteral kOffloadAttr = "braid.offload";
    // On the module: what braid-offload did on each pipeline rank, one
    // dictionary per rank (the bytes it copies out per step and, where it
    // planned the rank without offload too, that plan's arena and saved
    // activations), for the memory report.
    static constexpr ::llvm::StringLiteral kOffloadReportAttr =
        "braid.offload_report";
    // On the module: what braid-offload-optimizer did on each pipeline
    // rank, one dictionary per rank (the bytes it copies to the host and
    // back per step and, where it planned the rank without it too, that
    // plan's arena), for the memory report.
    static constexpr ::llvm::StringLiteral kOptimizerOffloadReportAttr =
        "braid.optimizer_offload_report";
    // On the module: what braid-recompute did on each pipeline rank, one
    // dictionary per rank (policy, recompute FLOPs per micro-batch, and
    // the arena with and without it where it planned both), for the
    // memory report.
    static constexpr ::llvm::StringLiteral kRecomputeReportAttr =
        "braid.recompute_report";
    // On the module, with a mesh of cp above 1: context-parallel attention
    // gathers the whole sequence's keys and values (a unit attribute, set
    // by braid-import from cp_comm_type ALL_GATHER); absent: ring attention.
    static constexpr ::llvm::StringLiteral kCpAllGatherAttr =
        "braid.cp_all_gather";
    // On the module of a mixture-of-experts model: a dictionary of what
    // the plan's ModelInfo.moe states (set by braid-import, docs/moe.md):
    // naming ("mixtral" or "deepseek_v3"), num_experts, top_k,
    // expert_ffn_hidden_size, num_shared_experts, shared_ffn_hidden_size,
    // first_k_dense (i64), sigmoid, normalize_top_k (bool),
    // routed_scaling_factor, aux_loss_coeff, z_loss_coeff (f64).
    static constexpr ::llvm::StringLiteral kMoeAttr = "braid.moe";
    // On a step function argument: untrained model state (an MoE layer's
    // expert bias), a #braid.param of its name and init (zeros); no
    // gradient, no optimizer state, checkpointed under its name.
    static constexpr ::llvm::StringLiteral kBufferAttr = "braid.buffer";
    // On a step function argument with a braid.param: an MoE layer's
    // stacked experts [E / EP, ...], of which each rank of an
    // expert-parallel group holds its share (dimension 0 of the whole
    // [E, ...] split over the group, set by braid-import; a unit
    // attribute).
    static constexpr ::llvm::StringLiteral kExpertShardAttr = "braid.ep";
  }];
}

//===----------------------------------------------------------------------===//
// Marks
//===----------------------------------------------------------------------===//

def Braid_Phase : I32EnumAttr<"Phase", "the part of a training step an op belongs to", [
    I32EnumAttrCase<"Forward", 0, "forward">,
    I32EnumAttrCase<"InputGrad", 1, "input_grad">,
    I32EnumAttrCase<"WeightGrad", 2, "weight_grad">,
    I32EnumAttrCase<"Optimizer", 3, "optimizer">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

// `#braid.phase<forward>`, `#braid.phase<input_grad>` (B),
// `#braid.phase<weight_grad>` (W), `#braid.phase<optimizer>`.
def Braid_PhaseAttr : EnumAttr<Braid_Dialect, Braid_Phase, "phase"> {
  let assemblyFormat = "`<` $value `>`";
}

// The mesh axis a braid.comm op's group lies along.
// ep: an expert-parallel group (within DP, docs/moe.md).
def Braid_CommAxis : I32EnumAttr<"CommAxis", "a mesh axis of a collective", [
    I32EnumAttrCase<"Tp", 0, "tp">,
    I32EnumAttrCase<"Cp", 1, "cp">,
    I32EnumAttrCase<"Dp", 3, "dp">,
    I32EnumAttrCase<"Ep", 4, "ep">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

def Braid_CommAxisAttr : EnumAttr<Braid_Dialect, Braid_CommAxis, "axis"> {
  let assemblyFormat = "`<` $value `>`";
}

// `#braid.layer<3>` for transformer layer 3, `#braid.layer<embedding>` for
// what comes before the first layer (embeddings, their dropout),
// `#braid.layer<loss>` for what comes after the last (final norm, head,
// loss).
def Braid_LayerAttr : AttrDef<Braid_Dialect, "Layer"> {
  let mnemonic = "layer";
  let summary = "The transformer layer an op belongs to, or embedding or loss";
  let parameters = (ins "int64_t":$index);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static constexpr int64_t kEmbedding = -1;
    static constexpr int64_t kLoss = -2;
    static LayerAttr embedding(::mlir::MLIRContext *ctx) {
      return get(ctx, kEmbedding);
    }
    static LayerAttr loss(::mlir::MLIRContext *ctx) { return get(ctx, kLoss); }
    bool isEmbedding() const { return getIndex() == kEmbedding; }
    bool isLoss() const { return getIndex() == kLoss; }
    // The layer index; only for marks that are neither embedding nor loss.
    bool isBlock() const { return getIndex() >= 0; }
  }];
}

//===----------------------------------------------------------------------===//
// Differentiation
//===----------------------------------------------------------------------===//

def Braid_DifferentiableOpInterface : OpInterface<"DifferentiableOp"> {
  let cppNamespace = "::braid";
  let description = [{
    A forward op that knows its gradient rule. `braid-autodiff` visits the
    forward ops in reverse and asks each one that received a gradient (or
    is the loss) to emit its backward ops through the GradientBuilder
    (dialects/braid/Gradient.h): the input-gradient ops (B) for operands
    that need a gradient and the weight-gradient op (W) when a weight is
    among its operands.
  }];
  let methods = [
    InterfaceMethod<
      "Emits the backward of this op and adds each operand's gradient to `gb`.",
      "::mlir::LogicalResult", "buildGradient",
      (ins "::braid::GradientBuilder &":$gb)>,
  ];
}

// Ops whose every result is the gradient of a weight (W): the work that a
// zero-bubble schedule may delay. Autodiff marks them `weight_grad`; the
// lowering may accumulate their results in place into gradient buffers.
def Braid_WeightGradient : NativeOpTrait<"WeightGradient"> {
  let cppNamespace = "::braid";
}

// Ops whose scalar result is a loss added to the training loss beside the
// cross-entropy (the router's balancing losses): autodiff starts a
// gradient at each, as at the cross-entropy, and the step reports the
// cross-entropy alone.
def Braid_SideLoss : NativeOpTrait<"SideLoss"> {
  let cppNamespace = "::braid";
}

class Braid_Op<string mnemonic, list<Trait> traits = []>
    : Op<Braid_Dialect, mnemonic, traits>;

// Shapes are static: every size is known when the plan is made.
// Floating-point activations and weights.
def Braid_FloatTensor : StaticShapeTensorOf<[F32, BF16]>;
// Token, label and position ids.
def Braid_IdTensor : StaticShapeTensorOf<[I32]>;
// Per-row statistics saved for backward (mean, rstd, log-sum-exp): fp32.
def Braid_StatTensor : StaticShapeTensorOf<[F32]>;
def Braid_Scalar : 0DTensorOf<[F32]>;

#endif // BRAID_BASE_TD
