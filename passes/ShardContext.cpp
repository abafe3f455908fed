//===- ShardContext.cpp - context-parallel layouts and their collectives --===//
//
// The context-parallel half of braid-shard (see ShardContext.h). Every
// sequence is cut into 2 * CP chunks and each CP rank keeps chunks r and
// 2 * CP - 1 - r (SequenceLayout.h), so that under a causal mask every rank
// has the same attention work. Everything but attention acts on each token
// alone, so the rewrite is small:
//  * the inputs (tokens, labels, positions) are taken apart by
//    braid.take_part along cp; the document ids of a DOCUMENT mask are still
//    computed from the whole tokens, since a rank's queries see keys of the
//    whole sequence;
//  * every activation's sequence dimension (dimension 1) shrinks to the
//    rank's part; weight gradients stay whole: each rank's is its tokens'
//    part of the sum, which braid-lower-to-sched sums over CP with the
//    data-parallel reduction;
//  * RoPE and dropout learn that their positions are the rank's (`cp`,
//    `cp_dim`), so they rotate and draw what one rank would;
//  * a mixture-of-experts block routes the rank's tokens: its permuted
//    rows are those of the rank's tokens, and the expert counts are summed
//    over the group for the balancing loss and the expert bias;
//  * attention reaches the other ranks' keys and values. With
//    braid.cp_all_gather, the keys and values are all-gathered along the
//    sequence before the attention (and again before its backward) and
//    the key and value gradients reduce-scattered after it. Otherwise it
//    becomes ring attention: CP flash-attention steps, the key and value
//    blocks passed one rank on between steps (braid.comm.shift), the
//    steps' outputs joined by their log-sum-exp (braid.attention_merge);
//    backward passes the blocks the other way with their gradients, each
//    rank adding its part to a block's gradient before passing it on, so
//    that after CP - 1 steps every block's gradient is back with its owner.
//    No rank ever holds the whole sequence's keys.
//
//===----------------------------------------------------------------------===//

#include "passes/ShardContext.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"

#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"

using namespace mlir;

namespace braid {
namespace {

class ContextSharder {
public:
  ContextSharder(func::FuncOp func, int64_t cp, int64_t seqLen, bool allGather)
      : func_(func), ctx_(func.getContext()), b_(ctx_), cp_(cp),
        seqLen_(seqLen), allGather_(allGather) {}

  LogicalResult run();

private:
  bool isPart(Value v) const { return parts_.contains(v); }
  // `v`'s type with dimension `dim` (the sequence) cut to the rank's part.
  Type partType(Value v, int64_t dim = 1) const {
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] /= cp_;
    return RankedTensorType::get(shape, t.getElementType());
  }
  // Makes `v` the rank's part of the sequence along `dim`.
  LogicalResult shrink(Value v, int64_t dim = 1);
  // Makes `v`, a mixture-of-experts block's permuted rows [R, D] (a row
  // per choice of the tokens), the rows of the rank's tokens.
  LogicalResult shrinkRows(Value v);
  LogicalResult visitMoe(Operation *op);
  LogicalResult takeInputs();
  LogicalResult visit(Operation *op);
  LogicalResult perToken(Operation *op);
  LogicalResult gatherAttention(AttentionOp at);
  LogicalResult gatherAttentionGrad(AttentionGradInputOp g);
  LogicalResult ringAttention(AttentionOp at);
  LogicalResult ringAttentionGrad(AttentionGradInputOp g);
  // The whole sequence of part `v`, gathered right before `user`.
  Value gather(Value v, Operation *user);
  Value shift(Value v, int64_t offset, Operation *marks);
  CommAxisAttr cpAxis() { return CommAxisAttr::get(ctx_, CommAxis::Cp); }
  template <typename OpT, typename... Args>
  OpT make(Operation *marks, Args &&...args) {
    auto op = OpT::create(b_, marks->getLoc(), std::forward<Args>(args)...);
    copyMarks(marks, op);
    return op;
  }

  // What ring attention's backward needs of its forward: the joined output
  // and lse, by the probabilities the reference forward returned.
  struct RingForward {
    AttentionOp op;
    Value output, lse;
  };

