//===- ImportSpec.cpp - model spec to braid forward graph -----------------===//
//
// Builds the unfused reference graph of docs/numerics.md. Parameter names are
// Hugging Face's, so that checkpoints load into `transformers` unchanged.
//
// Precision BF16 changes only types: parameters stay f32 (the masters the
// optimizer updates) and each is cast to bf16 once, at the top of the step;
// activations are bf16; the ops type their saved statistics, probabilities
// and the loss f32 whatever the activations are.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/ImportSpec.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "compiler/spec/OffloadTargets.h"
#include "compiler/spec/SpecPipeline.h"
#include "compiler/spec/SpecSizes.h"
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"

using namespace mlir;

namespace braid {
namespace {

// Gives every op the builder inserts the layer under construction, and
// the MoE block mark inside a mixture-of-experts block.
class LayerStamper : public OpBuilder::Listener {
public:
  void set(LayerAttr layer) { layer_ = layer; }
  LayerAttr get() const { return layer_; }
  void setInMoeBlock(bool in) { moe_ = in; }
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    setLayerMark(op, layer_);
    if (moe_)
      setMoeBlockMark(op);
  }

private:
  LayerAttr layer_;
  bool moe_ = false;
};

// The function under construction: arguments and their attributes are
// collected as parameters appear, and the signature is fixed at the end.
class GraphBuilder {
public:
  GraphBuilder(const spec::ModelSpec &spec, ModuleOp module)
      : spec_(spec), arch_(spec.model()), train_(spec.train()),
        ctx_(module.getContext()), b_(ctx_), loc_(module.getLoc()) {
    b_.setInsertionPointToEnd(module.getBody());
    func_ = func::FuncOp::create(b_, loc_, "train_step",
                                 b_.getFunctionType({}, {}));
    // One pipeline stage: the whole graph is stage 0.
    func_->setAttr(BraidDialect::kStageAttr, StageAttr::get(ctx_, 0));
    block_ = func_.addEntryBlock();
    b_.setInsertionPointToStart(block_);
    b_.setListener(&layer_);
    layer_.set(LayerAttr::embedding(ctx_));
    f32_ = b_.getF32Type();
    bf16_ = train_.precision() == spec::BF16;
    compute_ = bf16_ ? b_.getBF16Type() : f32_;
    batch_ = train_.micro_batch_size();
    seq_ = train_.seq_len();
  }

  void build();

private:
  // The value an f32 attribute of `v` holds: what the norm, RoPE and
  // dropout ops compute with, and so what braid.model records for them.
  static double asF32(double v) { return static_cast<float>(v); }

  RankedTensorType act(int64_t features) {
    return RankedTensorType::get({batch_, seq_, features}, compute_);
  }
  RankedTensorType rowStat() {
    return RankedTensorType::get({batch_, seq_}, f32_);
  }

  Value input(InputRole role) {
    auto type = RankedTensorType::get({batch_, seq_}, b_.getI32Type());
    Value v = block_->addArgument(type, loc_);
    argAttrs_.push_back(b_.getDictionaryAttr(b_.getNamedAttr(
        BraidDialect::kInputAttr, InputRoleAttr::get(ctx_, role))));
    return v;
  }

  // `expertShare`: an MoE layer's stacked experts, of which this rank
  // holds its expert-parallel group's share (`shape` is the share's).
  Value param(const std::string &name, ArrayRef<int64_t> shape, InitKind init,
              bool scaledResidual = false, bool transposed = false,
              bool expertShare = false) {
    auto type = RankedTensorType::get(shape, f32_);
    Value v = block_->addArgument(type, loc_);
    double std = arch_.init().std();
    if (scaledResidual && arch_.init().scaled_residual())
      std /= std::sqrt(2.0 * static_cast<double>(arch_.num_layers()));
    auto attr =
        ParamAttr::get(ctx_, name, init, init == InitKind::Normal ? std : 0.0,
                       /*weightDecay=*/shape.size() >= 2, transposed);
    SmallVector<NamedAttribute> attrs = {
        b_.getNamedAttr(BraidDialect::kParamAttr, attr)};
    if (expertShare)
      attrs.push_back(
          b_.getNamedAttr(BraidDialect::kExpertShardAttr, b_.getUnitAttr()));
    argAttrs_.push_back(b_.getDictionaryAttr(attrs));
    return bf16_ ? castAtTop(v) : v;
  }

  // Untrained state (an expert bias): f32 in every plan, zero at the
  // start, no gradient (BraidDialect::kBufferAttr).
  Value buffer(const std::string &name, ArrayRef<int64_t> shape) {
    Value v = block_->addArgument(RankedTensorType::get(shape, f32_), loc_);
    argAttrs_.push_back(b_.getDictionaryAttr(b_.getNamedAttr(
        BraidDialect::kBufferAttr,
        ParamAttr::get(ctx_, name, InitKind::Zeros, 0.0,
                       /*weightDecay=*/false, /*transposed=*/false))));
    return v;
  }

