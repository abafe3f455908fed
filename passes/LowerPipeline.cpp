//===- LowerPipeline.cpp - braid-lower-pipeline ---------------------------===//
//
// Turns braid-lower-to-sched's one-rank step, whose sched.repeat states one
// micro-batch of the whole model, into one module per pipeline rank
// (`module @pp0 {...}`, marked braid.pipeline_rank): the globals the rank
// owns (its stages' parameters, their gradients and moments) and the
// shared inputs and scalars, its init program, and a step program that
// states, in the order braid.schedule gives the rank, the forward (F),
// input-gradient (B) and weight-gradient (W) launches of each micro-batch
// through each of its stages (braid.partition), with the transfers to and
// from its neighbours on streams of their own:
//
//   stream 0          the compute stream: entries in the schedule's order
//   then, after the streams the one-rank step uses (its data-parallel
//   reduction's), one per (peer, channel, direction) the rank uses, and
//   the second compute stream of FB pairs
//
// The first event the one-rank step leaves free is stream 0's progress:
// it records at the start of every entry and after every entry that
// sends. A receive for entry k waits for the
// start of entry k - 1 (one entry of look-ahead, as the schedule's check
// assumes) and stream 0 waits for it before entry k; a send waits for the
// end of the entry that wrote its buffer. Each transfer stream records an
// event of its own after each transfer, which is what stream 0 waits for.
// Stream 0 waits for a micro-batch's activation sends before that
// micro-batch's backward on the stage (their buffers are then free; the
// peer has received them, since its gradient has come back), and for the
// gradient sends at the end, before the optimizer.
//
// An FB pair's backward half runs on a second compute stream beside its
// forward half on stream 0 (see the loop in buildRank).
//
// Each piece (one part of one micro-batch through one stage) is bracketed
// by a begin and an end sched.mark on the stream that runs it, which a
// traced run timestamps (braid-run --trace).
//
// After the micro-batches the loss sum is all-reduced over the pipeline
// (only the loss stage adds to it), and the gradient norm is the norm of
// every rank's norm of its own gradients, gathered over the pipeline. The
// one-rank step's data-parallel reduction keeps, on each rank, the part
// over that rank's gradients.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include <map>
#include <optional>
#include <set>

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "dialects/braid/Marks.h"
#include "dialects/sched/SchedOps.h"
#include "passes/PipelineAttrs.h"

namespace braid {

#define GEN_PASS_DEF_LOWERPIPELINEPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

enum class Part { kF, kB, kW };

// What a part of an entry states: micro-batch `mb`'s `part` through
// stage `stage`.
struct Piece {
  int64_t stage, mb;
  Part part;
};

// A tensor of the micro-batch that one stage writes and another reads.
struct Crossing {
  Value buffer;   // the body's alloc
  int64_t from;   // the writing stage
  int64_t to;     // the reading stage
  Part writtenIn; // F (activations, channel 0) or B (gradients, channel 1)
};

// A transfer stream of one rank: to or from one peer, on one channel.
struct StreamKey {
  int64_t peerOffset;
  uint32_t channel;
  bool send;
  bool operator<(const StreamKey &o) const {
    return std::tie(peerOffset, channel, send) <
           std::tie(o.peerOffset, o.channel, o.send);
  }
};

// A collective that belongs to a micro-batch's piece, like a launch: a TP
// group's sum (braid-shard) or an EP group's exchange of tokens.
bool isPieceCollective(Operation *op) {
  auto c = dyn_cast<sched::CollectiveOp>(op);
  return c && (c.getAxis() == sched::MeshAxis::Tp ||
               c.getAxis() == sched::MeshAxis::Ep);
}

constexpr uint32_t kCompute = 0;
// The key of the second compute stream, which runs an FB pair's backward
// half (DualPipeV).
constexpr StreamKey kOverlapStream{0, 2, false};

class PipelineLowering {
public:
  PipelineLowering(ModuleOp module, pipeline::Partition partition,
                   pipeline::Schedule schedule)
      : module_(module), partition_(std::move(partition)),
        schedule_(std::move(schedule)), b_(module.getContext()) {}

  LogicalResult run();

private:
  LogicalResult findPrograms();
  LogicalResult classifyBody();
  LogicalResult findOwners();
  std::optional<int64_t> stageOfLayer(LayerAttr layer) const;
  int64_t rankOf(int64_t stage) const {
    return partition_.placement.rankOf(stage);
  }

  void buildRank(int64_t rank);
  LogicalResult copyFiltered(ArrayRef<Operation *> ops, int64_t rank,
                             IRMapping &map);
  LogicalResult splitGradNorm(sched::LaunchOp norm, IRMapping &map);
  bool visible(StringRef global, int64_t rank) const {
    auto it = owner_.find(global);
    return it != owner_.end() && (it->second < 0 || it->second == rank);
  }