  func::FuncOp func_;
  MLIRContext *ctx_;
  OpBuilder b_;
  const int64_t cp_, seqLen_;
  const bool allGather_;
  DenseSet<Value> parts_;
  // The parts that are permuted rows, dimension 0 cut.
  DenseSet<Value> rows_;
  DenseMap<Value, RingForward> ring_;
  // An MoE layer's sub-units (moe_split_tokens) hold equal parts of the
  // sequence, this many positions each; each rank's part of a sub-unit is
  // its share of the rank's tokens.
  int64_t unitLen_ = 0;
};

LogicalResult ContextSharder::shrink(Value v, int64_t dim) {
  auto t = cast<RankedTensorType>(v.getType());
  const bool sequence =
      t.getRank() > dim && (t.getDimSize(dim) == seqLen_ ||
                            (unitLen_ > 0 && t.getDimSize(dim) == unitLen_));
  if (!sequence || t.getDimSize(dim) % cp_ != 0) {
    Operation *where = v.getDefiningOp() ? v.getDefiningOp()
                                         : func_.getOperation();
    return where->emitOpError()
           << "braid-shard: expected the sequence (" << seqLen_
           << " positions) along dimension " << dim << " of " << t
           << " to cut it into " << cp_ << " context-parallel parts";
  }
  v.setType(partType(v, dim));
  parts_.insert(v);
  return success();
}

LogicalResult ContextSharder::shrinkRows(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() != 2 || t.getDimSize(0) % cp_ != 0) {
    Operation *where = v.getDefiningOp() ? v.getDefiningOp()
                                         : func_.getOperation();
    return where->emitOpError()
           << "braid-shard: expected permuted rows [R, D] with R a multiple "
              "of "
           << cp_ << " to cut them into context-parallel parts, not " << t;
  }
  v.setType(partType(v, 0));
  parts_.insert(v);
  rows_.insert(v);
  return success();
}

// The inputs are whole on every rank (the data loader gives each rank of a
// CP group the same sequences); each op reads its rank's part, except the
// document ids, which number the documents of the whole sequence.
LogicalResult ContextSharder::takeInputs() {
  for (BlockArgument arg : func_.getArguments()) {
    if (!func_.getArgAttr(arg.getArgNumber(), BraidDialect::kInputAttr))
      continue;
    SmallVector<OpOperand *> readers;
    for (OpOperand &use : arg.getUses())
      if (!isa<DocumentIdsOp>(use.getOwner()))
        readers.push_back(&use);
    if (readers.empty())
      continue;
    Operation *first = readers.front()->getOwner();
    for (OpOperand *use : readers)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    b_.setInsertionPoint(first);
    auto part = make<TakePartOp>(first, partType(arg), arg,
                                 b_.getI64IntegerAttr(1), cpAxis());
    for (OpOperand *use : readers)
      use->set(part.getResult());
    parts_.insert(part.getResult());
  }
  return success();
}

// An op of one token at a time: its activations become parts; its weight
// gradients stay whole (each rank's tokens' part of the sum). Over an MoE
// block's permuted rows (the experts' GEMMs, their SwiGLU) the results are
// rows too.
LogicalResult ContextSharder::perToken(Operation *op) {
  if (!llvm::any_of(op->getOperands(), [&](Value v) { return isPart(v); }))
    return success();
  if (op->hasTrait<WeightGradient>())
    return success();
  const bool overRows =
      llvm::any_of(op->getOperands(), [&](Value v) { return rows_.contains(v); });
  for (Value r : op->getResults())
    if (cast<RankedTensorType>(r.getType()).getRank() >= 2 &&
        failed(overRows ? shrinkRows(r) : shrink(r)))
      return failure();
  return success();
}

