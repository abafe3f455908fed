//===- LowerToSchedParallel.cpp - reductions, shards and gathers ---------===//
//
// The data-parallel half of braid-lower-to-sched (see LowerToSched.cpp's
// file comment): the gradient reductions after the micro-batches, ZeRO's
// weight copies and norm, stage 2's micro-batches stated one by one with a
// reduction after each, and stage 3's gathers of each layer's weights.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToSched.h"

#include "llvm/ADT/TypeSwitch.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/Unroll.h"

namespace braid::lower_to_sched {

void Lowering::refreshWeightCopies(Location loc) {
  // Unsharded, or stage 3's shards: each copy from its master.
  if (!sharded() || zeroStage_ == 3) {
    for (auto &p : params_)
      if (!p.copy.empty())
        optimizerLaunch(loc, "cast", {getGlobal(p.name)}, {getGlobal(p.copy)},
                        DictionaryAttr());
    return;
  }
  // Each rank rounds its own shard (BF16), then its ZeRO group gathers
  // the whole copies.
  SmallVector<Value> shards, wholes;
  SmallVector<sched::MeshAxis> axes;
  for (auto &p : params_) {
    Value master = getGlobal(p.name);
    if (cast<RankedTensorType>(p.copyType).getElementType().isF32()) {
      shards.push_back(master);
    } else {
      Value part = sched::AllocOp::create(
          b_, loc, shardBuffer(p.copyType, p.part), IntegerAttr());
      optimizerLaunch(loc, "cast", {master}, {part}, DictionaryAttr());
      shards.push_back(part);
    }
    wholes.push_back(getGlobal(p.copy));
    axes.push_back(zeroAxis(p.part));
  }
  zeroCollectives(loc, sched::CollectiveKind::AllGather, axes, shards, wholes);
}

Value Lowering::gradSinkBuffer(Location loc, const std::string &sink) {
  if (zeroStage_ < 2)
    return getGlobal(sink);
  Value &buf = microGrads_[sink];
  if (!buf) {
    // The whole gradient of this micro-batch, zero right before its first
    // contribution so that it is live only while backward writes it.
    buf = sched::AllocOp::create(b_, loc, wholeGrad_.lookup(sink),
                                 IntegerAttr());
    sched::LaunchOp fill = launch(
        loc, "fill", {}, {buf},
        b_.getDictionaryAttr(
            {b_.getNamedAttr("value", b_.getF64FloatAttr(0.0))}));
    setPhaseMark(fill, Phase::WeightGrad);
  }
  return buf;
}

// Data parallel: the gradients and the loss sum of this rank's micro-batches
// become those of every rank's, on the communication stream (the one after
// the compute and optimizer streams). Event 1 tells it that the last
// micro-batch is done; event 2 tells stream 0 that the sums are in place.
// ZeRO stage 1 reduce-scatters the whole gradients into the shards.
void Lowering::lowerGradientReduction() {
  Location loc = func_.getLoc();
  const uint32_t comm = commStream();
  handOver(loc, 1);
  stream_ = comm;
  // An EP share of the experts is summed over the ranks that hold the same
  // experts (edp): its gradient already holds every token of the EP group
  // that reached them. ZeRO's shards of it are cut over the same group.
  SmallVector<Value> wholes, shards, experts, all;
  SmallVector<sched::MeshAxis> axes;
  for (auto &p : params_) {
    Value grad = getGlobal(p.name + (sharded() ? ".grad.full" : ".grad"));
    all.push_back(grad);
    axes.push_back(zeroAxis(p.part));
    if (isExpertShare(p))
      experts.push_back(grad);
    else
      wholes.push_back(grad);
    if (sharded())
      shards.push_back(getGlobal(p.name + ".grad"));
  }
  Value lossSum = getGlobal("loss_sum");
  // The loss sum and each expert bias's load are summed whole, so that
  // every rank moves its bias by the load of the global batch.
  SmallVector<Value> sums = {lossSum};
  for (const Buffer &buffer : buffers_)
    sums.push_back(getGlobal(buffer.name + ".load"));
  if (sharded()) {
    zeroCollectives(loc, sched::CollectiveKind::ReduceScatterSum, axes, all,
                    shards);
    collective(loc, sched::CollectiveKind::AllReduceSum, sums, {});
  } else {
    // Context parallel: each rank's gradients are its part of the
    // sequence's, summed over the DP and CP ranks at once (dp_cp), on a
    // communicator of their own, apart from the micro-batches' CP
    // collectives that stream 0 may still be running. An expert bias's
    // load is already the CP group's (braid-shard sums the counts), so it
    // is summed over DP alone.
    SmallVector<Value> loads;
    if (contextParallel_ > 1) {
      wholes.push_back(lossSum);
      loads.assign(sums.begin() + 1, sums.end());
    } else {
      wholes.append(sums.begin(), sums.end());
    }
    collective(loc, sched::CollectiveKind::AllReduceSum, wholes, {},
               contextParallel_ > 1 ? sched::MeshAxis::DpCp
                                    : sched::MeshAxis::Dp);
    if (!loads.empty() && groupSize(sched::MeshAxis::Dp) > 1)
      collective(loc, sched::CollectiveKind::AllReduceSum, loads, {},
                 sched::MeshAxis::Dp);
    // The experts' shares over the ranks that hold the same experts, with
    // their CP ranks (edp), on a communicator of its own like dp_cp.
    if (!experts.empty() && groupSize(sched::MeshAxis::Edp) > 1)
      collective(loc, sched::CollectiveKind::AllReduceSum, experts, {},
                 sched::MeshAxis::Edp);
  }
  handBack(loc);
  stream_ = 0;
}

// ZeRO stage 2 reduces each micro-batch's gradients as soon as it ends,
// which a sched.repeat's body cannot hold: the micro-batches are stated one
// by one, each followed by its reduce-scatter into the shards (the first
// writes them, the rest add to them) and, after the last, the loss sum's.
void Lowering::unrollAndReduceMicroBatches(sched::RepeatOp repeat) {
  Location loc = func_.getLoc();
  b_.setInsertionPointAfter(repeat);
  for (int32_t m = 0; m < numMicroBatches_; ++m) {
    IRMapping map;
    SmallVector<Operation *> ops = cloneIteration(b_, repeat, m, map);
    OpBuilder::InsertPoint end = b_.saveInsertionPoint();
    if (zeroStage_ == 3)
      insertGathers(ops, map);
    b_.restoreInsertionPoint(end);
    handOver(loc, m + 1);
    stream_ = commStream();
    SmallVector<Value> wholes, parts;
    SmallVector<sched::MeshAxis> axes;
    SmallVector<std::pair<Value, Value>> adds;
    for (auto &p : params_) {
      std::string sym = p.name + ".grad";
      wholes.push_back(map.lookup(microGrads_.lookup(sym)));
      axes.push_back(zeroAxis(p.part));
      Value shard = getGlobal(sym);
      if (m == 0) {
        parts.push_back(shard);
        continue;
      }
      Value part = sched::AllocOp::create(
          b_, loc, cast<MemRefType>(shard.getType()), IntegerAttr());
      parts.push_back(part);
      adds.push_back({part, shard});
    }
    zeroCollectives(loc, sched::CollectiveKind::ReduceScatterSum, axes, wholes,
                    parts);
    for (auto [part, shard] : adds)
      optimizerLaunch(loc, "accumulate", {part}, {shard}, DictionaryAttr());
    // After the last, the loss sum and each expert bias's load, whole.
    if (m == numMicroBatches_ - 1) {
      SmallVector<Value> sums = {getGlobal("loss_sum")};
      for (const Buffer &buffer : buffers_)
        sums.push_back(getGlobal(buffer.name + ".load"));
      collective(loc, sched::CollectiveKind::AllReduceSum, sums, {});
    }
    stream_ = 0;
  }
  repeat->erase();
  handBack(loc);
}

// The norm of the whole gradient. Sharded, each rank's shards give its part
// of the norm; gathered, the parts' norm is the whole one, and every rank
// computes the same value from the same parts.
// braid-shard's collectives, and expert parallel's (braid-import's: the
// counts' gather, the tokens' dispatch and combine). A sum is made in
// place when nothing else reads the partial value, and in a fresh buffer
// otherwise (the residual stream keeps its partial sums while a norm reads
// the whole). The collectives join and cut along dimension 0; along
// another dimension the parts are moved to dimension 0 first
// (stack_parts) or from it after (unstack_parts).
LogicalResult Lowering::lowerComm(Operation &op,
                                  DenseMap<Value, Value> &buffers) {
  Value in = buffers.lookup(op.getOperand(0));
  if (!in)
    return op.emitOpError("operand has no buffer");
  Location loc = op.getLoc();
  auto commAxis = op.getAttrOfType<CommAxisAttr>("axis");
  sched::MeshAxis axis = sched::MeshAxis::Tp;
  if (commAxis && commAxis.getValue() == CommAxis::Cp)
    axis = sched::MeshAxis::Cp;
  else if (commAxis && commAxis.getValue() == CommAxis::Dp)
    axis = sched::MeshAxis::Dp;
  else if (commAxis && commAxis.getValue() == CommAxis::Ep)
    axis = sched::MeshAxis::Ep;
  const int64_t group = groupSize(axis);
  auto alloc = [&](Type tensor) {
    return sched::AllocOp::create(b_, loc, bufferType(tensor), IntegerAttr())
        .getResult();
  };
  // The shape of `t` with dimension `dim`'s parts stacked along dimension 0.
  auto stacked = [&](Type t, int64_t dim, int64_t parts) -> Type {
    auto r = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(r.getShape());
    shape[0] *= parts;
    shape[dim] /= parts;
    return RankedTensorType::get(shape, r.getElementType());
  };
  // Along cp the parts of the sequence are the load-balanced ones.
  auto dimParams = [&](int64_t dim) {
    SmallVector<NamedAttribute> params = {
        b_.getNamedAttr("dim", b_.getI64IntegerAttr(dim))};
    if (axis == sched::MeshAxis::Cp)
      params.push_back(b_.getNamedAttr("balanced", b_.getI64IntegerAttr(1)));
    return b_.getDictionaryAttr(params);
  };
  Type resultType = op.getResult(0).getType();
  Value out = alloc(resultType);
  if (isa<CommDispatchOp, CommCombineOp, CommReplicateExpertsOp,
          CommReduceReplicasOp>(op)) {
    // Expert parallel's exchanges read the group's counts; hot-expert
    // replication's the hot experts.
    Value counts = buffers.lookup(op.getOperand(1));
    if (!counts)
      return op.emitOpError("counts or hot experts have no buffer");
    sched::CollectiveKind kind =
        llvm::TypeSwitch<Operation *, sched::CollectiveKind>(&op)
            .Case([](CommDispatchOp) { return sched::CollectiveKind::Dispatch; })
            .Case([](CommCombineOp) { return sched::CollectiveKind::Combine; })
            .Case([](CommReplicateExpertsOp) {
              return sched::CollectiveKind::ReplicateExperts;
            })
            .Default(
                [](Operation *) { return sched::CollectiveKind::ReduceReplicas; });
    copyMarks(&op, collective(loc, kind, {in, counts}, {out}, axis));
  } else if (auto shift = dyn_cast<CommShiftOp>(op)) {
    copyMarks(&op, collective(loc, sched::CollectiveKind::Shift, {in}, {out},
                              axis, static_cast<int32_t>(shift.getOffset())));
  } else if (auto gather = dyn_cast<CommAllGatherOp>(op)) {
    const int64_t dim = gather.getDim().value_or(0);
    if (dim == 0) {
      copyMarks(&op, collective(loc, sched::CollectiveKind::AllGather, {in},
                                {out}, axis));
    } else {
      Value parts = alloc(stacked(resultType, dim, group));
      copyMarks(&op, collective(loc, sched::CollectiveKind::AllGather, {in},
                                {parts}, axis));
      copyMarks(&op, launch(loc, "unstack_parts", {parts}, {out},
                            dimParams(dim)));
    }
  } else if (auto scatter = dyn_cast<CommReduceScatterOp>(op)) {
    const int64_t dim = scatter.getDim();
    Value whole = in;
    if (dim != 0) {
      whole = alloc(stacked(op.getOperand(0).getType(), dim, group));
      copyMarks(&op, launch(loc, "stack_parts", {in}, {whole},
                            dimParams(dim)));
    }
    copyMarks(&op, collective(loc, sched::CollectiveKind::ReduceScatterSum,
                              {whole}, {out}, axis));
  } else {
    if (op.getOperand(0).hasOneUse()) {
      out.getDefiningOp()->erase();
      out = in;
    } else {
      auto zero = b_.getDictionaryAttr(
          {b_.getNamedAttr("value", b_.getF64FloatAttr(0.0))});
      copyMarks(&op, launch(loc, "fill", {}, {out}, zero));
      copyMarks(&op, launch(loc, "accumulate", {in}, {out}, DictionaryAttr()));
    }
    copyMarks(&op, collective(loc, sched::CollectiveKind::AllReduceSum, {out},
                              {}, axis));
  }
  buffers[op.getResult(0)] = out;
  return success();
}

// With TP, a split parameter's gradient is one rank's part: the parts' norms
// are gathered over the group and joined with the replicated parameters'
// norm, which every rank holds whole; with EP, an MoE layer's share of its
// experts likewise over the EP group. With ZeRO each of those norms is
// first the norm of its ZeRO group's shards' norms, gathered (the DP
// group's, or an EP share's EDP group's).
Value Lowering::lowerGradNorm(Location loc, ArrayRef<Value> grads) {
  Value norm = getGlobal("grad_norm");
  Type f32 = b_.getF32Type();
  auto scalar = [&](int64_t n) {
    return sched::AllocOp::create(b_, loc, MemRefType::get({n}, f32),
                                  IntegerAttr())
        .getResult();
  };
  // `mine` gathered over `axis` into a buffer of the group's size.
  auto gathered = [&](Value mine, sched::MeshAxis axis) {
    Value all = scalar(groupSize(axis));
    setPhaseMark(collective(loc, sched::CollectiveKind::AllGather, {mine},
                            {all}, axis),
                 Phase::Optimizer);
    return all;
  };
  auto normOf = [&](ValueRange gs) {
    Value n = scalar(1);
    optimizerLaunch(loc, "grad_norm", gs, {n}, DictionaryAttr());
    return n;
  };
  // The norm of the gradients `gs` as they are before ZeRO cuts them; with
  // ZeRO, of the shards this rank holds gathered over their group `zero`.
  auto heldNorm = [&](ValueRange gs, sched::MeshAxis zero) -> Value {
    if (!sharded())
      return normOf(gs);
    Value n = scalar(1);
    optimizerLaunch(loc, "grad_norm", {gathered(normOf(gs), zero)}, {n},
                    DictionaryAttr());
    return n;
  };
  SmallVector<Value> tpParts, epParts, whole;
  for (auto [p, g] : llvm::zip(params_, grads))
    (isExpertShare(p) ? epParts : p.part ? tpParts : whole).push_back(g);
  // A TP part's and an EP share's norms gathered over their groups, joined
  // with the rest's, which every rank holds whole.
  SmallVector<Value> parts;
  if (!tpParts.empty())
    parts.push_back(
        gathered(heldNorm(tpParts, sched::MeshAxis::Dp), sched::MeshAxis::Tp));
  if (!epParts.empty())
    parts.push_back(
        gathered(heldNorm(epParts, sched::MeshAxis::Edp), sched::MeshAxis::Ep));
  if (parts.empty() && !sharded()) {
    optimizerLaunch(loc, "grad_norm", grads, {norm}, DictionaryAttr());
    return norm;
  }
  if (!whole.empty()) {
    if (parts.empty())
      // Sharded without parts: the DP shards' norms are the parts.
      parts.push_back(gathered(normOf(whole), sched::MeshAxis::Dp));
    else
      parts.push_back(heldNorm(whole, sched::MeshAxis::Dp));
  }
  optimizerLaunch(loc, "grad_norm", parts, {norm}, DictionaryAttr());
  return norm;
}

Value Lowering::gatherBuffer(Location loc, size_t i, Operation *user) {
  std::optional<Phase> phase = phaseMark(user);
  const bool backward = phase && *phase != Phase::Forward;
  Value &buf = gathered_[2 * i + (backward ? 1 : 0)];
  if (!buf) {
    const Param &p = params_[i];
    buf = sched::AllocOp::create(
        b_, loc, bufferType(p.copy.empty() ? p.arg.getType() : p.copyType),
        IntegerAttr());
  }
  return buf;
}

// Stage 3, in one stated-out micro-batch: the parameters are gathered, on
// the communication stream, into the buffers the micro-batch reads, group
// by group: a group is the parameters first read by one layer in one phase
// (forward or backward), in the order of those first reads. Group g's
// gather starts when stream 0 reaches group g - 1's first read (event 3),
// so it runs while the layer before it computes, and stream 0 waits for it
// (event 4) right before its own first read. The buffers live from their
// gather to their phase's last read, so each layer's whole weights are
// freed after forward and gathered again for backward.
void Lowering::insertGathers(ArrayRef<Operation *> microBatch,
                             const IRMapping &map) {
  DenseMap<Value, size_t> paramOf;
  for (auto &[key, buf] : gathered_)
    paramOf[map.lookup(buf)] = key / 2;
  struct Group {
    Operation *firstRead;
    SmallVector<Value> buffers;
    SmallVector<size_t> params;
    // Each buffer's first read.
    SmallVector<Operation *> reads;
  };
  SmallVector<Group> groups;
  DenseSet<Value> placed;
  std::pair<Attribute, bool> key;
  for (Operation *op : microBatch) {
    // Launches read the weights; so does hot-expert replication, which
    // copies a share of experts.
    ValueRange reads;
    if (auto launch = dyn_cast<sched::LaunchOp>(op))
      reads = launch.getIns();
    else if (auto c = dyn_cast<sched::CollectiveOp>(op))
      reads = c.getBuffers();
    else
      continue;
    std::optional<Phase> phase = phaseMark(op);
    std::pair<Attribute, bool> here = {layerMark(op),
                                       phase && *phase != Phase::Forward};
    for (Value v : reads) {
      auto it = paramOf.find(v);
      if (it == paramOf.end() || !placed.insert(v).second)
        continue;
      if (groups.empty() || here != key)
        groups.push_back({op, {}, {}});
      key = here;
      groups.back().buffers.push_back(v);
      groups.back().params.push_back(it->second);
      groups.back().reads.push_back(op);
    }
  }
  Location loc = func_.getLoc();
  auto i32 = [&](int64_t v) { return b_.getI32IntegerAttr(v); };
  auto i64 = [&](int64_t v) { return b_.getI64IntegerAttr(v); };
  const uint32_t comm = commStream();
  for (size_t g = 0; g < groups.size(); ++g) {
    Operation *trigger = g == 0 ? microBatch.front() : groups[g - 1].firstRead;
    b_.setInsertionPoint(trigger);
    sched::EventRecordOp::create(b_, loc, i32(3), i64(++gatherTrigger_),
                                 i32(0));
    sched::EventWaitOp::create(b_, loc, i32(3), i64(gatherTrigger_),
                               i32(comm));
    // The buffers are made where their gather is.
    const Group &group = groups[g];
    for (Value v : group.buffers)
      v.getDefiningOp()->moveBefore(b_.getInsertionBlock(),
                                    b_.getInsertionPoint());
    // In pieces (comm_chunks) of about equal bytes, in the order of their
    // first reads: stream 0 waits for each right before its first read, so
    // the layer starts on the first piece while the rest arrive.
    int64_t total = 0;
    for (Value v : group.buffers)
      total += bufferBytes(cast<MemRefType>(v.getType()));
    SmallVector<std::pair<size_t, size_t>> pieces;
    int64_t bytes = 0;
    size_t begin = 0;
    for (size_t k = 0; k < group.buffers.size(); ++k) {
      bytes += bufferBytes(cast<MemRefType>(group.buffers[k].getType()));
      const int64_t made = static_cast<int64_t>(pieces.size());
      if (k + 1 == group.buffers.size() ||
          (made + 1 < commChunks_ && bytes * commChunks_ >= total * (made + 1))) {
        pieces.push_back({begin, k + 1});
        begin = k + 1;
      }
    }
    SmallVector<int64_t> done;
    for (auto [first, last] : pieces) {
      SmallVector<Value> shards, wholes;
      SmallVector<sched::MeshAxis> axes;
      for (size_t k = first; k < last; ++k) {
        const Param &p = params_[group.params[k]];
        shards.push_back(getGlobal(p.copy.empty() ? p.name : p.copy));
        wholes.push_back(group.buffers[k]);
        axes.push_back(zeroAxis(p.part));
      }
      stream_ = comm;
      zeroCollectives(loc, sched::CollectiveKind::AllGather, axes, shards,
                      wholes);
      stream_ = 0;
      sched::EventRecordOp::create(b_, loc, i32(4), i64(++gatherDone_),
                                   i32(comm));
      done.push_back(gatherDone_);
    }
    for (auto [piece, range] : llvm::enumerate(pieces)) {
      b_.setInsertionPoint(group.reads[range.first]);
      sched::EventWaitOp::create(b_, loc, i32(4), i64(done[piece]), i32(0));
    }
  }
}

} // namespace braid::lower_to_sched
