//===- Shard.cpp - tensor-parallel layouts and their collectives ----------===//
//
// braid-shard lays the differentiated step out over the module's TP group
// (braid.mesh tp > 1), Megatron-LM's way, by propagating a layout through
// every op in program order (forward, then backward):
//  * replicated: every rank holds the whole value;
//  * split: each rank holds its part of one dimension (a linear's output
//    features, the attention heads, the vocabulary);
//  * partial: each rank holds a whole-shaped value whose sum over the ranks
//    is the value (a row-parallel linear's output, the input gradient of a
//    column-parallel one).
// Parameters get their layout at their first forward use: a linear reading
// a replicated input is column-parallel (weight split along its rows, and
// along blocks of them when a braid.split cuts its output: GPT-2's fused
// q/k/v), one reading a split input is row-parallel (weight split along its
// columns; its bias added by rank 0 only, so the partial sum holds it
// once); the token embedding is vocabulary-parallel; everything else is
// replicated. When the model has fewer kv heads than the group has ranks,
// the k and v projections are replicated and each rank picks the kv heads
// of its query heads (repeat_kv tp_slice), as Megatron does.
// A mixture-of-experts block runs whole on every rank of the group: its
// router linear, experts and expert-parallel exchanges are replicated (the
// experts split over expert-parallel ranks instead, docs/moe.md); its
// shared experts are an MLP like any other.
//
// An op that needs a replicated operand and is handed a partial one gets a
// braid.comm.all_reduce in between, inserted right after the partial value
// is made and shared by every such reader. The cross-entropy over
// vocabulary-split logits becomes cross_entropy_stats, an all-gather of three
// numbers per token and cross_entropy_combine, so no rank holds the whole
// logits. Types become each rank's own; every op records its results'
// layouts in `braid.tp`, every parameter its own.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ShardContext.h"

#include <map>
#include <tuple>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"
#include "dialects/braid/StageFunctions.h"

namespace braid {
#define GEN_PASS_DEF_SHARDPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

class Sharder {
public:
  Sharder(func::FuncOp func, int64_t tp, bool sequenceParallel)
      : func_(func), ctx_(func.getContext()), tp_(tp),
        sp_(sequenceParallel) {}

  LogicalResult run();

private:
  TpLayoutAttr replicated() { return TpLayoutAttr::replicated(ctx_); }
  TpLayoutAttr partial() { return TpLayoutAttr::partial(ctx_); }
  TpLayoutAttr split(int64_t dim, int64_t blocks = 1) {
    return TpLayoutAttr::split(ctx_, dim, blocks);
  }
  TpLayoutAttr lastSplit(Value v, int64_t blocks = 1) {
    return split(cast<RankedTensorType>(v.getType()).getRank() - 1, blocks);
  }
  static bool isLastSplit(TpLayoutAttr l, Value v) {
    return l && l.isSplit() &&
           l.getDim() == cast<RankedTensorType>(v.getType()).getRank() - 1;
  }

  // The layout of `v`; null for a parameter not yet decided.
  TpLayoutAttr of(Value v) const { return layout_.lookup(v); }
  // Records `v`'s layout and gives it this rank's type: a split value's
  // dimension shrinks by the group's size.
  LogicalResult set(Value v, TpLayoutAttr l);
  // Decides a parameter's layout (through the cast a BF16 step reads it by).
  LogicalResult decide(Value w, TpLayoutAttr l);
  // The layout of what acts on each token (norms, dropout, residual adds):
  // split along the sequence with sequence parallel, else replicated.
  TpLayoutAttr tokens() { return sp_ ? split(1) : replicated(); }
  // Gives `user` operand `operand` laid out as `want`, through the
  // collective (or local slice) that makes it: all-reduce (partial to
  // replicated), reduce-scatter (partial to sequence-split), all-gather
  // (sequence-split to replicated) or take_part (replicated to
  // sequence-split). A value's conversion is made once, right after it,
  // and shared; a gather for backward is made again right before its first
  // backward reader, so the forward's whole copy need not live until then.
  FailureOr<Value> convert(Operation *user, unsigned operand,
                           TpLayoutAttr want);
  FailureOr<Value> whole(Operation *user, unsigned operand) {
    return convert(user, operand, replicated());
  }
  LogicalResult convertAll(Operation *op, ArrayRef<unsigned> operands,
                           TpLayoutAttr want);
  // Sums a partial value for all its readers right after it is made, as
  // Megatron's row-parallel linear does: into the tokens' layout.
  LogicalResult settle(Value v);
  LogicalResult visitNorm(Operation *op);
  LogicalResult visitNormGrad(Operation *op, bool weightGrad);
  // Divides an integer attribute by the group's size.
  void shrink(Operation *op, StringRef attr);