// A mixture-of-experts block (docs/moe.md) routes each token alone, so each
// rank routes its own tokens: token tensors are cut along the sequence and
// the permuted rows (a row per choice) to the rank's tokens' rows. The
// expert counts are summed over the group, so that the balancing loss and
// the expert bias's load count the whole sequence; the loss then divides
// by the parts, whose losses the group averages.
LogicalResult ContextSharder::visitMoe(Operation *op) {
  // Expert parallel: a rank sends its tokens' rows and receives what the
  // plan holds room for (the dropless bound is already a CP rank's, T / CP
  // tokens); the rows that come back are its tokens' again.
  if (auto combine = dyn_cast<CommCombineOp>(op))
    return shrinkRows(combine.getResult());
  // Hot-expert replication: the rank's rows split into the cold ones (its
  // tokens' rows) and the hot experts' rows, which the plan holds room for
  // as a CP rank's (T / CP tokens).
  if (auto split = dyn_cast<MoeSplitRowsOp>(op))
    return isPart(split.getRows()) ? shrinkRows(split.getCold()) : success();
  if (!llvm::any_of(op->getOperands(), [&](Value v) { return isPart(v); }))
    return success();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<MoeGatherOp, MoeGatherChoicesGradOp>(
          [&](Operation *o) { return shrinkRows(o->getResult(0)); })
      .Case<MoeGatherChoicesOp, MoePermuteGradOp, MoeUnpermuteOp>(
          [&](Operation *o) { return shrink(o->getResult(0)); })
      .Case([&](MoePermuteOp p) -> LogicalResult {
        if (failed(shrinkRows(p.getRows())))
          return failure();
        return shrink(p.getPositions());
      })
      .Case([&](MoeUnpermuteGradOp g) -> LogicalResult {
        if (failed(shrinkRows(g.getRowsGrad())))
          return failure();
        return shrink(g.getWeightsGrad());
      })
      .Case([&](MoeExpertCountsOp c) {
        b_.setInsertionPointAfter(c);
        auto sum = make<CommAllReduceOp>(c, c.getCounts().getType(),
                                         c.getCounts(), cpAxis());
        c.getCounts().replaceAllUsesExcept(sum.getResult(), sum);
        return success();
      })
      .Case<MoeAuxLossOp, MoeAuxLossGradOp>([&](Operation *o) {
        o->setAttr("parts", IntegerAttr::get(IntegerType::get(ctx_, 64), cp_));
        return perToken(o);
      })
      // The receive room is already a CP rank's.
      .Case([](CommDispatchOp) { return success(); })
      .Case([&](MoeSplitTokensOp split) {
        unitLen_ =
            cast<RankedTensorType>(split.getParts()[0].getType()).getDimSize(1);
        return perToken(split);
      })
      .Default([&](Operation *o) { return perToken(o); });
}



Value ContextSharder::gather(Value v, Operation *user) {
  b_.setInsertionPoint(user);
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape[1] *= cp_;
  return make<CommAllGatherOp>(
             user, RankedTensorType::get(shape, t.getElementType()), v,
             cpAxis(), b_.getI64IntegerAttr(1))
      .getResult();
}

Value ContextSharder::shift(Value v, int64_t offset, Operation *marks) {
  return make<CommShiftOp>(marks, v.getType(), v, cpAxis(),
                           b_.getI64IntegerAttr(offset))
      .getResult();
}

LogicalResult ContextSharder::gatherAttention(AttentionOp at) {
  at.getKeyMutable().assign(gather(at.getKey(), at));
  at.getValueMutable().assign(gather(at.getValue(), at));
  at.setCpAttr(b_.getBoolAttr(true));
  if (failed(shrink(at.getResult())))
    return failure();
  return shrink(at.getProbs(), 2);
}

// The keys and values are gathered again for backward, so that the
// forward's whole copies need not live until then; the key and value
// gradients (the whole sequence's, this rank's queries' part of their sum)
// are reduce-scattered back to the parts.
LogicalResult ContextSharder::gatherAttentionGrad(AttentionGradInputOp g) {
  g.getKeyMutable().assign(gather(g.getKey(), g));
  g.getValueMutable().assign(gather(g.getValue(), g));
  g.setCpAttr(b_.getBoolAttr(true));
  if (failed(shrink(g.getQueryGrad())))
    return failure();
  b_.setInsertionPointAfter(g);
  for (Value whole : {g.getKeyGrad(), g.getValueGrad()}) {
    auto scatter = make<CommReduceScatterOp>(g, partType(whole), whole,
                                             cpAxis(),
                                             b_.getI64IntegerAttr(1));
    whole.replaceAllUsesExcept(scatter.getResult(), scatter);
    parts_.insert(scatter.getResult());
  }
  return success();
}