  // Building one rank's step.
  struct RankState {
    int64_t rank = 0;
    std::map<StreamKey, uint32_t> streams;
    std::map<uint32_t, int64_t> streamValue; // last event value per stream
    int64_t progress = 0; // stream 0's progress event's last value
    // (stage, mb) -> the clones of the body's values for it.
    std::map<std::pair<int64_t, int64_t>, IRMapping> maps;
    // Receives posted for an entry: (transfer stream, value, for its
    // backward half).
    std::map<size_t, SmallVector<std::tuple<uint32_t, int64_t, bool>>>
        recvWaits;
    // (stage, mb) -> activation sends stream 0 waits for before its B.
    std::map<std::pair<int64_t, int64_t>,
             SmallVector<std::pair<uint32_t, int64_t>>>
        activationSends;
  };
  uint32_t streamFor(RankState &st, StreamKey key) {
    auto [it, inserted] = st.streams.try_emplace(
        key, firstFreeStream_ + static_cast<uint32_t>(st.streams.size()));
    return it->second;
  }
  SmallVector<Piece> piecesOf(int64_t rank, const pipeline::Entry &e) const;
  void postReceives(RankState &st, size_t entry, int64_t waitValue);
  void emitPiece(RankState &st, const Piece &piece, uint32_t stream);
  // A whole backward (BW) of `piece`'s stage and micro-batch, layer by
  // layer: each layer's B ops, then its W ops, each run between its marks,
  // and the B's sends right after its last op.
  void emitWholeBackward(RankState &st, const Piece &piece, uint32_t stream);
  // One op of a piece, with what it reads and writes cloned for the
  // micro-batch (inputs staged again where `staged` has not had them).
  void emitOp(RankState &st, const Piece &piece, Operation *op,
              uint32_t onStream, llvm::StringSet<> &staged);
  void postSends(RankState &st, const Piece &piece, uint32_t stream);
  // Brackets a piece with sched.mark: where it begins (or ends) on `stream`.
  void mark(const Piece &piece, uint32_t stream, bool end);
  Value cloneValue(RankState &st, IRMapping &map, Value v, int64_t stage,
                   int64_t mb);
  void record(uint32_t event, int64_t value, uint32_t stream) {
    sched::EventRecordOp::create(b_, loc(), b_.getI32IntegerAttr(event),
                                 b_.getI64IntegerAttr(value),
                                 b_.getI32IntegerAttr(stream));
  }
  void wait(uint32_t event, int64_t value, uint32_t stream) {
    sched::EventWaitOp::create(b_, loc(), b_.getI32IntegerAttr(event),
                               b_.getI64IntegerAttr(value),
                               b_.getI32IntegerAttr(stream));
  }
  Location loc() { return module_.getLoc(); }