  LogicalResult visit(Operation *op);
  LogicalResult visitLinear(LinearOp op);
  LogicalResult visitLinearGradInput(LinearGradInputOp op);
  LogicalResult visitLinearGradWeight(LinearGradWeightOp op);
  LogicalResult visitAdd(AddOp op);
  LogicalResult visitCrossEntropy(CrossEntropyOp op);
  LogicalResult visitWhole(Operation *op);
  // Whether `v` (a linear's output) is a router's logits.
  static bool feedsRouter(Value v);
  LogicalResult sameAsOperands(Operation *op, ArrayRef<unsigned> operands);
  LogicalResult finish();

  // Whether the k or v projection whose output is `v` feeds a repeat_kv
  // whose kv heads the group cannot split (replicated kv heads).
  bool feedsReplicatedKv(Value v) const;
  // The number of parts a braid.split cuts `v` into, 1 if none does.
  static int64_t splitBlocks(Value v);

  func::FuncOp func_;
  MLIRContext *ctx_;
  int64_t tp_;
  DenseMap<Value, TpLayoutAttr> layout_;
  bool sp_ = false;
  // The conversions made, by (value, layout, for backward).
  std::map<std::tuple<void *, const void *, bool>, Value> converted_;
  // The ids of the lookups into vocabulary-split tables.
  llvm::DenseSet<Value> vocabIds_;
};

LogicalResult Sharder::set(Value v, TpLayoutAttr l) {
  layout_[v] = l;
  if (!l.isSplit())
    return success();
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  const int64_t dim = l.getDim();
  if (dim >= type.getRank() || shape[dim] % (tp_ * l.getBlocks()) != 0) {
    Operation *where = v.getDefiningOp() ? v.getDefiningOp()
                                         : func_.getOperation();
    return where->emitOpError()
           << "cannot split " << type << " along dimension " << dim
           << " into " << l.getBlocks() << " block(s) of " << tp_
           << " tensor-parallel parts";
  }
  shape[dim] /= tp_;
  v.setType(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult Sharder::decide(Value w, TpLayoutAttr l) {
  if (TpLayoutAttr had = of(w))
    return success(had == l);
  if (auto c = w.getDefiningOp<CastOp>())
    if (failed(decide(c.getInput(), l)))
      return failure();
  return set(w, l);
}

FailureOr<Value> Sharder::convert(Operation *user, unsigned operand,
                                  TpLayoutAttr want) {
  Value v = user->getOperand(operand);
  TpLayoutAttr have = of(v);
  if (!have || have == want)
    return v;
  const bool backward = phaseMark(user) && *phaseMark(user) != Phase::Forward;
  const bool gather = have.isSplit() && want.isReplicated();
  Value &made = converted_[{v.getAsOpaquePointer(), want.getAsOpaquePointer(),
                            gather && backward}];
  if (!made) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    OpBuilder b(ctx_);
    Operation *def = v.getDefiningOp();
    if (gather && backward)
      b.setInsertionPoint(user);
    else if (def)
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&func_.getBody().front());
    auto tp = CommAxisAttr::get(ctx_, CommAxis::Tp);
    auto dim = [&](int64_t d) { return b.getI64IntegerAttr(d); };
    const bool seq = want.isSplit() && want.getDim() == 1 &&
                     want.getBlocks() == 1;
    Operation *op = nullptr;
    if (have.isPartial() && want.isReplicated()) {
      op = CommAllReduceOp::create(b, v.getLoc(), type, v, tp);
    } else if (have.isPartial() && seq) {
      shape[1] /= tp_;
      op = CommReduceScatterOp::create(
          b, v.getLoc(), RankedTensorType::get(shape, type.getElementType()),
          v, tp, dim(1));
    } else if (gather && have.getDim() == 1 && have.getBlocks() == 1) {
      shape[1] *= tp_;
      op = CommAllGatherOp::create(
          b, v.getLoc(), RankedTensorType::get(shape, type.getElementType()),
          v, tp, dim(1));
    } else if (have.isReplicated() && seq) {
      shape[1] /= tp_;
      op = TakePartOp::create(
          b, v.getLoc(), RankedTensorType::get(shape, type.getElementType()),
          v, dim(1), CommAxisAttr());
    } else {
      return user->emitOpError()
             << "braid-shard: operand " << operand << " is laid out as "
             << have << " but this op reads it as " << want;
    }
    copyMarks(gather && backward ? user : (def ? def : user), op);
    layout_[op->getResult(0)] = want;
    made = op->getResult(0);
  }
  user->setOperand(operand, made);
  return made;
}

LogicalResult Sharder::settle(Value v) {
  SmallVector<std::pair<Operation *, unsigned>> readers;
  for (OpOperand &use : v.getUses())
    readers.push_back({use.getOwner(), use.getOperandNumber()});
  for (auto [user, operand] : readers)
    if (failed(convert(user, operand, tokens())))
      return failure();
  return success();
}

LogicalResult Sharder::convertAll(Operation *op, ArrayRef<unsigned> operands,
                                  TpLayoutAttr want) {
  for (unsigned i : operands)
    if (failed(convert(op, i, want)))
      return failure();
  return success();
}

// A norm reads and makes tokens; its weights are replicated.
LogicalResult Sharder::visitNorm(Operation *n) {
  if (failed(convert(n, 0, tokens())))
    return failure();
  for (Value w : n->getOperands().drop_front())
    if (failed(decide(w, replicated())))
      return failure();
  for (Value r : n->getResults())
    if (failed(set(r, tokens())))
      return failure();
  return success();
}

// A norm's gradients read tokens (all but the weight, operand 2 of an input
// gradient); its weight gradients are each rank's tokens' part of the sum
// with sequence parallel.
LogicalResult Sharder::visitNormGrad(Operation *n, bool weightGrad) {
  for (unsigned i = 0; i < n->getNumOperands(); ++i)
    if ((weightGrad || i != 2) && failed(convert(n, i, tokens())))
      return failure();
  for (Value r : n->getResults())
    if (failed(set(r, weightGrad ? (sp_ ? partial() : replicated())
                                 : tokens())))
      return failure();
  return success();
}

void Sharder::shrink(Operation *op, StringRef attr) {
  auto v = op->getAttrOfType<IntegerAttr>(attr);
  op->setAttr(attr, IntegerAttr::get(v.getType(), v.getInt() / tp_));
}

bool Sharder::feedsReplicatedKv(Value v) const {
  for (Operation *user : v.getUsers()) {
    if (auto rope = dyn_cast<RoPEOp>(user))
      return feedsReplicatedKv(rope.getResult());
    if (auto rep = dyn_cast<RepeatKVOp>(user))
      return rep.getNumKvHeads() % tp_ != 0;
  }
  return false;
}

bool Sharder::feedsRouter(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<MoeScoresOp, MoeRouteOp, MoeZLossOp>(user))
      return true;
    if (auto c = dyn_cast<CastOp>(user); c && feedsRouter(c.getResult()))
      return true;
  }
  return false;
}