  // The bf16 value compute reads, cast once before any compute: the casts
  // of all parameters lead the step, in order of first use.
  Value castAtTop(Value master) {
    OpBuilder top(ctx_);
    if (lastCast_)
      top.setInsertionPointAfter(lastCast_);
    else
      top.setInsertionPointToStart(block_);
    auto type = RankedTensorType::get(
        cast<RankedTensorType>(master.getType()).getShape(), compute_);
    auto c = CastOp::create(top, loc_, type, master);
    setLayerMark(c, layer_.get());
    lastCast_ = c;
    return c;
  }

  // A linear layer `prefix.weight` [out, in] with an optional
  // `prefix.bias` [out]. GPT-2 stores weights transposed (Conv1D).
  Value linear(Value x, const std::string &prefix, int64_t out,
               bool scaledResidual = false) {
    int64_t in = cast<RankedTensorType>(x.getType()).getShape().back();
    bool transposed = arch_.naming() == spec::HF_GPT2;
    Value w = param(prefix + ".weight", {out, in}, InitKind::Normal,
                    scaledResidual, transposed);
    Value bias;
    if (arch_.linear_bias())
      bias = param(prefix + ".bias", {out}, InitKind::Zeros);
    return LinearOp::create(b_, loc_, act(out), x, w, bias, {});
  }

  Value norm(Value x, const std::string &prefix) {
    int64_t d = arch_.hidden_size();
    auto eps = b_.getF32FloatAttr(arch_.norm_eps());
    Value w = param(prefix + ".weight", {d}, InitKind::Ones);
    if (arch_.norm() == spec::RMS_NORM)
      return RMSNormOp::create(b_, loc_, act(d), rowStat(), x, w, eps)
          .getResult();
    Value bias = param(prefix + ".bias", {d}, InitKind::Zeros);
    return LayerNormOp::create(b_, loc_, act(d), rowStat(), rowStat(), x, w,
                               bias, eps)
        .getResult();
  }

  Value dropout(Value x, double p, int64_t rngOffset) {
    if (p <= 0)
      return x;
    return DropoutOp::create(b_, loc_, x.getType(), x,
                             b_.getF32FloatAttr(p),
                             b_.getI64IntegerAttr(rngOffset), {}, {});
  }

  Value attention(Value q, Value k, Value v, int64_t layer) {
    int64_t heads = arch_.num_heads();
    int64_t headDim = arch_.hidden_size() / heads;
    // The probabilities are activations: bf16 in BF16 plans.
    auto probsType =
        RankedTensorType::get({batch_, heads, seq_, seq_}, compute_);
    // The mask: causal, with a bidirectional prefix (PREFIX_LM) or within
    // documents (DOCUMENT, through documentIds_).
    IntegerAttr prefix;
    if (arch_.attention_mask() == spec::PREFIX_LM)
      prefix = b_.getI64IntegerAttr(arch_.prefix_length());
    auto op = AttentionOp::create(
        b_, loc_, act(heads * headDim), probsType, q, k, v, documentIds_,
        b_.getI64IntegerAttr(heads), b_.getI64IntegerAttr(heads),
        b_.getBoolAttr(true),
        b_.getF32FloatAttr(1.0 / std::sqrt(static_cast<double>(headDim))),
        b_.getF32FloatAttr(train_.attention_dropout()),
        b_.getI64IntegerAttr(1 + 3 * layer), prefix, {}, {}, {});
    return op.getResult();
  }

  Value add(Value a, Value c) {
    return AddOp::create(b_, loc_, a.getType(), a, c);
  }

  Value llamaLayer(Value x, int64_t l);
  Value denseMlp(Value h, const std::string &prefix, int64_t width,
                 const char *gate, const char *up, const char *down);
  Value moeBlock(Value h, int64_t l);
  // The stacked weights of a layer's routed experts.
  struct ExpertWeights {
    Value gate, up, down;
  };
  Value routedExperts(Value h, Value experts, Value weights,
                      const ExpertWeights &stacked);
  bool isMoeLayer(int64_t l) const {
    return arch_.has_moe() && l >= arch_.moe().first_k_dense();
  }
  Value gpt2Layer(Value x, int64_t l);
  void setModuleAttrs(ModuleOp module);

