//===- BraidAttrs.td - braid dialect attributes -----------------*- tablegen -*-===//
//
// The module's settings: `braid.model` (what the plan's ModelInfo carries)
// and `braid.train` (its TrainConfig), both set by braid-import; the mark
// `braid.stage` of the function that holds a pipeline stage; and what the
// stage function's arguments are, `braid.param` and `braid.input`. Every
// parameter is required and written in its place, so a setting that is
// missing is a parse error that names it ("expected 'lr'"), never a silent 0
// for a later pass.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_ATTRS_TD
#define BRAID_ATTRS_TD

include "BraidBase.td"
include "dialects/BoolParameter.td"
include "dialects/F64Parameter.td"

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

def Braid_ModelFamily : I32EnumAttr<"ModelFamily",
    "the architecture family, which decides checkpoint naming", [
    I32EnumAttrCase<"Llama", 0, "llama">,
    I32EnumAttrCase<"Gpt2", 1, "gpt2">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

def Braid_Activation : I32EnumAttr<"Activation",
    "the MLP's activation", [
    I32EnumAttrCase<"SwiGLU", 0, "swiglu">,
    I32EnumAttrCase<"GeluTanh", 1, "gelu_tanh">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

def Braid_ModelAttr : AttrDef<Braid_Dialect, "Model"> {
  let mnemonic = "model";
  let summary = "The model's family and sizes (the plan's ModelInfo)";
  let description = [{
    `num_parameters` counts the f32 parameters; `flops_per_token` is
    Megatron's model FLOPs per trained token (forward and backward, causal
    attention not halved), the numerator of MFU. The rest is what a
    checkpoint's config.json states: the activation, the f32 values the
    norm, RoPE and dropout ops compute with (`rope_theta` 0 without RoPE),
    the positions (the learned table's rows, or `seq_len` with RoPE), the
    head width, whether the LM head is the embedding table and whether
    linear layers have biases.

    ```mlir
    module attributes {braid.model = #braid.model<family = llama,
        vocab_size = 256, hidden_size = 64, num_layers = 2, num_heads = 4,
        num_kv_heads = 2, ffn_hidden_size = 172, num_parameters = 123712,
        flops_per_token = 7.403520e+05, activation = swiglu,
        norm_eps = 9.9999997473787516E-6, rope_theta = 1.000000e+04,
        max_position_embeddings = 64, head_dim = 16, tie_embeddings = false,
        linear_bias = false, hidden_dropout = 0.000000e+00,
        attention_dropout = 0.000000e+00>} {
    ```
  }];
  let parameters = (ins AttrParameter<"::braid::ModelFamily", "llama or gpt2">:$family,
                        "int64_t":$vocab_size, "int64_t":$hidden_size,
                        "int64_t":$num_layers, "int64_t":$num_heads,
                        "int64_t":$num_kv_heads, "int64_t":$ffn_hidden_size,
                        "int64_t":$num_parameters,
                        F64Parameter<>:$flops_per_token,
                        AttrParameter<"::braid::Activation", "swiglu or gelu_tanh">:$activation,
                        F64Parameter<>:$norm_eps, F64Parameter<>:$rope_theta,
                        "int64_t":$max_position_embeddings,
                        "int64_t":$head_dim,
                        BoolParameter<>:$tie_embeddings,
                        BoolParameter<>:$linear_bias,
                        F64Parameter<>:$hidden_dropout,
                        F64Parameter<>:$attention_dropout);
  let assemblyFormat = [{
    `<`
    `family` `=` $family `,`
    `vocab_size` `=` $vocab_size `,`
    `hidden_size` `=` $hidden_size `,`
    `num_layers` `=` $num_layers `,`
    `num_heads` `=` $num_heads `,`
    `num_kv_heads` `=` $num_kv_heads `,`
    `ffn_hidden_size` `=` $ffn_hidden_size `,`
    `num_parameters` `=` $num_parameters `,`
    `flops_per_token` `=` $flops_per_token `,`
    `activation` `=` $activation `,`
    `norm_eps` `=` $norm_eps `,`
    `rope_theta` `=` $rope_theta `,`
    `max_position_embeddings` `=` $max_position_embeddings `,`
    `head_dim` `=` $head_dim `,`
    `tie_embeddings` `=` $tie_embeddings `,`
    `linear_bias` `=` $linear_bias `,`
    `hidden_dropout` `=` $hidden_dropout `,`
    `attention_dropout` `=` $attention_dropout
    `>`
  }];
}

//===----------------------------------------------------------------------===//
// Training settings
//===----------------------------------------------------------------------===//

def Braid_LrDecay : I32EnumAttr<"LrDecay",
    "how the learning rate falls after warm-up", [
    I32EnumAttrCase<"Cosine", 0, "cosine">,
    I32EnumAttrCase<"Constant", 1, "constant">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

def Braid_Precision : I32EnumAttr<"Precision",
    "the element type of activations and of the weights compute reads", [
    I32EnumAttrCase<"FP32", 0, "fp32">,
    I32EnumAttrCase<"BF16", 1, "bf16">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

def Braid_TrainAttr : AttrDef<Braid_Dialect, "Train"> {
  let mnemonic = "train";
  let summary = "The training settings (the plan's TrainConfig)";
  let description = [{
    The batch (`micro_batch_size` sequences of `seq_len` tokens, times
    `num_micro_batches` per optimizer step), the run length, AdamW's
    settings, gradient clipping (`grad_clip`, 0 for none), the learning-rate
    schedule (`warmup_steps`, then `decay` to `min_lr`) and the precision.
    braid-lower-to-sched reads the batch and AdamW's settings; the plan
    emitter copies all of them.

    ```mlir
    module attributes {braid.train = #braid.train<seed = 1234,
        micro_batch_size = 8, num_micro_batches = 2, seq_len = 64,
        steps = 300, lr = 3.000000e-03, beta1 = 9.000000e-01,
        beta2 = 0.94999999999999996, eps = 1.000000e-08,
        weight_decay = 1.000000e-01, grad_clip = 1.000000e+00,
        warmup_steps = 20, decay = cosine, min_lr = 3.000000e-04,
        precision = fp32>} {
    ```
  }];
  let parameters = (ins "uint64_t":$seed, "int64_t":$micro_batch_size,
                        "int64_t":$num_micro_batches, "int64_t":$seq_len,
                        "int64_t":$steps, F64Parameter<>:$lr,
                        F64Parameter<>:$beta1, F64Parameter<>:$beta2,
                        F64Parameter<>:$eps,
                        F64Parameter<>:$weight_decay,
                        F64Parameter<>:$grad_clip,
                        "int64_t":$warmup_steps,
                        AttrParameter<"::braid::LrDecay", "cosine or constant">:$decay,
                        F64Parameter<>:$min_lr,
                        AttrParameter<"::braid::Precision", "fp32 or bf16">:$precision);
  let assemblyFormat = [{
    `<`
    `seed` `=` $seed `,`
    `micro_batch_size` `=` $micro_batch_size `,`
    `num_micro_batches` `=` $num_micro_batches `,`
    `seq_len` `=` $seq_len `,`
    `steps` `=` $steps `,`
    `lr` `=` $lr `,`
    `beta1` `=` $beta1 `,`
    `beta2` `=` $beta2 `,`
    `eps` `=` $eps `,`
    `weight_decay` `=` $weight_decay `,`
    `grad_clip` `=` $grad_clip `,`
    `warmup_steps` `=` $warmup_steps `,`
    `decay` `=` $decay `,`
    `min_lr` `=` $min_lr `,`
    `precision` `=` $precision
    `>`
  }];
}

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

// `braid.stage = #braid.stage<0>` on a func.func: the function holds the
// forward (and, after autodiff, backward) graph of pipeline stage 0. A
// module has one function per stage; passes find them through
// StageFunctions.h, never by name.
def Braid_StageAttr : AttrDef<Braid_Dialect, "Stage"> {
  let mnemonic = "stage";
  let summary = "The pipeline stage whose graph a function holds";
  let description = [{
    braid-import creates one function, stage 0:

    ```mlir
    func.func @train_step(...) -> (tensor<f32> {braid.loss})
        attributes {braid.stage = #braid.stage<0>} {
    ```
  }];
  let parameters = (ins "int64_t":$index);
  let assemblyFormat = "`<` $index `>`";
  let genVerifyDecl = 1;
}

// The rank mesh the module is compiled for (docs/parallel.md). A module
// without it is compiled for one rank.
def Braid_MeshAttr : AttrDef<Braid_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "The sizes of the rank mesh's axes";
  let description = [{
    TP innermost, DP outermost; each axis has at least one rank. Set by
    braid-import from the spec's `parallel` block; braid-lower-to-sched
    reduces the gradients over DP when it has more than one rank, and the
    plan emitter copies the sizes into the plan. `ep` (left out: 1) is
    expert parallel's group size, a divisor of dp: groups of ep DP ranks
    each hold every MoE expert once.

    ```mlir
    module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 1, dp = 4>} {
    module attributes {braid.mesh = #braid.mesh<tp = 1, cp = 1, pp = 1, dp = 4, ep = 2>} {
    ```
  }];
  let parameters = (ins "int64_t":$tp, "int64_t":$cp, "int64_t":$pp,
                        "int64_t":$dp,
                        DefaultValuedParameter<"int64_t", "1">:$ep);
  let assemblyFormat = [{
    `<` `tp` `=` $tp `,` `cp` `=` $cp `,` `pp` `=` $pp `,` `dp` `=` $dp
    (`,` `ep` `=` $ep^)? `>`
  }];
  let genVerifyDecl = 1;
}

// How braid-shard lays a value out over the ranks of a TP group
// (docs/parallel.md, "Tensor parallel").
def Braid_TpKind : I32EnumAttr<"TpKind",
    "how a value is laid out over the tensor-parallel ranks", [
    I32EnumAttrCase<"Replicated", 0, "replicated">,
    I32EnumAttrCase<"Split", 1, "split">,
    I32EnumAttrCase<"Partial", 2, "partial">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

def Braid_TpLayoutAttr : AttrDef<Braid_Dialect, "TpLayout"> {
  let mnemonic = "tp";
  let summary = "A value's layout over the tensor-parallel ranks";
  let description = [{
    `replicated`: every TP rank holds the whole value. `split`: rank k holds
    part k of dimension `dim`, or, with `blocks` above 1, part k of each of
    the `blocks` equal consecutive blocks of that dimension (GPT-2's fused
    q/k/v projection: each rank holds its rows of q, of k and of v).
    `partial`: every rank holds a whole-shaped value, and the value is the
    sum over the ranks (a row-parallel linear's output before its
    all-reduce). `dim` and `blocks` are 0 and 1 unless the value is split.

    ```mlir
    %q = braid.linear %h, %wq {braid.tp = [#braid.tp<split, dim = 2, blocks = 1>]} : ...
    ```
  }];
  let parameters = (ins AttrParameter<"::braid::TpKind",
                                      "replicated, split or partial">:$kind,
                        "int64_t":$dim, "int64_t":$blocks);
  let assemblyFormat = [{
    `<` $kind `,` `dim` `=` $dim `,` `blocks` `=` $blocks `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static TpLayoutAttr replicated(::mlir::MLIRContext *ctx) {
      return get(ctx, TpKind::Replicated, 0, 1);
    }
    static TpLayoutAttr partial(::mlir::MLIRContext *ctx) {
      return get(ctx, TpKind::Partial, 0, 1);
    }
    static TpLayoutAttr split(::mlir::MLIRContext *ctx, int64_t dim,
                              int64_t blocks = 1) {
      return get(ctx, TpKind::Split, dim, blocks);
    }
    bool isReplicated() const { return getKind() == TpKind::Replicated; }
    bool isSplit() const { return getKind() == TpKind::Split; }
    bool isPartial() const { return getKind() == TpKind::Partial; }
  }];
}


//===----------------------------------------------------------------------===//
// Arguments of a stage function
//===----------------------------------------------------------------------===//

def Braid_InitKind : I32EnumAttr<"InitKind",
    "how a parameter is initialised", [
    I32EnumAttrCase<"Normal", 0, "normal">,
    I32EnumAttrCase<"Zeros", 1, "zeros">,
    I32EnumAttrCase<"Ones", 2, "ones">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

// `braid.param = #braid.param<...>` on an argument: the argument is a
// parameter, the f32 master that AdamW updates.
def Braid_ParamAttr : AttrDef<Braid_Dialect, "Param"> {
  let mnemonic = "param";
  let summary = "A parameter argument: its name, initialisation and treatment";
  let description = [{
    The Hugging Face `name` (checkpoints use it), the initialisation
    (`init`: `normal` with a finite positive `init_std`, or `zeros` or
    `ones` with `init_std = 0.0`), whether AdamW decays it (`weight_decay`;
    the lowering decays rank-2 parameters only, docs/numerics.md) and
    whether the checkpoint stores it transposed (`checkpoint_transposed`,
    GPT-2's Conv1D layout). braid-lower-to-sched copies them into the
    parameter's `#sched.param_info`.

    ```mlir
    func.func @train_step(...,
        %arg3: tensor<192x64xf32> {braid.param = #braid.param<
            name = "model.layers.0.self_attn.q_proj.weight", init = normal,
            init_std = 2.000000e-02, weight_decay = true,
            checkpoint_transposed = false>}, ...)
    ```
  }];
  let parameters = (ins StringRefParameter<"the Hugging Face name">:$name,
                        AttrParameter<"::braid::InitKind",
                                      "normal, zeros or ones">:$init,
                        F64Parameter<"the std of a normal init">:$init_std,
                        BoolParameter<"whether AdamW decays it">:$weight_decay,
                        BoolParameter<"whether the checkpoint stores it "
                                      "transposed">:$checkpoint_transposed);
  let assemblyFormat = [{
    `<`
    `name` `=` $name `,`
    `init` `=` $init `,`
    `init_std` `=` $init_std `,`
    `weight_decay` `=` $weight_decay `,`
    `checkpoint_transposed` `=` $checkpoint_transposed
    `>`
  }];
  let genVerifyDecl = 1;
}

def Braid_InputRole : I32EnumAttr<"InputRole",
    "the ids an input argument holds", [
    I32EnumAttrCase<"Tokens", 0, "tokens">,
    I32EnumAttrCase<"Labels", 1, "labels">,
    I32EnumAttrCase<"Positions", 2, "positions">]> {
  let cppNamespace = "::braid";
  let genSpecializedAttr = 0;
}

// `braid.input = #braid.input<tokens>` on an argument: the argument holds
// the micro-batch's token ids, `labels` its next-token labels, `positions`
// its position ids (models with learned position embeddings).
def Braid_InputRoleAttr : EnumAttr<Braid_Dialect, Braid_InputRole, "input"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // BRAID_ATTRS_TD