// An op of a mixture-of-experts block: every operand whole (a parameter
// decided replicated), every result replicated.
LogicalResult Sharder::visitWhole(Operation *op) {
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Value v = op->getOperand(i);
    if (!of(v)) {
      if (failed(decide(v, replicated())))
        return failure();
      continue;
    }
    if (failed(whole(op, i)))
      return failure();
  }
  for (Value r : op->getResults())
    if (failed(set(r, replicated())))
      return failure();
  return success();
}

int64_t Sharder::splitBlocks(Value v) {
  for (Operation *user : v.getUsers())
    if (auto s = dyn_cast<SplitOp>(user))
      return s.getNumResults();
  return 1;
}

// An op whose results take the layout its (equally laid out) operands have.
LogicalResult Sharder::sameAsOperands(Operation *op,
                                      ArrayRef<unsigned> operands) {
  TpLayoutAttr l = of(op->getOperand(operands.front()));
  for (unsigned i : operands.drop_front())
    if (of(op->getOperand(i)) != l)
      return op->emitOpError() << "braid-shard: operands laid out as "
                               << l << " and " << of(op->getOperand(i));
  for (Value r : op->getResults())
    if (failed(set(r, l)))
      return failure();
  return success();
}

LogicalResult Sharder::visitLinear(LinearOp op) {
  if (!isLastSplit(of(op.getInput()), op.getInput()) && failed(whole(op, 0)))
    return failure();
  Value x = op.getInput(), w = op.getWeight(), bias = op.getBias();
  Value y = op.getResult();
  if (!of(x) || of(x).isReplicated()) {
    if (!of(w)) {
      TpLayoutAttr l = feedsReplicatedKv(y) || feedsRouter(y)
                           ? replicated()
                           : split(0, splitBlocks(y));
      if (failed(decide(w, l)))
        return failure();
    }
    TpLayoutAttr lw = of(w);
    if (lw.isReplicated()) {
      if (bias && failed(decide(bias, replicated())))
        return failure();
      return set(y, replicated());
    }
    if (lw.getDim() != 0)
      return op.emitOpError() << "braid-shard: a linear over a replicated "
                                 "input needs its weight split along its "
                                 "rows, not "
                              << lw;
    if (bias && failed(decide(bias, split(0, lw.getBlocks()))))
      return failure();
    return set(y, lastSplit(y, lw.getBlocks()));
  }
  if (!isLastSplit(of(x), x) || of(x).getBlocks() != 1)
    return op.emitOpError() << "braid-shard: a linear over an input laid out "
                            << of(x) << " has no tensor-parallel form";
  if (failed(decide(w, split(1))))
    return op.emitOpError() << "braid-shard: this row-parallel linear's "
                               "weight is already laid out as "
                            << of(w);
  if (bias) {
    if (failed(decide(bias, replicated())))
      return failure();
    op.setPartialBiasAttr(BoolAttr::get(ctx_, true));
  }
  if (failed(set(y, partial())))
    return failure();
  return settle(y);
}