  const spec::ModelSpec &spec_;
  const spec::Architecture &arch_;
  const spec::Training &train_;
  MLIRContext *ctx_;
  OpBuilder b_;
  LayerStamper layer_;
  Location loc_;
  func::FuncOp func_;
  Block *block_ = nullptr;
  Operation *lastCast_ = nullptr;
  Type f32_;
  // The element type of activations and of the weights compute reads.
  Type compute_;
  bool bf16_ = false;
  int64_t batch_ = 0, seq_ = 0;
  // The document of each position with a DOCUMENT mask, else null.
  Value documentIds_;
  SmallVector<Attribute> argAttrs_;
};

Value GraphBuilder::llamaLayer(Value x, int64_t l) {
  std::string p = "model.layers." + std::to_string(l);
  int64_t heads = arch_.num_heads(), kvHeads = arch_.num_kv_heads();
  int64_t headDim = arch_.hidden_size() / heads;
  auto theta = b_.getF32FloatAttr(arch_.rope_theta());

  Value h = norm(x, p + ".input_layernorm");
  Value q = linear(h, p + ".self_attn.q_proj", heads * headDim);
  Value k = linear(h, p + ".self_attn.k_proj", kvHeads * headDim);
  Value v = linear(h, p + ".self_attn.v_proj", kvHeads * headDim);
  q = RoPEOp::create(b_, loc_, q.getType(), q, b_.getI64IntegerAttr(heads),
                     theta, {});
  k = RoPEOp::create(b_, loc_, k.getType(), k, b_.getI64IntegerAttr(kvHeads),
                     theta, {});
  if (kvHeads != heads) {
    auto rep = [&](Value t) -> Value {
      return RepeatKVOp::create(b_, loc_, act(heads * headDim), t,
                                b_.getI64IntegerAttr(heads),
                                b_.getI64IntegerAttr(kvHeads), {}, {});
    };
    k = rep(k);
    v = rep(v);
  }
  Value a = attention(q, k, v, l);
  a = linear(a, p + ".self_attn.o_proj", arch_.hidden_size(),
             /*scaledResidual=*/true);
  x = add(x, dropout(a, train_.hidden_dropout(), 2 + 3 * l));

  h = norm(x, p + ".post_attention_layernorm");
  layer_.setInMoeBlock(isMoeLayer(l));
  Value y = isMoeLayer(l) ? moeBlock(h, l)
                          : denseMlp(h, p + ".mlp", arch_.ffn_hidden_size(),
                                     "gate_proj", "up_proj", "down_proj");
  layer_.setInMoeBlock(false);
  return add(x, dropout(y, train_.hidden_dropout(), 3 + 3 * l));
}

// A SwiGLU MLP of inner width `width`: down(silu(gate(h)) * up(h)).
Value GraphBuilder::denseMlp(Value h, const std::string &prefix, int64_t width,
                             const char *gate, const char *up,
                             const char *down) {
  Value g = linear(h, prefix + "." + gate, width);
  Value u = linear(h, prefix + "." + up, width);
  Value s = SwiGLUOp::create(b_, loc_, g.getType(), g, u);
  return linear(s, prefix + "." + down, arch_.hidden_size(),
                /*scaledResidual=*/true);
}

// A mixture-of-experts layer (docs/moe.md): the router's f32 logits
// choose top_k experts per token; the tokens' rows, permuted into
// expert-major order, go through each expert's SwiGLU as grouped GEMMs
// (dropless) or batched GEMMs over capacity slots, with the stacked
// weights [E, ...], and come back weighted; shared experts run beside, as
// one MLP num_shared_experts times as wide.
// A stacked weight's name holds `*` where the expert's index goes: the
// checkpoint stores expert e's slice under the name with e in its place.
Value GraphBuilder::moeBlock(Value h, int64_t l) {
  const spec::Moe &moe = arch_.moe();
  const bool mixtral = arch_.naming() == spec::HF_MIXTRAL;
  const std::string p = "model.layers." + std::to_string(l) +
                        (mixtral ? ".block_sparse_moe" : ".mlp");
  const int64_t d = arch_.hidden_size(), e = moe.num_experts(), k = moe.top_k(),
                f = moe.expert_ffn_hidden_size();

  Value logits = linear(h, p + ".gate", e);
  if (bf16_)
    logits = CastOp::create(
        b_, loc_, RankedTensorType::get({batch_, seq_, e}, f32_), logits);
  auto choice = [&](Type t) {
    return RankedTensorType::get({batch_, seq_, k}, t);
  };
  // DeepSeek-V3's aux-loss-free balancing: a bias that chooses, never
  // weighs, moved after each step by the step's expert counts.
  Value bias;
  if (moe.expert_bias())
    bias = buffer(p + ".gate.e_score_correction_bias", {e});
  // The unfused router: scores, then the top-k (braid-fuse-moe makes them
  // one moe_route).
  Value scores = MoeScoresOp::create(
      b_, loc_, RankedTensorType::get({batch_, seq_, e}, f32_), logits,
      b_.getBoolAttr(moe.score() == spec::SIGMOID));
  auto route = MoeTopKOp::create(
      b_, loc_, choice(b_.getI32Type()), choice(f32_), scores, bias,
      b_.getBoolAttr(moe.normalize_top_k()),
      b_.getF32FloatAttr(moe.routed_scaling_factor()));
  Value counts;
  if (moe.aux_loss_coeff() > 0 || bias)
    counts = MoeExpertCountsOp::create(
        b_, loc_, RankedTensorType::get({e}, f32_), route.getExperts());
  if (bias)
    MoeBiasUpdateOp::create(b_, loc_, counts, bias,
                            b_.getF64FloatAttr(moe.expert_bias_update_rate()));
  // The balancing losses: side losses whose gradients join the
  // cross-entropy's.
  if (moe.aux_loss_coeff() > 0)
    MoeAuxLossOp::create(
        b_, loc_, RankedTensorType::get({}, f32_), scores, counts,
        b_.getF64FloatAttr(moe.aux_loss_coeff()), b_.getI64IntegerAttr(k),
        b_.getBoolAttr(moe.score() == spec::SIGMOID), IntegerAttr());
  if (moe.z_loss_coeff() > 0)
    MoeZLossOp::create(b_, loc_, RankedTensorType::get({}, f32_), logits,
                       b_.getF64FloatAttr(moe.z_loss_coeff()));
  // Expert parallel (docs/moe.md): each rank holds `local` of the experts.
  const int64_t ep = std::max<int64_t>(1, spec_.parallel().expert_parallel());
  const int64_t local = e / ep;
  auto expertWeight = [&](const char *name, int64_t out, int64_t in,
                          bool scaledResidual) {
    return param(p + ".experts.*." + name + ".weight", {local, out, in},
                 InitKind::Normal, scaledResidual, /*transposed=*/false,
                 /*expertShare=*/ep > 1);
  };
  const ExpertWeights stacked{
      expertWeight(mixtral ? "w1" : "gate_proj", f, d, false),
      expertWeight(mixtral ? "w3" : "up_proj", f, d, false),
      expertWeight(mixtral ? "w2" : "down_proj", d, f,
                   /*scaledResidual=*/true)};
  // Sub-units (docs/moe.md): the tokens cut into equal parts along the
  // sequence after the router, each part permuted, exchanged, computed
  // and combined on its own, the results joined back.
  const int64_t units = moeSubUnits(spec_);
  Value y;
  if (units == 1) {
    y = routedExperts(h, route.getExperts(), route.getWeights(), stacked);
  } else {
    auto split = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(t.getShape());
      shape[1] /= units;
      SmallVector<Type> types(units,
                              RankedTensorType::get(shape, t.getElementType()));
      return MoeSplitTokensOp::create(b_, loc_, types, v).getParts();
    };
    auto hs = split(h), es = split(route.getExperts()),
         ws = split(route.getWeights());
    SmallVector<Value> ys;
    for (int64_t u = 0; u < units; ++u)
      ys.push_back(routedExperts(hs[u], es[u], ws[u], stacked));
    y = MoeJoinTokensOp::create(b_, loc_, act(d), ys);
  }
  if (moe.num_shared_experts() > 0)
    y = add(y, denseMlp(h, p + ".shared_experts",
                        moe.num_shared_experts() * moe.shared_ffn_hidden_size(),
                        "gate_proj", "up_proj", "down_proj"));
  return y;
}