// Step t attends to the block of the rank t before this one (received by t
// shifts); each step's output joins the ones before by their lse.
LogicalResult ContextSharder::ringAttention(AttentionOp at) {
  if (failed(shrink(at.getResult())))
    return failure();
  b_.setInsertionPoint(at);
  auto o = cast<RankedTensorType>(at.getResult().getType());
  const int64_t heads = static_cast<int64_t>(at.getNumHeads());
  auto lseType = RankedTensorType::get({o.getDimSize(0), heads, o.getDimSize(1)},
                                       b_.getF32Type());
  IntegerAttr prefix =
      at.getPrefixAttr() ? at.getPrefixAttr() : b_.getI64IntegerAttr(0);
  Value k = at.getKey(), v = at.getValue(), out, lse;
  for (int64_t t = 0; t < cp_; ++t) {
    if (t > 0) {
      k = shift(k, 1, at);
      v = shift(v, 1, at);
    }
    auto step = make<FlashAttentionOp>(
        at, o, lseType, at.getQuery(), k, v, at.getSegmentIds(),
        at.getNumHeadsAttr(), at.getNumKvHeadsAttr(), at.getCausalAttr(),
        prefix, at.getScaleAttr(), at.getDropoutAttr(), at.getRngOffsetAttr(),
        at.getHeadShardAttr(), b_.getBoolAttr(true),
        b_.getI64IntegerAttr(t));
    if (t == 0) {
      out = step.getResult();
      lse = step.getLse();
      continue;
    }
    auto merged = make<AttentionMergeOp>(at, o, lseType, out, lse,
                                         step.getResult(), step.getLse(),
                                         at.getNumHeadsAttr());
    out = merged.getResult();
    lse = merged.getLse();
  }
  at.getResult().replaceAllUsesWith(out);
  for (Value r : {out, lse})
    parts_.insert(r);
  ring_[at.getProbs()] = {at, out, lse};
  return success();
}

// Backward runs the steps in reverse. The block of step t is passed back
// from the next rank (shift -1), and so is the gradient that the ranks
// after this one gave that block, to which this rank adds its step's part;
// after step 0 each rank holds its own block's whole gradient.
LogicalResult ContextSharder::ringAttentionGrad(AttentionGradInputOp g) {
  auto it = ring_.find(g.getProbs());
  if (it == ring_.end())
    return g.emitOpError("braid-shard: this attention gradient reads "
                         "probabilities no attention of this step made");
  const RingForward &fwd = it->second;
  AttentionOp at = fwd.op;
  b_.setInsertionPoint(g);
  IntegerAttr prefix =
      g.getPrefixAttr() ? g.getPrefixAttr() : b_.getI64IntegerAttr(0);
  Value k0 = g.getKey(), v0 = g.getValue();
  Value k = k0, v = v0, dq, dk, dv;
  for (int64_t t = cp_ - 1; t >= 0; --t) {
    k = t == 0 ? k0 : shift(k, -1, g);
    v = t == 0 ? v0 : shift(v, -1, g);
    auto step = make<FlashAttentionGradInputOp>(
        g, g.getQuery().getType(), k.getType(), v.getType(), g.getGrad(),
        g.getQuery(), k, v, fwd.output, fwd.lse, g.getSegmentIds(),
        g.getNumHeadsAttr(), g.getNumKvHeadsAttr(), g.getCausalAttr(), prefix,
        g.getScaleAttr(), g.getDropoutAttr(), g.getRngOffsetAttr(),
        at.getHeadShardAttr(), b_.getBoolAttr(true), b_.getI64IntegerAttr(t));
    auto accumulate = [&](Value sum, Value mine, bool passed) -> Value {
      if (!sum)
        return mine;
      Value before = passed ? shift(sum, -1, g) : sum;
      return make<AddOp>(g, mine.getType(), before, mine).getResult();
    };
    dq = accumulate(dq, step.getQueryGrad(), false);
    dk = accumulate(dk, step.getKeyGrad(), true);
    dv = accumulate(dv, step.getValueGrad(), true);
  }
  g.getQueryGrad().replaceAllUsesWith(dq);
  g.getKeyGrad().replaceAllUsesWith(dk);
  g.getValueGrad().replaceAllUsesWith(dv);
  for (Value r : {dq, dk, dv})
    parts_.insert(r);
  g.erase();
  return success();
}