LogicalResult Sharder::visitLinearGradInput(LinearGradInputOp op) {
  TpLayoutAttr lw = of(op.getWeight());
  Value dx = op.getInputGrad();
  if (lw.isSplit() && lw.getDim() == 0) {
    // Column-parallel: each rank's dx is its features' contribution.
    if (!of(op.getGrad()).isSplit())
      return op.emitOpError("braid-shard: a column-parallel linear's "
                            "gradient must be split like its output");
    return set(dx, partial());
  }
  if (failed(whole(op, 0)))
    return failure();
  if (!lw.isReplicated() && !lw.isSplit())
    return op.emitOpError() << "braid-shard: a linear weight laid out as "
                            << lw;
  return set(dx, lw.isReplicated() ? replicated() : lastSplit(dx));
}

LogicalResult Sharder::visitLinearGradWeight(LinearGradWeightOp op) {
  if (!isLastSplit(of(op.getInput()), op.getInput()) && failed(whole(op, 1)))
    return failure();
  if (!isLastSplit(of(op.getGrad()), op.getGrad()) && failed(whole(op, 0)))
    return failure();
  TpLayoutAttr lg = of(op.getGrad()), lx = of(op.getInput());
  TpLayoutAttr dw = replicated(), db = replicated();
  if (lg.isSplit()) {
    dw = split(0, lg.getBlocks());
    db = dw;
  } else if (lx.isSplit()) {
    dw = split(1);
  }
  if (failed(set(op.getWeightGrad(), dw)))
    return failure();
  if (Value b = op.getBiasGrad())
    return set(b, db);
  return success();
}