  ModuleOp module_;
  pipeline::Partition partition_;
  pipeline::Schedule schedule_;
  OpBuilder b_;
  sched::ProgramOp step_, init_;
  sched::RepeatOp repeat_;
  SmallVector<Operation *> prologue_, epilogue_;
  // The body's launches and readbacks by (stage, part), in body order.
  std::map<std::pair<int64_t, Part>, SmallVector<Operation *>> pieces_;
  // Whether the micro-batch holds collectives: TP's (braid-shard) or
  // expert parallel's exchanges.
  bool groupCalls_ = false;
  // The input globals the body stages: each is staged again, for its
  // micro-batch, before each piece that reads it.
  llvm::StringSet<> inputs_;
  SmallVector<Crossing> crossings_;
  // Global symbol -> owning rank, -1 for the shared ones (inputs, scalars).
  llvm::StringMap<int64_t> owner_;
  sched::GlobalOp lossSum_;
  bool failed_ = false;
  // The first stream and event the one-rank programs leave free: the
  // transfer streams start there, stream 0's progress is that event, and
  // transfer stream t's is progress + 1 + (t - first free stream).
  uint32_t firstFreeStream_ = 1, firstFreeEvent_ = 1;
  uint32_t progressEvent() const { return firstFreeEvent_; }
  uint32_t eventOf(uint32_t stream) const {
    return firstFreeEvent_ + 1 + (stream - firstFreeStream_);
  }
};

std::optional<int64_t> PipelineLowering::stageOfLayer(LayerAttr layer) const {
  const int64_t last = static_cast<int64_t>(partition_.stages.size()) - 1;
  if (layer.isEmbedding())
    return 0;
  if (layer.isLoss())
    return last;
  for (int64_t s = 0; s <= last; ++s) {
    const pipeline::StageLayers &st = partition_.stages[s];
    if (layer.getIndex() >= st.first && layer.getIndex() < st.first + st.layers)
      return s;
  }
  return std::nullopt;
}

LogicalResult PipelineLowering::findPrograms() {
  for (auto program : module_.getOps<sched::ProgramOp>()) {
    if (program.getKind() == sched::ProgramKind::Step)
      step_ = program;
    else
      init_ = program;
  }
  if (!step_)
    return module_.emitError("braid-lower-pipeline needs the step program "
                             "of braid-lower-to-sched");
  Operation *repeat = nullptr;
  for (Operation &op : step_.getBody().front()) {
    if (auto r = dyn_cast<sched::RepeatOp>(op)) {
      if (repeat)
        return r.emitOpError("is the step's second sched.repeat; "
                             "braid-lower-pipeline expects one, of every "
                             "micro-batch");
      repeat = r;
      repeat_ = r;
      continue;
    }
    (repeat ? epilogue_ : prologue_).push_back(&op);
  }
  if (repeat_)
    for (Operation &op : repeat_.getBody().front()) {
      // The TP group's sums and the EP group's exchanges are part of a
      // piece's compute.
      if (isPieceCollective(&op)) {
        // braid-overlap runs every EP exchange on one stream of its own
        // with ep_comm_overlap, in program order, whichever compute
        // stream issued it; TP sums stay on their compute stream.
        groupCalls_ = groupCalls_ ||
                      cast<sched::CollectiveOp>(op).getAxis() ==
                          sched::MeshAxis::Tp ||
                      !module_->hasAttr(BraidDialect::kEpCommOverlapAttr);
        continue;
      }
      if (isa<sched::EventRecordOp, sched::EventWaitOp, sched::CollectiveOp>(
              op))
        return op.emitOpError("in the micro-batch of a step to be "
                              "pipelined: ZeRO stages 2 and 3 do not combine "
                              "with pipeline_parallel yet");
    }
  // The transfers' streams and events come after those the one-rank
  // programs use (the data-parallel reduction's).
  for (sched::ProgramOp program : {step_, init_}) {
    if (!program)
      continue;
    const sched::FreeIds free = sched::firstFree(program);
    firstFreeEvent_ = std::max(firstFreeEvent_, free.event);
    firstFreeStream_ = std::max(firstFreeStream_, free.stream);
  }
  if (!repeat_ || repeat_.getCount() != schedule_.microBatches)
    return step_.emitOpError() << "needs one sched.repeat of the schedule's "
                               << schedule_.microBatches << " micro-batches";
  return success();
}

LogicalResult PipelineLowering::classifyBody() {
  // Which stage and part writes each of the body's buffers.
  llvm::DenseMap<Value, std::pair<int64_t, Part>> writer;
  const int64_t lossStage = static_cast<int64_t>(partition_.stages.size()) - 1;
  for (Operation &op : repeat_.getBody().front()) {
    if (isa<sched::GetGlobalOp, sched::AllocOp>(op))
      continue;
    if (auto stage = dyn_cast<sched::StageOp>(op)) {
      if (auto get = stage.getBuffer().getDefiningOp<sched::GetGlobalOp>())
        inputs_.insert(get.getGlobal());
      continue;
    }
    if (auto rb = dyn_cast<sched::ReadbackOp>(op)) {
      pieces_[{lossStage, Part::kF}].push_back(&op);
      continue;
    }
    // Launches, the TP group's sums (braid-shard) and the EP group's
    // exchanges, by their marks.
    auto launch = dyn_cast<sched::LaunchOp>(op);
    if (!launch && !isPieceCollective(&op))
      return op.emitOpError("in the micro-batch of a step to be pipelined: "
                            "braid-lower-pipeline splits launches, TP and EP "
                            "collectives, stages and readbacks only");
    LayerAttr layer = layerMark(&op);
    std::optional<Phase> phase = phaseMark(&op);
    std::optional<int64_t> stage = layer ? stageOfLayer(layer) : std::nullopt;
    if (!stage || !phase || *phase == Phase::Optimizer)
      return op.emitOpError("has no layer or no forward/backward phase "
                            "mark, so no pipeline stage can run it");
    const Part part = *phase == Phase::Forward     ? Part::kF
                      : *phase == Phase::InputGrad ? Part::kB
                                                   : Part::kW;
    pieces_[{*stage, part}].push_back(&op);
    // What the op writes: a launch's outputs, a gather's, scatter's or
    // exchange's outputs, an all-reduce's buffers.
    auto collective = dyn_cast<sched::CollectiveOp>(op);
    ValueRange written = launch ? launch.getOuts()
                         : collective.getOutputs().empty()
                             ? collective.getBuffers()
                             : collective.getOutputs();
    for (Value out : written)
      if (out.getDefiningOp<sched::AllocOp>())
        writer.try_emplace(out, *stage, part);
  }
  // The buffers read by another stage than the one that writes them.
  std::set<std::tuple<int64_t, int64_t, Operation *>> seen;
  for (auto &[key, ops] : pieces_) {
    const int64_t reader = key.first;
    for (Operation *op : ops) {
      for (Value in : op->getOperands()) {
        auto it = writer.find(in);
        if (it == writer.end() || it->second.first == reader)
          continue;
        const auto [from, part] = it->second;
        if (part == Part::kW ||
            reader != (part == Part::kF ? from + 1 : from - 1))
          return op->emitOpError()
                 << "reads a tensor of stage " << from << " in stage " << reader
                 << ": pipeline stages exchange activations with the next "
                    "stage and gradients with the previous one only";
        if (seen.insert({from, reader, in.getDefiningOp()}).second)
          crossings_.push_back({in, from, reader, part});
      }
    }
  }
  return success();
}

LogicalResult PipelineLowering::findOwners() {
  llvm::StringMap<sched::GlobalOp> globals;
  for (auto g : module_.getOps<sched::GlobalOp>())
    globals[g.getSymName()] = g;
  // A parameter (or buffer: an expert bias) belongs to the rank of the
  // stages that read it.
  for (auto &[key, ops] : pieces_) {
    const int64_t rank = rankOf(key.first);
    for (Operation *op : ops)
      for (Value in : op->getOperands()) {
        auto get = in.getDefiningOp<sched::GetGlobalOp>();
        if (!get)
          continue;
        sched::GlobalOp g = globals.lookup(get.getGlobal());
        // What the micro-batch reads may be a parameter's copy (a bf16
        // weight copy, ZeRO's gathered whole weight): the parameter's.
        while (g && g.getOf())
          g = globals.lookup(g.getOfAttr().getValue());
        if (!g || (g.getKind() != sched::GlobalKind::Parameter &&
                   g.getKind() != sched::GlobalKind::Buffer))
          continue;
        auto [it, inserted] = owner_.try_emplace(g.getSymName(), rank);
        if (!inserted && it->second != rank)
          return op->emitOpError()
                 << "reads parameter " << g.getSymName() << " on pipeline rank "
                 << rank << ", which rank " << it->second
                 << " holds too: a pipeline keeps each parameter on one rank "
                    "(tied embeddings do not combine with pipeline_parallel "
                    "yet)";
      }
  }
  for (auto &[name, g] : globals) {
    if (g.getRole() == sched::Role::LossSum)
      lossSum_ = g;
    switch (g.getKind()) {
    case sched::GlobalKind::Input:
    case sched::GlobalKind::Scalar:
      owner_[name] = -1;
      break;
    case sched::GlobalKind::Parameter:
    case sched::GlobalKind::Buffer:
      owner_.try_emplace(name, 0);
      break;
    default:
      break;
    }
  }
  for (auto &[name, g] : globals)
    if (g.getOf())
      owner_[name] = owner_.lookup(g.getOfAttr().getValue());
  if (!lossSum_)
    return module_.emitError("braid-lower-pipeline needs the loss_sum scalar "
                             "of braid-lower-to-sched");
  return success();
}

SmallVector<Piece> PipelineLowering::piecesOf(int64_t rank,
                                              const pipeline::Entry &e) const {
  const pipeline::Placement &pl = partition_.placement;
  const int64_t s = pl.stageOf(rank, e.chunk);
  switch (e.kind) {
  case pipeline::Kind::kF:
    return {{s, e.mb, Part::kF}};
  case pipeline::Kind::kB:
    return {{s, e.mb, Part::kB}};
  case pipeline::Kind::kW:
    return {{s, e.mb, Part::kW}};
  case pipeline::Kind::kBW:
    return {{s, e.mb, Part::kB}, {s, e.mb, Part::kW}};
  case pipeline::Kind::kFB: {
    const int64_t bs = pl.stageOf(rank, e.bChunk);
    return {{s, e.mb, Part::kF}, {bs, e.bMb, Part::kB}, {bs, e.bMb, Part::kW}};
  }
  }
  return {};
}

// Clones (once per stage and micro-batch) the get_global or alloc behind
// `v`, or finds a tensor another stage of this rank wrote (DualPipeV's turn
// at the last rank).
Value PipelineLowering::cloneValue(RankState &st, IRMapping &map, Value v,
                                   int64_t stage, int64_t mb) {
  if (Value known = map.lookupOrNull(v))
    return known;
  for (const Crossing &c : crossings_)
    if (c.buffer == v && c.to == stage && rankOf(c.from) == st.rank) {
      Value other = st.maps[{c.from, mb}].lookupOrNull(v);
      if (other) {
        map.map(v, other);
        return other;
      }
    }
  Operation *def = v.getDefiningOp();
  Operation *copy = b_.clone(*def);
  map.map(v, copy->getResult(0));
  return copy->getResult(0);
}

void PipelineLowering::postReceives(RankState &st, size_t entry,
                                    int64_t waitValue) {
  const std::vector<pipeline::Entry> &order = schedule_.ranks[st.rank];
  if (entry >= order.size())
    return;
  for (const Piece &piece : piecesOf(st.rank, order[entry])) {
    if (piece.part == Part::kW)
      continue;
    for (const Crossing &c : crossings_) {
      if (c.to != piece.stage || rankOf(c.from) == st.rank ||
          (c.writtenIn == Part::kF) != (piece.part == Part::kF))
        continue;
      const uint32_t channel = c.writtenIn == Part::kF ? 0 : 1;
      const int64_t offset = rankOf(c.from) - st.rank;
      const uint32_t stream = streamFor(st, {offset, channel, false});
      if (waitValue > 0)
        wait(progressEvent(), waitValue, stream);
      Value buf = sched::AllocOp::create(
          b_, loc(), cast<MemRefType>(c.buffer.getType()), IntegerAttr());
      sched::RecvOp::create(b_, loc(), buf, b_.getSI32IntegerAttr(offset),
                            b_.getI32IntegerAttr(channel),
                            b_.getI32IntegerAttr(stream));
      const int64_t value = ++st.streamValue[stream];
      record(eventOf(stream), value, stream);
      st.maps[{piece.stage, piece.mb}].map(c.buffer, buf);
      st.recvWaits[entry].push_back({stream, value, piece.part != Part::kF});
    }
  }
}

void PipelineLowering::emitPiece(RankState &st, const Piece &piece,
                                 uint32_t onStream) {
  if (piece.part == Part::kB)
    for (auto [stream, value] : st.activationSends[{piece.stage, piece.mb}])
      wait(eventOf(stream), value, onStream);
  mark(piece, onStream, /*end=*/false);
  llvm::StringSet<> staged;
  for (Operation *op : pieces_[{piece.stage, piece.part}])
    emitOp(st, piece, op, onStream, staged);
  mark(piece, onStream, /*end=*/true);
}

void PipelineLowering::emitWholeBackward(RankState &st, const Piece &piece,
                                         uint32_t onStream) {
  for (auto [stream, value] : st.activationSends[{piece.stage, piece.mb}])
    wait(eventOf(stream), value, onStream);
  // Layer by layer, in the order of the micro-batch's program: a layer's
  // input gradients, then its weight gradients (W ops follow the B ops
  // they read), so what the weight gradients read dies with each layer
  // instead of at the end of the stage's backward.
  const SmallVector<Operation *> &b = pieces_[{piece.stage, Part::kB}];
  const SmallVector<Operation *> &w = pieces_[{piece.stage, Part::kW}];
  SmallVector<Operation *> ops(b.begin(), b.end());
  ops.append(w.begin(), w.end());
  const llvm::DenseSet<Operation *> weightOps(w.begin(), w.end());
  llvm::stable_sort(ops, [](Operation *x, Operation *y) {
    return x->isBeforeInBlock(y);
  });
  Operation *lastB = b.empty() ? nullptr : b.back();
  llvm::StringSet<> staged;
  SmallVector<Operation *> held; // the current layer's W ops
  auto run = [&](ArrayRef<Operation *> segment, Part part) {
    if (segment.empty())
      return;
    const Piece p{piece.stage, piece.mb, part};
    mark(p, onStream, /*end=*/false);
    for (Operation *op : segment)
      emitOp(st, p, op, onStream, staged);
    mark(p, onStream, /*end=*/true);
  };
  SmallVector<Operation *> inputGrads;
  for (Operation *op : ops) {
    if (weightOps.contains(op)) {
      held.push_back(op);
      continue;
    }
    // A B op of another layer: the held layer's B and W run first.
    if (!held.empty() && layerMark(held.front()) != layerMark(op)) {
      run(inputGrads, Part::kB);
      inputGrads.clear();
      run(held, Part::kW);
      held.clear();
    }
    inputGrads.push_back(op);
    if (op == lastB) {
      run(inputGrads, Part::kB);
      inputGrads.clear();
      // The gradient goes to the stage before as soon as it is computed.
      postSends(st, {piece.stage, piece.mb, Part::kB}, onStream);
    }
  }
  run(inputGrads, Part::kB);
  run(held, Part::kW);
}

void PipelineLowering::emitOp(RankState &st, const Piece &piece, Operation *op,
                              uint32_t onStream, llvm::StringSet<> &staged) {
  IRMapping &map = st.maps[{piece.stage, piece.mb}];
  for (Value in : op->getOperands()) {
    Value copy = cloneValue(st, map, in, piece.stage, piece.mb);
    // An input is staged again for this micro-batch before the piece
    // first reads it: other micro-batches may have been staged since.
    auto get = in.getDefiningOp<sched::GetGlobalOp>();
    if (get && inputs_.contains(get.getGlobal()) &&
        staged.insert(get.getGlobal()).second)
      sched::StageOp::create(b_, loc(), copy, b_.getI32IntegerAttr(piece.mb),
                             b_.getI32IntegerAttr(onStream));
  }
  if (auto launch = dyn_cast<sched::LaunchOp>(op))
    for (Value out : launch.getOuts())
      cloneValue(st, map, out, piece.stage, piece.mb);
  if (auto sum = dyn_cast<sched::CollectiveOp>(op))
    for (Value out : sum.getOutputs())
      cloneValue(st, map, out, piece.stage, piece.mb);
  Operation *copy = b_.clone(*op, map);
  copy->setAttr("stream", b_.getI32IntegerAttr(onStream));
  if (auto l = dyn_cast<sched::LaunchOp>(copy))
    l.setMicroBatchAttr(b_.getI32IntegerAttr(l.getMicroBatch().value_or(0) +
                                             static_cast<int32_t>(piece.mb)));
  else if (auto rb = dyn_cast<sched::ReadbackOp>(copy))
    rb.setSlotAttr(
        b_.getI32IntegerAttr(rb.getSlot() + static_cast<int32_t>(piece.mb)));
}

void PipelineLowering::mark(const Piece &piece, uint32_t stream, bool end) {
  static constexpr const char *kParts[] = {"F", "B", "W"};
  sched::MarkOp::create(
      b_, loc(), b_.getStringAttr(kParts[static_cast<int>(piece.part)]),
      b_.getI32IntegerAttr(static_cast<int32_t>(piece.stage)),
      b_.getI32IntegerAttr(static_cast<int32_t>(piece.mb)),
      end ? b_.getUnitAttr() : UnitAttr(), b_.getI32IntegerAttr(stream));
}

void PipelineLowering::postSends(RankState &st, const Piece &piece,
                                 uint32_t onStream) {
  if (piece.part == Part::kW)
    return;
  bool recorded = false;
  // What the sends wait for: the computing stream's event, once the piece
  // has written their buffers.
  uint32_t event = progressEvent();
  int64_t done = 0;
  for (const Crossing &c : crossings_) {
    if (c.from != piece.stage || rankOf(c.to) == st.rank ||
        (c.writtenIn == Part::kF) != (piece.part == Part::kF))
      continue;
    if (!recorded) {
      if (onStream == kCompute) {
        done = ++st.progress;
      } else {
        event = eventOf(onStream);
        done = ++st.streamValue[onStream];
      }
      record(event, done, onStream);
      recorded = true;
    }
    const uint32_t channel = c.writtenIn == Part::kF ? 0 : 1;
    const int64_t offset = rankOf(c.to) - st.rank;
    const uint32_t stream = streamFor(st, {offset, channel, true});
    wait(event, done, stream);
    Value buf = st.maps[{piece.stage, piece.mb}].lookup(c.buffer);
    sched::SendOp::create(b_, loc(), buf, b_.getSI32IntegerAttr(offset),
                          b_.getI32IntegerAttr(channel),
                          b_.getI32IntegerAttr(stream));
    const int64_t value = ++st.streamValue[stream];
    record(eventOf(stream), value, stream);
    if (channel == 0)
      st.activationSends[{piece.stage, piece.mb}].push_back({stream, value});
  }
}

// Copies the ops of `ops` (outside the micro-batch) that touch this rank's
// globals: those that touch only other ranks' globals are left out, and the
// gradient norm over every gradient becomes a norm of norms.
LogicalResult PipelineLowering::copyFiltered(ArrayRef<Operation *> ops,
                                             int64_t rank, IRMapping &map) {
  for (Operation *op : ops) {
    if (auto get = dyn_cast<sched::GetGlobalOp>(op)) {
      if (visible(get.getGlobal(), rank))
        b_.clone(*op, map);
      continue;
    }
    if (isa<sched::AllocOp, sched::EventRecordOp, sched::EventWaitOp>(op)) {
      b_.clone(*op, map);
      continue;
    }
    if (auto coll = dyn_cast<sched::CollectiveOp>(op)) {
      // A data-parallel collective over every gradient: this rank's part.
      SmallVector<Value> buffers, outputs;
      const bool paired = !coll.getOutputs().empty();
      for (auto [i, v] : llvm::enumerate(coll.getBuffers())) {
        Value mine = map.lookupOrNull(v);
        if (!mine)
          continue;
        buffers.push_back(mine);
        if (!paired)
          continue;
        Value out = map.lookupOrNull(coll.getOutputs()[i]);
        if (!out)
          return coll.emitOpError()
                 << "pairs buffer " << i << " of pipeline rank " << rank
                 << " with an output of another rank";
        outputs.push_back(out);
      }
      if (buffers.empty())
        continue;
      sched::CollectiveOp::create(b_, coll.getLoc(), coll.getKindAttr(),
                                  coll.getAxisAttr(), buffers, outputs,
                                  coll.getStreamAttr(), coll.getOffsetAttr());
      continue;
    }
    // A norm over gradients becomes a norm of every rank's norm on every
    // rank alike, whether this rank holds all, some or none of them (a
    // rank without an MoE layer holds none of the experts' gradients,
    // whose norm is a launch of its own under expert parallel), so that
    // every rank issues the same gathers.
    auto launch = dyn_cast<sched::LaunchOp>(op);
    if (launch && launch.getKernel() == "grad_norm" &&
        llvm::any_of(launch.getIns(), [](Value in) {
          return in.getDefiningOp<sched::GetGlobalOp>() != nullptr;
        })) {
      if (failed(splitGradNorm(launch, map)))
        return failure();
      continue;
    }
    size_t mine = 0, theirs = 0;
    for (Value in : op->getOperands())
      (map.contains(in) ? mine : theirs) += 1;
    if (theirs == 0) {
      b_.clone(*op, map);
      continue;
    }
    // A launch that reads another rank's globals into transient buffers
    // (ZeRO rounding another stage's master for its bf16 copy) is that
    // rank's, and so are the buffers: this rank drops them, and the
    // collective that reads them next leaves them out.
    if (launch &&
        llvm::all_of(launch.getIns(),
                     [&](Value v) { return !map.contains(v); }) &&
        llvm::all_of(launch.getOuts(), [&](Value v) {
          return !map.contains(v) || v.getDefiningOp<sched::AllocOp>();
        })) {
      for (Value v : op->getOperands())
        if (Value copy = map.lookupOrNull(v)) {
          if (copy.use_empty())
            copy.getDefiningOp()->erase();
          map.erase(v);
        }
      continue;
    }
    if (mine > 0 && launch && !llvm::all_of(launch.getOuts(), [&](Value v) {
          return !map.contains(v);
        }))
      return op->emitOpError("touches the globals of more than one pipeline "
                             "rank");
  }
  return success();
}

LogicalResult PipelineLowering::splitGradNorm(sched::LaunchOp norm,
                                              IRMapping &map) {
  SmallVector<Value> grads;
  for (Value in : norm.getIns())
    if (Value m = map.lookupOrNull(in))
      grads.push_back(m);
  if (norm.getOuts().size() != 1 || !map.contains(norm.getOuts()[0]))
    return norm.emitOpError("writes no gradient-norm scalar of this rank");
  Type f32 = b_.getF32Type();
  const int64_t ranks = partition_.placement.ranks;
  Value mine = sched::AllocOp::create(b_, loc(), MemRefType::get({1}, f32),
                                      IntegerAttr());
  if (grads.empty()) {
    // None of these gradients is this rank's: its part is 0.
    auto zero = sched::LaunchOp::create(
        b_, loc(), b_.getStringAttr("fill"), b_.getI32IntegerAttr(kCompute),
        /*micro_batch=*/IntegerAttr(), ValueRange{}, ValueRange{mine},
        b_.getDictionaryAttr(
            b_.getNamedAttr("value", b_.getF64FloatAttr(0.0))));
    copyMarks(norm, zero);
  } else {
    auto part = cast<sched::LaunchOp>(b_.clone(*norm, map));
    part.getInsMutable().assign(grads);
    part.getOutsMutable().assign(mine);
  }
  Value all = sched::AllocOp::create(b_, loc(), MemRefType::get({ranks}, f32),
                                     IntegerAttr());
  MLIRContext *ctx = b_.getContext();
  sched::CollectiveOp::create(
      b_, loc(),
      sched::CollectiveKindAttr::get(ctx, sched::CollectiveKind::AllGather),
      sched::MeshAxisAttr::get(ctx, sched::MeshAxis::Pp), ValueRange{mine},
      ValueRange{all}, b_.getI32IntegerAttr(kCompute), IntegerAttr());
  auto whole = cast<sched::LaunchOp>(b_.clone(*norm, map));
  whole.getInsMutable().assign(all);
  return success();
}

void PipelineLowering::buildRank(int64_t rank) {
  MLIRContext *ctx = b_.getContext();
  b_.setInsertionPointToEnd(module_.getBody());
  auto sub = ModuleOp::create(b_, loc(), ("pp" + std::to_string(rank)));
  for (StringRef attr :
       {StringRef(BraidDialect::kModelAttr),
        StringRef(BraidDialect::kTrainAttr), StringRef(BraidDialect::kMeshAttr),
        StringRef(BraidDialect::kMoeAttr),
        StringRef(BraidDialect::kMoeAdaptiveRowsAttr),
        StringRef(BraidDialect::kMoeHotExpertsAttr), StringRef("braid.name")})
    if (Attribute a = module_->getAttr(attr))
      sub->setAttr(attr, a);
  sub->setAttr(BraidDialect::kPipelineRankAttr, b_.getI64IntegerAttr(rank));
  b_.setInsertionPointToEnd(sub.getBody());
  for (auto g : module_.getOps<sched::GlobalOp>())
    if (visible(g.getSymName(), rank))
      b_.clone(*g);

  if (init_) {
    auto init = cast<sched::ProgramOp>(b_.cloneWithoutRegions(*init_));
    init.getBody().push_back(new Block);
    b_.setInsertionPointToEnd(&init.getBody().front());
    IRMapping map;
    SmallVector<Operation *> ops;
    for (Operation &op : init_.getBody().front())
      ops.push_back(&op);
    if (failed(copyFiltered(ops, rank, map)))
      failed_ = true;
    b_.setInsertionPointAfter(init);
  }

  auto step = cast<sched::ProgramOp>(b_.cloneWithoutRegions(*step_));
  step.getBody().push_back(new Block);
  b_.setInsertionPointToEnd(&step.getBody().front());
  IRMapping outside;
  if (failed(copyFiltered(prologue_, rank, outside)))
    failed_ = true;

  RankState st;
  st.rank = rank;
  const std::vector<pipeline::Entry> &order = schedule_.ranks[rank];
  postReceives(st, 0, 0);
  for (size_t k = 0; k < order.size(); ++k) {
    record(progressEvent(), ++st.progress, kCompute);
    postReceives(st, k + 1, st.progress);
    if (order[k].kind == pipeline::Kind::kBW) {
      for (auto [stream, value, backward] : st.recvWaits[k])
        wait(eventOf(stream), value, kCompute);
      emitWholeBackward(st, piecesOf(rank, order[k]).front(), kCompute);
      continue;
    }
    // An FB pair's backward half runs on a second compute stream, beside
    // its forward half on stream 0: it starts once everything before the
    // entry has run, and stream 0 waits for it before the next entry.
    // With TP sums or EP exchanges inside the pieces both halves stay on
    // stream 0, one after the other: two streams would issue the group's
    // collectives in an order its ranks need not share. EP exchanges with
    // ep_comm_overlap do not count: braid-overlap issues them all from one
    // stream, in program order.
    const bool pair = order[k].kind == pipeline::Kind::kFB && !groupCalls_;
    const uint32_t side = pair ? streamFor(st, kOverlapStream) : kCompute;
    if (pair)
      wait(progressEvent(), st.progress, side);
    for (auto [stream, value, backward] : st.recvWaits[k])
      wait(eventOf(stream), value, backward ? side : kCompute);
    auto streamOf = [&](const Piece &piece) {
      return piece.part == Part::kF ? kCompute : side;
    };
    // A pair's backward half, with its sends, is stated first: a host that
    // runs stream 0 as it issues (the CPU's) has then handed it to its
    // stream before it computes the forward half, and its gradient send
    // does not wait for the forward half to end. The halves share no
    // buffer and their sends travel on different channels, so the order
    // changes nothing else.
    for (bool backwardHalf : {true, false}) {
      if (backwardHalf && !pair)
        continue;
      for (const Piece &piece : piecesOf(rank, order[k]))
        if (!pair || (piece.part != Part::kF) == backwardHalf)
          emitPiece(st, piece, streamOf(piece));
      for (const Piece &piece : piecesOf(rank, order[k]))
        if (!pair || (piece.part != Part::kF) == backwardHalf)
          postSends(st, piece, streamOf(piece));
    }
    if (pair) {
      const int64_t joined = ++st.streamValue[side];
      record(eventOf(side), joined, side);
      wait(eventOf(side), joined, kCompute);
    }
  }
  // Every transfer is done before the optimizer: the gradient sends' buffers
  // are free, and nothing of the step is left in flight.
  for (auto &[key, stream] : st.streams)
    if (int64_t last = st.streamValue[stream])
      wait(eventOf(stream), last, kCompute);
  // Only the loss stage adds to the loss sum; every rank's optimizer checks
  // the whole sum.
  Value lossSum = sched::GetGlobalOp::create(
      b_, loc(), lossSum_.getType(),
      FlatSymbolRefAttr::get(ctx, lossSum_.getSymName()));
  sched::CollectiveOp::create(
      b_, loc(),
      sched::CollectiveKindAttr::get(ctx, sched::CollectiveKind::AllReduceSum),
      sched::MeshAxisAttr::get(ctx, sched::MeshAxis::Pp), ValueRange{lossSum},
      ValueRange{}, b_.getI32IntegerAttr(kCompute), IntegerAttr());
  if (failed(copyFiltered(epilogue_, rank, outside)))
    failed_ = true;
  // A rank without the loss stage reads back no losses: its other slots
  // (the gradient norm, the skipped flag) move down over theirs, so that
  // every slot it has is filled.
  const int64_t lossRank = rankOf(static_cast<int64_t>(partition_.stages.size()) - 1);
  if (rank != lossRank)
    step.walk([&](sched::ReadbackOp rb) {
      rb.setSlotAttr(b_.getI32IntegerAttr(
          rb.getSlot() - static_cast<int32_t>(schedule_.microBatches)));
    });
}

LogicalResult PipelineLowering::run() {
  if (failed(findPrograms()) || failed(classifyBody()) || failed(findOwners()))
    return failure();
  for (int64_t r = 0; r < partition_.placement.ranks; ++r)
    buildRank(r);
  if (failed_)
    return failure();
  // The one-rank globals and programs now live in the ranks' modules.
  for (Operation &op :
       llvm::make_early_inc_range(module_.getBody()->getOperations()))
    if (!isa<ModuleOp>(op))
      op.erase();
  return success();
}

struct LowerPipelinePass : impl::LowerPipelinePassBase<LowerPipelinePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(BraidDialect::kScheduleAttr))
      return;
    absl::StatusOr<pipeline::Partition> partition = readPartition(module);
    absl::StatusOr<pipeline::Schedule> schedule = readSchedule(module);
    if (!partition.ok() || !schedule.ok()) {
      module.emitError(
          std::string((!partition.ok() ? partition.status() : schedule.status())
                          .message()));
      return signalPassFailure();
    }
    if (auto zero =
            module->getAttrOfType<IntegerAttr>(BraidDialect::kZeroStageAttr);
        zero && zero.getInt() >= 2) {
      module.emitError() << "ZeRO stage " << zero.getInt()
                         << " does not combine with a pipeline yet: it "
                            "reduces inside the micro-batches; use ZeRO 0 "
                            "or 1";
      return signalPassFailure();
    }
    if (failed(PipelineLowering(module, std::move(*partition),
                                std::move(*schedule))
                   .run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace braid