// One unit of an MoE layer's routed experts (the whole layer, or one of
// its sub-units): the tokens `h` [B, S', D] permuted by their router
// choices `experts` into expert-major rows, through the experts (over
// expert parallel's exchanges), and back, summed with `weights`.
Value GraphBuilder::routedExperts(Value h, Value experts, Value weights,
                                  const ExpertWeights &stacked) {
  const spec::Moe &moe = arch_.moe();
  const int64_t d = arch_.hidden_size(), e = moe.num_experts(),
                f = moe.expert_ffn_hidden_size();
  auto tokens = cast<RankedTensorType>(h.getType()).getShape();
  const int64_t capacity = moeCapacity(spec_);
  // Dropless: a row per choice, grouped GEMMs over the experts' blocks.
  // Capacity mode: `capacity` rows per expert (docs/moe.md), one batched
  // GEMM over the E equal blocks.
  const int64_t slots =
      capacity > 0 ? e * capacity : tokens[0] * tokens[1] * moe.top_k();
  // The unfused permutation: where each choice's row goes, then the copy
  // (braid-fuse-moe makes them one moe_permute).
  auto sort = MoeSortOp::create(
      b_, loc_, experts.getType(),
      RankedTensorType::get({e + 1}, b_.getI32Type()), experts,
      capacity > 0 ? b_.getI64IntegerAttr(capacity) : IntegerAttr());
  const Value positions = sort.getPositions(), expertOffsets = sort.getOffsets();
  const Value permuted =
      MoeGatherOp::create(b_, loc_, RankedTensorType::get({slots, d}, compute_),
                          h, positions);
  Value offsets = expertOffsets;
  Value rows = permuted;
  // Expert parallel (docs/moe.md): each rank holds `local` of the experts;
  // the group's counts are gathered, every row goes to its expert's rank
  // (arriving sender by sender, in blocks of the rank's experts) and comes
  // back after the experts. The receiving rank has room for the dropless
  // bound, or in capacity mode for every sender's slots of its experts
  // (as many as it sends: E x capacity), padding included; the blocks
  // then go through grouped GEMMs (each sender's slots of an expert are
  // one block).
  const int64_t ep = std::max<int64_t>(1, spec_.parallel().expert_parallel());
  const int64_t local = e / ep;
  auto ids = [&](int64_t n) {
    return RankedTensorType::get({n}, b_.getI32Type());
  };
  auto epAxis = CommAxisAttr::get(ctx_, CommAxis::Ep);
  // Hot-expert replication (docs/moe.md): the hot experts' rows stay on
  // their rank and go through replicas of their weights; the exchanges
  // move the others' by the counts without them.
  const int64_t hotSlots = moeHotSlots(spec_);
  Value all, hot, hotRows, hotOffsets;
  if (ep > 1) {
    Value counts = MoeBlockCountsOp::create(b_, loc_, ids(e), offsets);
    all = CommAllGatherOp::create(b_, loc_, ids(ep * e), counts, epAxis,
                                  IntegerAttr());
    if (hotSlots > 0) {
      auto choice = MoeHotExpertsOp::create(
          b_, loc_, ids(hotSlots), ids(ep * e), all,
          b_.getI64IntegerAttr(ep),
          b_.getF64FloatAttr(moeReplicationThreshold(spec_)));
      hot = choice.getHot();
      all = choice.getCold();
      auto split = MoeSplitRowsOp::create(
          b_, loc_, rows.getType(),
          RankedTensorType::get({moeHotRows(spec_), d}, compute_),
          ids(hotSlots + 1), rows, offsets, hot);
      rows = split.getCold();
      hotRows = split.getHotRows();
      hotOffsets = split.getHotOffsets();
    }
    const int64_t received = capacity > 0 ? slots : moeDroplessBound(spec_);
    rows = CommDispatchOp::create(
        b_, loc_, RankedTensorType::get({received, d}, compute_), rows, all,
        epAxis);
    offsets = MoeEpOffsetsOp::create(b_, loc_, ids(ep * local + 1), all);
  }
  auto rowsOf = [&](Value like, int64_t width) {
    return RankedTensorType::get(
        {cast<RankedTensorType>(like.getType()).getDimSize(0), width},
        compute_);
  };
  auto run = [&](Value xs, Value gateW, Value upW, Value downW,
                 Value blocks) -> Value {
    auto gemm = [&](Value x, Value w, int64_t out) -> Value {
      if (capacity > 0 && ep == 1)
        return MoeBatchedLinearOp::create(b_, loc_, rowsOf(x, out), x, w);
      return MoeGroupedLinearOp::create(b_, loc_, rowsOf(x, out), x, w,
                                        blocks, IntegerAttr());
    };
    Value gate = gemm(xs, gateW, f);
    Value up = gemm(xs, upW, f);
    Value s = SwiGLUOp::create(b_, loc_, gate.getType(), gate, up);
    return gemm(s, downW, d);
  };
  Value down = run(rows, stacked.gate, stacked.up, stacked.down, offsets);
  if (ep > 1)
    down = CommCombineOp::create(b_, loc_, rowsOf(permuted, d), down,
                                 all, epAxis);
  if (hot) {
    // The replicas copy the f32 masters, so that their gradients sum in
    // f32 into the owner's, and are cast for compute like the masters.
    auto replica = [&](Value w) -> Value {
      Value master = w;
      if (auto c = w.getDefiningOp<CastOp>())
        master = c.getInput();
      auto type = cast<RankedTensorType>(master.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = hotSlots;
      Value r = CommReplicateExpertsOp::create(
          b_, loc_, RankedTensorType::get(shape, f32_), master, hot, epAxis);
      if (!bf16_)
        return r;
      return CastOp::create(b_, loc_, RankedTensorType::get(shape, compute_),
                            r);
    };
    Value hotDown = run(hotRows, replica(stacked.gate), replica(stacked.up),
                        replica(stacked.down), hotOffsets);
    down = MoeMergeRowsOp::create(b_, loc_, down.getType(), down, hotDown,
                                  expertOffsets, hot);
  }
  // The unfused unpermutation: each token's K rows, then their weighted
  // sum (braid-fuse-moe makes them one moe_unpermute).
  Value chosen = MoeGatherChoicesOp::create(
      b_, loc_,
      RankedTensorType::get({tokens[0], tokens[1], moe.top_k(), d}, compute_),
      down, positions);
  return MoeWeightedSumOp::create(b_, loc_, h.getType(), chosen, weights);
}

Value GraphBuilder::gpt2Layer(Value x, int64_t l) {
  std::string p = "transformer.h." + std::to_string(l);
  int64_t d = arch_.hidden_size();

  Value h = norm(x, p + ".ln_1");
  Value qkv = linear(h, p + ".attn.c_attn", 3 * d);
  auto split = SplitOp::create(b_, loc_, TypeRange{act(d), act(d), act(d)},
                               qkv);
  Value a = attention(split.getResult(0), split.getResult(1),
                      split.getResult(2), l);
  a = linear(a, p + ".attn.c_proj", d, /*scaledResidual=*/true);
  x = add(x, dropout(a, train_.hidden_dropout(), 2 + 3 * l));

  h = norm(x, p + ".ln_2");
  Value f = linear(h, p + ".mlp.c_fc", arch_.ffn_hidden_size());
  f = GeLUOp::create(b_, loc_, f.getType(), f);
  Value y = linear(f, p + ".mlp.c_proj", d, /*scaledResidual=*/true);
  return add(x, dropout(y, train_.hidden_dropout(), 3 + 3 * l));
}

void GraphBuilder::build() {
  bool gpt2 = arch_.naming() == spec::HF_GPT2;
  int64_t vocab = arch_.vocab_size(), d = arch_.hidden_size();
  std::string prefix = gpt2 ? "transformer." : "model.";

  Value tokens = input(InputRole::Tokens);
  Value labels = input(InputRole::Labels);
  Value positions;
  if (arch_.position_embedding() == spec::LEARNED)
    positions = input(InputRole::Positions);
  if (arch_.attention_mask() == spec::DOCUMENT)
    documentIds_ = DocumentIdsOp::create(
        b_, loc_, tokens.getType(), tokens,
        b_.getI64IntegerAttr(arch_.document_separator()));

  Value table =
      param(gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight",
            {vocab, d}, InitKind::Normal);
  Value x = EmbeddingOp::create(b_, loc_, act(d), table, tokens, {});
  if (positions) {
    Value posTable =
        param(gpt2 ? "transformer.wpe.weight" : "model.embed_positions.weight",
              {arch_.max_position_embeddings(), d}, InitKind::Normal);
    x = add(x, EmbeddingOp::create(b_, loc_, act(d), posTable, positions, {}));
  }
  x = dropout(x, train_.hidden_dropout(), 0);

  for (int64_t l = 0; l < arch_.num_layers(); ++l) {
    layer_.set(LayerAttr::get(ctx_, l));
    x = gpt2 ? gpt2Layer(x, l) : llamaLayer(x, l);
  }

  layer_.set(LayerAttr::loss(ctx_));

  x = norm(x, gpt2 ? "transformer.ln_f" : "model.norm");
  Value head = table;
  if (!arch_.tie_embeddings())
    head = param("lm_head.weight", {vocab, d}, InitKind::Normal);
  Value logits = LinearOp::create(b_, loc_, act(vocab), x, head, Value(), {});
  auto loss = CrossEntropyOp::create(
      b_, loc_, RankedTensorType::get({}, f32_), rowStat(), logits, labels);
  b_.setListener(nullptr);
  func::ReturnOp::create(b_, loc_, loss.getLoss());

  func_.setFunctionType(b_.getFunctionType(block_->getArgumentTypes(),
                                           {loss.getLoss().getType()}));
  func_.setAllArgAttrs(argAttrs_);
  func_.setResultAttr(0, "braid.loss", b_.getUnitAttr());
  setModuleAttrs(func_->getParentOfType<ModuleOp>());
}

void GraphBuilder::setModuleAttrs(ModuleOp module) {
  const bool learned = arch_.position_embedding() == spec::LEARNED;
  int64_t numParams = 0;
  // The model's: an expert-parallel share counts as the whole it is part of.
  const int64_t ep = std::max<int64_t>(1, spec_.parallel().expert_parallel());
  for (auto [t, attrs] : llvm::zip(func_.getArgumentTypes(), argAttrs_)) {
    auto dict = cast<DictionaryAttr>(attrs);
    if (dict.contains(BraidDialect::kParamAttr))
      numParams += cast<RankedTensorType>(t).getNumElements() *
                   (dict.contains(BraidDialect::kExpertShardAttr) ? ep : 1);
  }

  module->setAttr("braid.name", b_.getStringAttr(spec_.name()));
  // braid-recompute parses it (the spec's rules already did).
  if (const std::string &policy = spec_.compile().recompute();
      !policy.empty() && policy != "none")
    module->setAttr(BraidDialect::kRecomputeAttr, b_.getStringAttr(policy));
  // braid-offload parses it and resolves its stages to layers (the spec's
  // rules already checked that every target exists).
  if (const std::string &targets = spec_.compile().offload();
      !targets.empty() && targets != "none")
    module->setAttr(BraidDialect::kOffloadAttr, b_.getStringAttr(targets));
  // In bytes (the spec's rules bound it to 2^62).
  if (const double gib = spec_.compile().memory_budget_gb(); gib > 0)
    module->setAttr(BraidDialect::kMemoryBudgetAttr,
                    b_.getI64IntegerAttr(
                        static_cast<int64_t>(gib * double(int64_t{1} << 30))));
  module->setAttr(
      BraidDialect::kModelAttr,
      ModelAttr::get(
          ctx_,
          arch_.naming() == spec::HF_GPT2 ? ModelFamily::Gpt2
                                          : ModelFamily::Llama,
          arch_.vocab_size(), arch_.hidden_size(), arch_.num_layers(),
          arch_.num_heads(), arch_.num_kv_heads(), arch_.ffn_hidden_size(),
          numParams, modelFlopsPerToken(spec_),
          arch_.activation() == spec::SWIGLU ? Activation::SwiGLU
                                             : Activation::GeluTanh,
          asF32(arch_.norm_eps()), learned ? 0.0 : asF32(arch_.rope_theta()),
          learned ? arch_.max_position_embeddings() : seq_,
          arch_.hidden_size() / arch_.num_heads(), arch_.tie_embeddings(),
          arch_.linear_bias(), asF32(train_.hidden_dropout()),
          asF32(train_.attention_dropout())));
  if (arch_.has_moe()) {
    const spec::Moe &moe = arch_.moe();
    auto i64 = [&](int64_t v) { return b_.getI64IntegerAttr(v); };
    module->setAttr(
        BraidDialect::kMoeAttr,
        b_.getDictionaryAttr({
            b_.getNamedAttr("naming",
                            b_.getStringAttr(arch_.naming() == spec::HF_MIXTRAL
                                                 ? "mixtral"
                                                 : "deepseek_v3")),
            b_.getNamedAttr("num_experts", i64(moe.num_experts())),
            b_.getNamedAttr("top_k", i64(moe.top_k())),
            b_.getNamedAttr("expert_ffn_hidden_size",
                            i64(moe.expert_ffn_hidden_size())),
            b_.getNamedAttr("num_shared_experts",
                            i64(moe.num_shared_experts())),
            b_.getNamedAttr("shared_ffn_hidden_size",
                            i64(moe.shared_ffn_hidden_size())),
            b_.getNamedAttr("first_k_dense", i64(moe.first_k_dense())),
            b_.getNamedAttr("sigmoid",
                            b_.getBoolAttr(moe.score() == spec::SIGMOID)),
            b_.getNamedAttr("normalize_top_k",
                            b_.getBoolAttr(moe.normalize_top_k())),
            b_.getNamedAttr("routed_scaling_factor",
                            b_.getF64FloatAttr(moe.routed_scaling_factor())),
            b_.getNamedAttr("aux_loss_coeff",
                            b_.getF64FloatAttr(moe.aux_loss_coeff())),
            b_.getNamedAttr("z_loss_coeff",
                            b_.getF64FloatAttr(moe.z_loss_coeff())),
        }));
  }
  const auto &opt = train_.adamw();
  const auto &schedule = train_.lr_schedule();
  const auto &parallel = spec_.parallel();
  module->setAttr(BraidDialect::kMeshAttr,
                  MeshAttr::get(ctx_, parallel.tensor_parallel(),
                                parallel.context_parallel(),
                                parallel.pipeline_parallel(),
                                parallel.data_parallel(),
                                std::max<int64_t>(
                                    1, parallel.expert_parallel())));
  if (parallel.tensor_parallel() > 1 && parallel.sequence_parallel())
    module->setAttr(BraidDialect::kSequenceParallelAttr, b_.getUnitAttr());
  if (parallel.context_parallel() > 1 &&
      parallel.cp_comm_type() == spec::ALL_GATHER)
    module->setAttr(BraidDialect::kCpAllGatherAttr, b_.getUnitAttr());
  // Default pieces: 4 per row-parallel GEMM, 2 per block of sequence
  // parallel's rings (a block is already 1/TP of the GEMM).
  if (parallel.tensor_parallel() > 1 && parallel.tp_comm_overlap()) {
    const int64_t chunks = parallel.tp_comm_chunks() > 0
                               ? parallel.tp_comm_chunks()
                               : (parallel.sequence_parallel() ? 2 : 4);
    module->setAttr(BraidDialect::kTpCommChunksAttr,
                    b_.getI64IntegerAttr(chunks));
    if (parallel.tp_comm_pair_micro_batches())
      module->setAttr(BraidDialect::kTpCommPairsAttr, b_.getUnitAttr());
  }
  if (parallel.expert_parallel() > 1 && parallel.ep_comm_overlap())
    module->setAttr(BraidDialect::kEpCommOverlapAttr, b_.getUnitAttr());
  if (const int64_t kept = moeAdaptiveRows(spec_); kept > 0)
    module->setAttr(BraidDialect::kMoeAdaptiveRowsAttr,
                    b_.getI64IntegerAttr(kept));
  if (const int64_t hot = moeHotSlots(spec_); hot > 0)
    module->setAttr(BraidDialect::kMoeHotExpertsAttr,
                    b_.getI64IntegerAttr(hot));
  if (parallel.pipeline_parallel() > 1) {
    SmallVector<NamedAttribute> settings = {
        b_.getNamedAttr("schedule",
                        b_.getStringAttr(pipeline::familyName(pipelineFamily(
                            parallel.pipeline_schedule())))),
        b_.getNamedAttr("virtual_stages",
                        b_.getI64IntegerAttr(parallel.virtual_stages()))};
    if (!parallel.pipeline_layout().empty())
      settings.push_back(b_.getNamedAttr(
          "layout", b_.getStringAttr(parallel.pipeline_layout())));
    module->setAttr(BraidDialect::kPipelineAttr,
                    b_.getDictionaryAttr(settings));
  }
  // Buckets group gradients for the data-parallel reduction and
  // parameters for optimizer offload's copies and host AdamW.
  absl::StatusOr<OffloadTargets> offload =
      parseOffloadTargets(spec_.compile().offload());
  if (parallel.data_parallel() > 1 || parallel.context_parallel() > 1 ||
      parallel.zero_stage() > 0 || (offload.ok() && offload->optimizer))
    module->setAttr(BraidDialect::kBucketMbAttr,
                    b_.getF64FloatAttr(parallel.bucket_mb()));
  if (parallel.zero_stage() > 0)
    module->setAttr(BraidDialect::kZeroStageAttr,
                    b_.getI64IntegerAttr(parallel.zero_stage()));
  if (parallel.comm_chunks() > 1)
    module->setAttr(BraidDialect::kCommChunksAttr,
                    b_.getI64IntegerAttr(parallel.comm_chunks()));
  module->setAttr(
      BraidDialect::kTrainAttr,
      TrainAttr::get(
          ctx_, train_.seed(), train_.micro_batch_size(),
          // Per rank: each data-parallel rank accumulates its share.
          train_.global_batch_size() /
              (train_.micro_batch_size() * parallel.data_parallel()),
          train_.seq_len(), train_.steps(), opt.lr(), opt.beta1(),
          opt.beta2(), opt.eps(), opt.weight_decay(), train_.grad_clip(),
          schedule.warmup_steps(),
          schedule.decay() == spec::CONSTANT ? LrDecay::Constant
                                             : LrDecay::Cosine,
          schedule.min_lr(), bf16_ ? Precision::BF16 : Precision::FP32));
}

} // namespace