// A partial sum added to a value laid out otherwise takes that layout; so
// does a replicated value (an MoE block's output) added to a split one
// (sequence parallel's tokens): each rank takes its part.
LogicalResult Sharder::visitAdd(AddOp op) {
  TpLayoutAttr a = of(op.getLhs()), c = of(op.getRhs());
  if (a != c && (a.isPartial() || c.isPartial() || a.isReplicated() ||
                 c.isReplicated())) {
    TpLayoutAttr want = a.isPartial() || (a.isReplicated() && !c.isPartial())
                            ? c
                            : a;
    if (failed(convertAll(op, {0, 1}, want)))
      return failure();
    return set(op.getResult(), want);
  }
  return sameAsOperands(op, {0, 1});
}

// loss, lse = cross_entropy(logits split along the vocabulary) becomes
// stats -> all-gather -> combine.
LogicalResult Sharder::visitCrossEntropy(CrossEntropyOp op) {
  Value logits = op.getLogits();
  if (!of(logits) || of(logits).isReplicated())
    return sameAsOperands(op, {0});
  if (!isLastSplit(of(logits), logits))
    return op.emitOpError() << "braid-shard: logits laid out as "
                            << of(logits);
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto lse = cast<RankedTensorType>(op.getLse().getType());
  SmallVector<int64_t> shape(lse.getShape());
  shape.push_back(3);
  auto statsType = RankedTensorType::get(shape, lse.getElementType());
  shape[0] *= tp_;
  auto allType = RankedTensorType::get(shape, lse.getElementType());
  auto stats =
      CrossEntropyStatsOp::create(b, loc, statsType, logits, op.getLabels());
  auto all = CommAllGatherOp::create(b, loc, allType, stats.getResult(),
                                     CommAxisAttr::get(ctx_, CommAxis::Tp), {});
  auto combine = CrossEntropyCombineOp::create(
      b, loc, op.getLoss().getType(), lse, all.getResult(), op.getLabels());
  for (Operation *made : {stats.getOperation(), all.getOperation(),
                          combine.getOperation()})
    copyMarks(op, made);
  layout_[stats.getResult()] = split(0);
  layout_[all.getResult()] = replicated();
  layout_[combine.getLoss()] = replicated();
  layout_[combine.getLse()] = replicated();
  op.getLoss().replaceAllUsesWith(combine.getLoss());
  op.getLse().replaceAllUsesWith(combine.getLse());
  op.erase();
  return success();
}