LogicalResult ContextSharder::visit(Operation *op) {
  auto yes = BoolAttr::get(ctx_, true);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](TakePartOp) { return success(); })
      .Case([&](DocumentIdsOp) { return success(); })
      .Case([&](AttentionOp a) {
        return allGather_ ? gatherAttention(a) : ringAttention(a);
      })
      .Case([&](AttentionGradInputOp g) {
        return allGather_ ? gatherAttentionGrad(g) : ringAttentionGrad(g);
      })
      .Case<RoPEOp, RoPEGradInputOp>([&](Operation *r) {
        r->setAttr("cp", yes);
        return perToken(r);
      })
      .Case<DropoutOp, DropoutGradInputOp>([&](Operation *d) {
        d->setAttr("cp_dim", IntegerAttr::get(IntegerType::get(ctx_, 64), 1));
        return perToken(d);
      })
      .Case<MoeScoresOp, MoeScoresGradOp, MoeTopKOp, MoeTopKGradOp, MoeRouteOp,
            MoeRouteGradOp, MoeExpertCountsOp, MoeAuxLossOp, MoeAuxLossGradOp,
            MoeZLossOp, MoeZLossGradOp, MoeBiasUpdateOp, MoeSortOp, MoeGatherOp,
            MoePermuteOp, MoePermuteGradOp, MoeGatherChoicesOp,
            MoeGatherChoicesGradOp, MoeWeightedSumOp, MoeWeightedSumGradOp,
            MoeUnpermuteOp, MoeUnpermuteGradOp, MoeGroupedLinearOp,
            MoeGroupedLinearGradInputOp, MoeGroupedLinearGradWeightOp,
            MoeSplitTokensOp, MoeJoinTokensOp, MoeKeepRowsOp, MoeRestoreRowsOp,
            MoeBlockCountsOp, MoeEpOffsetsOp, MoeHotExpertsOp, MoeSplitRowsOp,
            MoeMergeRowsOp, CommDispatchOp, CommCombineOp,
            CommReplicateExpertsOp, CommReduceReplicasOp>(
          [&](Operation *o) { return visitMoe(o); })
      // Expert parallel's gather of the token counts.
      .Case([&](CommAllGatherOp g) -> LogicalResult {
        if (g.getAxis() == CommAxis::Ep)
          return success();
        return g.emitOpError("braid-shard has no context-parallel rule for "
                             "this op");
      })
      .Case<EmbeddingOp, EmbeddingGradWeightOp, LinearOp, LinearGradInputOp,
            LinearGradWeightOp, LayerNormOp, LayerNormGradInputOp,
            LayerNormGradWeightOp, RMSNormOp, RMSNormGradInputOp,
            RMSNormGradWeightOp, RepeatKVOp, RepeatKVGradInputOp, GeLUOp,
            GeLUGradInputOp, SwiGLUOp, SwiGLUGradInputOp, AddOp, SplitOp,
            SplitGradInputOp, CastOp, CrossEntropyOp, CrossEntropyGradInputOp>(
          [&](Operation *o) { return perToken(o); })
      .Default([&](Operation *other) {
        return other->emitOpError(
            "braid-shard has no context-parallel rule for this op");
      });
}

LogicalResult ContextSharder::run() {
  if (seqLen_ % (2 * cp_) != 0)
    return func_.emitOpError()
           << "braid-shard: a sequence of " << seqLen_
           << " positions does not cut into " << 2 * cp_
           << " equal chunks for " << cp_ << " context-parallel ranks";
  if (failed(takeInputs()))
    return failure();
  SmallVector<Operation *> ops;
  for (Operation &op : func_.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(visit(op)))
      return failure();
  // The reference forwards that ring attention replaced, once their
  // backward no longer reads their probabilities.
  for (auto &[probs, fwd] : ring_) {
    if (!fwd.op.getProbs().use_empty() || !fwd.op.getResult().use_empty())
      return fwd.op.emitOpError(
          "braid-shard: ring attention replaced this attention, but its "
          "probabilities are still read");
    fwd.op.erase();
  }
  return success();
}

} // namespace

LogicalResult shardContext(func::FuncOp func, int64_t cp, int64_t seqLen,
                           bool allGather) {
  return ContextSharder(func, cp, seqLen, allGather).run();
}

} // namespace braid