double modelFlopsPerToken(const spec::ModelSpec &spec) {
  const auto &a = spec.model();
  double d = a.hidden_size(), f = a.ffn_hidden_size();
  double headDim = d / a.num_heads();
  double kv = a.num_kv_heads() * headDim;
  double attnWeights = d * d * 2 + 2 * d * kv; // q, o and k, v projections
  double mlpWeights = (a.activation() == spec::SWIGLU ? 3 : 2) * d * f;
  double linear = a.num_layers() * (attnWeights + mlpWeights) +
                  static_cast<double>(a.vocab_size()) * d;
  if (a.has_moe()) {
    // A token goes through the router, top_k routed experts and the
    // shared ones: the weights it multiplies, not the model's.
    const spec::Moe &m = a.moe();
    const double moeLayers = a.num_layers() - m.first_k_dense();
    const double active =
        d * m.num_experts() +
        3 * d *
            (m.top_k() * double(m.expert_ffn_hidden_size()) +
             m.num_shared_experts() * double(m.shared_ffn_hidden_size()));
    linear += moeLayers * (active - mlpWeights);
  }
  double attention = 12.0 * a.num_layers() * spec.train().seq_len() * d;
  return 6.0 * linear + attention;
}

LogicalResult importSpec(const spec::ModelSpec &spec, ModuleOp module) {
  if (!module.getBody()->empty())
    return module.emitError("braid-import expects an empty module");
  // What of model.moe (docs/moe.md) does not compile yet.
  if (spec.model().has_moe()) {
    const char *missing = nullptr;
    const spec::ParallelLayout &par = spec.parallel();
    if (par.context_parallel() > 1 && spec.model().moe().capacity_factor() > 0)
      missing = "context_parallel with capacity_factor (each rank would "
                "drop by its own part of the sequence, not as one rank "
                "drops); use dropless experts or leave context_parallel out";
    else if (moeSubUnits(spec) > 1 && spec.model().moe().capacity_factor() > 0)
      missing = "parallel.ep_sub_units with capacity_factor (each sub-unit "
                "would drop by its own tokens, not as the layer drops); use "
                "dropless experts or leave ep_sub_units out";
    else if (par.zero_stage() >= 1 && spec.model().moe().hot_experts() > 0 &&
             spec.train().precision() == spec::BF16)
      missing = "parallel.zero_stage with hot_experts in a BF16 plan (the "
                "replicas copy the f32 masters, which ZeRO shards, while "
                "compute reads their whole bf16 copies); use FP32, or leave "
                "zero_stage or hot_experts out";
    else if (moeSubUnits(spec) > 1 && spec.model().moe().hot_experts() > 0)
      missing = "parallel.ep_sub_units with hot_experts; leave one of them "
                "out";
    if (missing)
      return module.emitError() << "braid-import: model.moe: " << missing
                                << " (does not compile yet, docs/moe.md)";
  }
  GraphBuilder(spec, module).build();
  return success();
}

} // namespace braid