LogicalResult Sharder::visit(Operation *op) {
  auto trueAttr = BoolAttr::get(ctx_, true);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](CastOp c) {
        // A parameter's cast is decided with the parameter.
        if (!of(c.getInput()))
          return success();
        return set(c.getResult(), of(c.getInput()));
      })
      .Case([&](DocumentIdsOp d) { return set(d.getResult(), replicated()); })
      // Context parallel's layout copies and collectives act along the
      // sequence: the TP layout carries through.
      .Case([&](TakePartOp t) { return sameAsOperands(t, {0}); })
      .Case<MoeScoresOp, MoeScoresGradOp, MoeTopKOp, MoeTopKGradOp, MoeSortOp,
            MoeGatherOp, MoeGatherChoicesOp, MoeGatherChoicesGradOp,
            MoeWeightedSumOp, MoeWeightedSumGradOp, MoeRouteOp, MoeRouteGradOp,
            MoeExpertCountsOp, MoeAuxLossOp, MoeAuxLossGradOp, MoeZLossOp,
            MoeZLossGradOp, MoeBiasUpdateOp, MoePermuteOp, MoePermuteGradOp,
            MoeUnpermuteOp, MoeUnpermuteGradOp, MoeGroupedLinearOp,
            MoeGroupedLinearGradInputOp, MoeGroupedLinearGradWeightOp,
            MoeBatchedLinearOp, MoeBatchedLinearGradInputOp,
            MoeBatchedLinearGradWeightOp, MoeBlockCountsOp, MoeEpOffsetsOp,
            MoeKeepRowsOp, MoeRestoreRowsOp, MoeHotExpertsOp, MoeSplitRowsOp,
            MoeMergeRowsOp, MoeSplitTokensOp, MoeJoinTokensOp, CommDispatchOp,
            CommCombineOp, CommReplicateExpertsOp, CommReduceReplicasOp>(
          [&](Operation *m) { return visitWhole(m); })
      .Case<CommAllGatherOp, CommReduceScatterOp, CommShiftOp>(
          [&](Operation *c) { return sameAsOperands(c, {0}); })
      .Case<FlashAttentionOp, FlashAttentionGradInputOp, AttentionMergeOp>(
          [&](Operation *a) {
            if (!of(a->getOperand(0)).isSplit())
              return sameAsOperands(a, {0});
            shrink(a, "num_heads");
            if (!isa<AttentionMergeOp>(a)) {
              shrink(a, "num_kv_heads");
              a->setAttr("head_shard", trueAttr);
            }
            // An lse (the last result of a forward or a merge) is
            // [B, H, S]; the others pack heads last.
            const bool lse = isa<FlashAttentionOp, AttentionMergeOp>(a);
            for (Value r : a->getResults())
              if (failed(set(r, lse && r == a->getResults().back()
                                    ? split(1)
                                    : lastSplit(r))))
                return failure();
            return success();
          })
      .Case([&](EmbeddingOp e) {
        auto table = cast<RankedTensorType>(e.getTable().getType());
        if (!of(e.getTable())) {
          auto arg = dyn_cast<BlockArgument>(e.getIds());
          auto role = arg ? func_.getArgAttrOfType<InputRoleAttr>(
                                arg.getArgNumber(), BraidDialect::kInputAttr)
                          : InputRoleAttr();
          bool vocab = role && role.getValue() == InputRole::Tokens &&
                       table.getDimSize(0) % tp_ == 0;
          if (failed(decide(e.getTable(), vocab ? split(0) : replicated())))
            return failure();
        }
        if (of(e.getTable()).isReplicated()) {
          // Position ids: each rank looks up its part of the sequence.
          if (failed(convert(e, 1, tokens())))
            return failure();
          return set(e.getResult(), tokens());
        }
        e.setVocabShardAttr(trueAttr);
        vocabIds_.insert(e.getIds());
        if (failed(set(e.getResult(), partial())))
          return failure();
        return settle(e.getResult());
      })
      .Case([&](LinearOp l) { return visitLinear(l); })
      .Case([&](LinearGradInputOp l) { return visitLinearGradInput(l); })
      .Case([&](LinearGradWeightOp l) { return visitLinearGradWeight(l); })
      .Case<RMSNormOp, LayerNormOp>([&](Operation *n) { return visitNorm(n); })
      .Case<RMSNormGradInputOp, LayerNormGradInputOp>(
          [&](Operation *n) { return visitNormGrad(n, false); })
      .Case<RMSNormGradWeightOp, LayerNormGradWeightOp>(
          [&](Operation *n) { return visitNormGrad(n, true); })
      .Case<DropoutOp, DropoutGradInputOp>([&](Operation *d) {
        if (failed(convert(d, 0, tokens())))
          return failure();
        if (sp_)
          d->setAttr("tp_dim", IntegerAttr::get(IntegerType::get(ctx_, 64), 1));
        return set(d->getResult(0), tokens());
      })
      .Case([&](AddOp a) { return visitAdd(a); })
      .Case<RoPEOp, RoPEGradInputOp>([&](Operation *r) {
        if (of(r->getOperand(0)).isSplit())
          shrink(r, "num_heads");
        return sameAsOperands(r, {0});
      })
      .Case([&](RepeatKVOp r) {
        TpLayoutAttr in = of(r.getInput());
        if (in.isReplicated() && r.getNumKvHeads() % tp_ != 0) {
          r.setTpSliceAttr(trueAttr);
          r.setGroupAttr(IntegerAttr::get(
              r.getNumHeadsAttr().getType(),
              r.getNumHeads() / r.getNumKvHeads()));
          shrink(r, "num_heads");
          return set(r.getResult(), lastSplit(r.getResult()));
        }
        shrink(r, "num_heads");
        shrink(r, "num_kv_heads");
        return sameAsOperands(r, {0});
      })
      .Case([&](RepeatKVGradInputOp r) {
        if (r.getNumKvHeads() % tp_ != 0) {
          r.setTpSliceAttr(trueAttr);
          r.setGroupAttr(IntegerAttr::get(
              r.getNumHeadsAttr().getType(),
              r.getNumHeads() / r.getNumKvHeads()));
          shrink(r, "num_heads");
          return set(r.getInputGrad(), partial());
        }
        shrink(r, "num_heads");
        shrink(r, "num_kv_heads");
        return sameAsOperands(r, {0});
      })
      .Case([&](SplitOp s) {
        TpLayoutAttr in = of(s.getInput());
        if (in.isReplicated())
          return sameAsOperands(s, {0});
        if (!isLastSplit(in, s.getInput()) ||
            in.getBlocks() != s.getNumResults())
          return LogicalResult(s.emitOpError()
                               << "braid-shard: cannot split a value laid "
                                  "out as "
                               << in << " into " << s.getNumResults());
        for (Value r : s.getResults())
          if (failed(set(r, lastSplit(r))))
            return failure();
        return success();
      })
      .Case([&](SplitGradInputOp s) {
        SmallVector<unsigned> parts;
        for (unsigned i = 0; i < s.getNumOperands(); ++i)
          parts.push_back(i);
        TpLayoutAttr in = of(s.getOperand(0));
        if (in.isReplicated())
          return sameAsOperands(s, parts);
        return set(s.getInputGrad(),
                   lastSplit(s.getInputGrad(), s.getNumOperands()));
      })
      .Case<AttentionOp, AttentionGradInputOp>([&](Operation *a) {
        if (!of(a->getOperand(0)).isSplit())
          return sameAsOperands(a, {0});
        shrink(a, "num_heads");
        shrink(a, "num_kv_heads");
        a->setAttr("head_shard", trueAttr);
        for (Value r : a->getResults()) {
          auto t = cast<RankedTensorType>(r.getType());
          // The probabilities are [B, H, S, S]; the others pack heads last.
          bool probs = t.getRank() == 4;
          if (failed(set(r, probs ? split(1) : lastSplit(r))))
            return failure();
        }
        return success();
      })
      .Case<GeLUOp, GeLUGradInputOp, SwiGLUOp, SwiGLUGradInputOp>(
          [&](Operation *e) {
            SmallVector<unsigned> all;
            for (unsigned i = 0; i < e->getNumOperands(); ++i)
              all.push_back(i);
            return sameAsOperands(e, all);
          })
      .Case([&](CrossEntropyOp c) { return visitCrossEntropy(c); })
      .Case([&](CrossEntropyGradInputOp c) {
        if (failed(whole(c, 2)))
          return failure();
        if (of(c.getLogits()).isSplit())
          c.setVocabShardAttr(trueAttr);
        return set(c.getLogitsGrad(), of(c.getLogits()));
      })
      .Case([&](EmbeddingGradWeightOp e) {
        // The gradient of the table its forward lookup split.
        if (!vocabIds_.contains(e.getIds())) {
          if (failed(convertAll(e, {0, 1}, tokens())))
            return failure();
          return set(e.getTableGrad(), sp_ ? partial() : replicated());
        }
        if (failed(whole(e, 0)))
          return failure();
        e.setVocabShardAttr(trueAttr);
        return set(e.getTableGrad(), split(0));
      })
      .Default([&](Operation *other) {
        return other->emitOpError(
            "braid-shard has no tensor-parallel rule for this op");
      });
}

