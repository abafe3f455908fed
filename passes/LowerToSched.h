//===- LowerToSched.h - the lowering behind braid-lower-to-sched -*- C++ -*-===//
//
// The one class both halves of the pass share: LowerToSched.cpp states the
// globals, the micro-batches and the optimizer; LowerToSchedParallel.cpp
// the data-parallel reductions and ZeRO's shards, copies and gathers. Not a
// public header (the pass is declared in Passes.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <optional>
#include <string>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"
#include "dialects/sched/SchedOps.h"

namespace braid::lower_to_sched {

using namespace mlir;

// The buffer type of a tensor type.
MemRefType bufferType(Type tensor);

// The step program holds every micro-batch's launches, so their number is
// bounded: 2^16 keeps a plan of a few thousand launches per micro-batch
// well under protobuf's 2 GiB.
constexpr int64_t kMaxMicroBatches = 1 << 16;

class Lowering {
public:
  Lowering(ModuleOp module, func::FuncOp func, uint32_t optimizerStream)
      : module_(module), func_(func), b_(module.getContext()),
        optimizerStream_(optimizerStream) {}

  LogicalResult run();

private:
  LogicalResult checkSignature();
  void findWeightCopies();
  LogicalResult createGlobals();
  void planGradientSinks();
  void lowerInit();
  void resetAccumulators();
  LogicalResult lowerMicroBatch();
  void lowerGradientReduction();
  void unrollAndReduceMicroBatches(sched::RepeatOp repeat);
  void lowerOptimizer();
  Value lowerGradNorm(Location loc, ArrayRef<Value> grads);
  // The buffer a gradient contribution of the micro-batch being lowered is
  // written to (see gradSink_).
  Value gradSinkBuffer(Location loc, const std::string &sink);
  // Stage 3: the whole buffer parameter `i` is gathered into for `user`'s
  // phase (forward or backward) in this micro-batch.
  Value gatherBuffer(Location loc, size_t i, Operation *user);
  void insertGathers(ArrayRef<Operation *> microBatch, const IRMapping &map);
  sched::CollectiveOp
  collective(Location loc, sched::CollectiveKind kind, ValueRange ins,
             ValueRange outs, sched::MeshAxis axis = sched::MeshAxis::Dp,
             int32_t offset = 0) {
    MLIRContext *ctx = b_.getContext();
    return sched::CollectiveOp::create(
        b_, loc, sched::CollectiveKindAttr::get(ctx, kind),
        sched::MeshAxisAttr::get(ctx, axis), ins, outs,
        b_.getI32IntegerAttr(stream_),
        offset != 0 ? b_.getSI32IntegerAttr(offset) : IntegerAttr());
  }
  // braid-shard's collectives, on the stream of the launches around them.
  LogicalResult lowerComm(Operation &op, DenseMap<Value, Value> &buffers);
  bool sharded() const { return zeroStage_ >= 1; }
  // The communication stream: the one after the compute and optimizer
  // streams.
  uint32_t commStream() const {
    return std::max<uint32_t>(1, optimizerStream_ + 1);
  }
  // Stream 0 hands what it has written over to the communication stream:
  // event 1 reaches `value`.
  void handOver(Location loc, int64_t value) {
    sched::EventRecordOp::create(b_, loc, b_.getI32IntegerAttr(1),
                                 b_.getI64IntegerAttr(value),
                                 b_.getI32IntegerAttr(0));
    sched::EventWaitOp::create(b_, loc, b_.getI32IntegerAttr(1),
                               b_.getI64IntegerAttr(value),
                               b_.getI32IntegerAttr(commStream()));
  }
  // And the sums come back once the communication stream has made them:
  // event 2 reaches 1.
  void handBack(Location loc) {
    sched::EventRecordOp::create(b_, loc, b_.getI32IntegerAttr(2),
                                 b_.getI64IntegerAttr(1),
                                 b_.getI32IntegerAttr(commStream()));
    sched::EventWaitOp::create(b_, loc, b_.getI32IntegerAttr(2),
                               b_.getI64IntegerAttr(1),
                               b_.getI32IntegerAttr(0));
  }
  // The group ZeRO shards a parameter over: the DP ranks, or, for an EP
  // share of an MoE layer's experts (`part` along ep), the ranks that hold
  // the same experts (edp), as Megatron's distributed optimizer shards
  // experts over the expert data-parallel group.
  static sched::MeshAxis zeroAxis(sched::ShardAttr part) {
    return part && part.getAxis() == sched::MeshAxis::Ep ? sched::MeshAxis::Edp
                                                         : sched::MeshAxis::Dp;
  }
  // A parameter's ZeRO shard: dimension 0 divided by its ZeRO group's size.
  Type shardType(Type whole, sched::ShardAttr part) const {
    auto t = cast<RankedTensorType>(whole);
    SmallVector<int64_t> shape(t.getShape());
    shape[0] /= groupSize(zeroAxis(part));
    return RankedTensorType::get(shape, t.getElementType());
  }
  MemRefType shardBuffer(Type whole, sched::ShardAttr part) const {
    return bufferType(shardType(whole, part));
  }
  // One collective of `kind` per ZeRO group (DP, then EDP) of the
  // parameters whose buffers ins[i] and outs[i] are; `axes[i]` is
  // zeroAxis of parameter i's part.
  void zeroCollectives(Location loc, sched::CollectiveKind kind,
                       ArrayRef<sched::MeshAxis> axes, ArrayRef<Value> ins,
                       ArrayRef<Value> outs) {
    for (sched::MeshAxis axis : {sched::MeshAxis::Dp, sched::MeshAxis::Edp}) {
      SmallVector<Value> in, out;
      for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i] == axis) {
          in.push_back(ins[i]);
          out.push_back(outs[i]);
        }
      if (!in.empty())
        collective(loc, kind, in, out, axis);
    }
  }
  void readback(StringRef scalar, int32_t slot) {
    sched::ReadbackOp::create(b_, module_.getLoc(), getGlobal(scalar),
                              b_.getI32IntegerAttr(slot),
                              b_.getI32IntegerAttr(stream_));
  }
  void refreshWeightCopies(Location loc);

  // A global; `shard` makes it this rank's ZeRO shard of `tensorType`;
  // `part` says which part `tensorType` (already this rank's) is: a TP
  // part, or an EP share of an MoE layer's experts.
  sched::GlobalOp global(StringRef sym, sched::GlobalKind kind,
                         Type tensorType, StringRef of = {},
                         std::optional<sched::Role> role = std::nullopt,
                         sched::ParamInfoAttr info = {}, bool shard = false,
                         sched::ShardAttr part = {}) {
    MLIRContext *ctx = b_.getContext();
    // A ZeRO shard of a TP part or an EP share keeps the part's
    // description, with dp_rows.
    sched::ShardAttr shardAttr = part;
    if (shard)
      shardAttr = part ? sched::ShardAttr::get(ctx, part.getAxis(),
                                                  part.getDim(),
                                                  part.getBlocks(), true)
                          : sched::ShardAttr::get(ctx, sched::MeshAxis::Dp, 0);
    auto g = sched::GlobalOp::create(
        b_, module_.getLoc(), b_.getStringAttr(sym),
        sched::GlobalKindAttr::get(ctx, kind),
        of.empty() ? FlatSymbolRefAttr() : FlatSymbolRefAttr::get(ctx, of),
        role ? sched::RoleAttr::get(ctx, *role) : sched::RoleAttr(),
        TypeAttr::get(shard ? shardBuffer(tensorType, part)
                            : bufferType(tensorType)),
        IntegerAttr(), info, shardAttr);
    globals_[sym] = g;
    return g;
  }
  Value getGlobal(StringRef sym) {
    sched::GlobalOp g = globals_.lookup(sym);
    return sched::GetGlobalOp::create(b_, module_.getLoc(), g.getType(),
                                      FlatSymbolRefAttr::get(g.getSymNameAttr()));
  }
  sched::LaunchOp launch(Location loc, StringRef kernel, ValueRange ins,
                         ValueRange outs, DictionaryAttr params) {
    return sched::LaunchOp::create(
        b_, loc, b_.getStringAttr(kernel), b_.getI32IntegerAttr(stream_),
        IntegerAttr(), ins, outs,
        params && !params.empty() ? params : DictionaryAttr());
  }
  // A launch of the optimizer (or of `init`, which sets up what it keeps).
  sched::LaunchOp optimizerLaunch(Location loc, StringRef kernel,
                                  ValueRange ins, ValueRange outs,
                                  DictionaryAttr params) {
    sched::LaunchOp l = launch(loc, kernel, ins, outs, params);
    setPhaseMark(l, Phase::Optimizer);
    return l;
  }

  struct Param {
    BlockArgument arg;
    std::string name;
    bool weightDecay;
    sched::InitKind init;
    double initStd;
    bool checkpointTransposed;
    // The weight copy compute reads (BF16): its symbol and tensor type;
    // empty when compute reads the parameter itself.
    std::string copy = {};
    Type copyType = {};
    // The part this rank holds: a TP part (braid-shard) or its EP share of
    // the experts (braid.ep); null when whole.
    sched::ShardAttr part = {};
  };

  static bool isExpertShare(const Param &p) {
    return p.part && p.part.getAxis() == sched::MeshAxis::Ep;
  }

  // Untrained state (braid.buffer arguments): the global of the same name,
  // and `NAME.load`, the step's accumulated expert counts that update it.
  struct Buffer {
    BlockArgument arg;
    std::string name;
  };
  // An expert bias moved after the optimizer by its load.
  struct BiasUpdate {
    std::string buffer;
    double rate;
  };

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder b_;
  SmallVector<Param> params_;
  SmallVector<Buffer> buffers_;
  SmallVector<BiasUpdate> biasUpdates_;
  llvm::StringMap<sched::GlobalOp> globals_;
  DenseMap<Value, sched::Role> inputRole_;
  // Gradient leaves: value -> gradient global symbol.
  DenseMap<Value, std::string> gradSink_;
  DenseSet<Operation *> absorbed_, accumulating_;
  // Casts of parameters that read a weight copy: op -> index in params_.
  DenseMap<Operation *, size_t> copyCasts_;
  TrainAttr train_;
  int32_t numMicroBatches_ = 1;
  // braid.mesh's DP, TP and CP sizes; 1 when the module has no mesh (one
  // rank).
  int64_t dataParallel_ = 1;
  int64_t tensorParallel_ = 1;
  int64_t contextParallel_ = 1;
  // braid.mesh's ep: expert-parallel ranks per group within DP.
  int64_t expertParallel_ = 1;
  // The size of the group along a mesh axis of braid.comm ops.
  int64_t groupSize(sched::MeshAxis axis) const {
    switch (axis) {
    case sched::MeshAxis::Tp:
      return tensorParallel_;
    case sched::MeshAxis::Cp:
      return contextParallel_;
    case sched::MeshAxis::Dp:
      return dataParallel_;
    case sched::MeshAxis::DpCp:
      return dataParallel_ * contextParallel_;
    case sched::MeshAxis::Ep:
      return expertParallel_;
    case sched::MeshAxis::Edp:
      return dataParallel_ / expertParallel_ * contextParallel_;
    case sched::MeshAxis::Pp:
      break;
    }
    return 1;
  }
  // braid.zero_stage; 0 when the module has none.
  int64_t zeroStage_ = 0;
  // Stage 2: the transient whole gradients of the micro-batch being
  // lowered, by gradient symbol.
  llvm::StringMap<Value> microGrads_;
  // The whole (unsharded) buffer type of each gradient symbol.
  llvm::StringMap<MemRefType> wholeGrad_;
  // Stage 3: the buffers of the micro-batch being lowered into which a
  // parameter is gathered, by 2 x its index, + 1 for backward.
  DenseMap<size_t, Value> gathered_;
  // Stage 3: the last values of events 3 and 4 (see insertGathers).
  int64_t gatherTrigger_ = 0, gatherDone_ = 0;
  // braid.comm_chunks: the pieces each gather is cut into.
  int64_t commChunks_ = 1;
  const uint32_t optimizerStream_;
  // The stream of the launches being created.
  uint32_t stream_ = 0;
};


} // namespace braid::lower_to_sched