// The returned gradients take their parameters' layouts; then every op and
// parameter records its layout and the function its new type.
LogicalResult Sharder::finish() {
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  if (failed(whole(ret, 0)))
    return failure();
  unsigned p = 0;
  for (BlockArgument arg : func_.getArguments()) {
    if (!func_.getArgAttr(arg.getArgNumber(), BraidDialect::kParamAttr))
      continue;
    ++p;
    if (!of(arg) && failed(set(arg, replicated())))
      return failure();
    TpLayoutAttr want = of(arg);
    Value grad = ret.getOperand(p);
    if (want.isReplicated() && failed(whole(ret, p)))
      return failure();
    if (of(ret.getOperand(p)) != want)
      return ret.emitOpError()
             << "braid-shard: the gradient of parameter " << p - 1
             << " is laid out as " << of(grad) << ", the parameter as "
             << want;
    func_.setArgAttr(arg.getArgNumber(), BraidDialect::kTpAttr, want);
  }
  func_.walk([&](Operation *op) {
    if (op->getNumResults() == 0 || !isa<BraidDialect>(op->getDialect()))
      return;
    SmallVector<Attribute> layouts;
    for (Value r : op->getResults())
      layouts.push_back(of(r) ? Attribute(of(r)) : Attribute(replicated()));
    op->setAttr(BraidDialect::kTpAttr, ArrayAttr::get(ctx_, layouts));
  });
  func_.setFunctionType(FunctionType::get(
      ctx_, func_.getBody().front().getArgumentTypes(),
      ret.getOperandTypes()));
  return success();
}

LogicalResult Sharder::run() {
  for (BlockArgument arg : func_.getArguments())
    if (func_.getArgAttr(arg.getArgNumber(), BraidDialect::kInputAttr))
      layout_[arg] = replicated();
  SmallVector<Operation *> ops;
  for (Operation &op : func_.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(visit(op)))
      return failure();
  return finish();
}

struct ShardPass : impl::ShardPassBase<ShardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<MeshAttr>(BraidDialect::kMeshAttr);
    if (!mesh || (mesh.getTp() == 1 && mesh.getCp() == 1))
      return;
    FailureOr<func::FuncOp> func = singleStageFunction(module, "braid-shard");
    if (failed(func))
      return signalPassFailure();
    if (mesh.getCp() > 1) {
      auto train = module->getAttrOfType<TrainAttr>(BraidDialect::kTrainAttr);
      if (!train) {
        module.emitError("braid-shard needs the braid.train module attribute "
                         "for context parallel (run braid-import first)");
        return signalPassFailure();
      }
      if (failed(shardContext(
              *func, mesh.getCp(), train.getSeqLen(),
              module->hasAttr(BraidDialect::kCpAllGatherAttr))))
        return signalPassFailure();
    }
    if (mesh.getTp() == 1)
      return;
    const bool sp =
        module->hasAttr(BraidDialect::kSequenceParallelAttr);
    if (failed(Sharder(*func, mesh.getTp(), sp).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace braid
