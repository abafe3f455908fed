//===- OptimizerOffload.cpp - braid-offload-optimizer ---------------------===//
//
// Optimizer offload (docs/memory.md "Optimizer offload"). Every parameter
// the rank updates keeps its fp32 master and Adam moments in the host
// arena, and AdamW runs on a host stream; the device keeps what compute
// reads (the bf16 weight copy of BF16 plans, an f32 one made here for FP32
// plans) and the gradients. After `step_guard`, bucket by bucket:
//
//   optimizer stream    step_guard; record S=1
//   to-host stream      wait S=1; copy norm, skipped -> host
//                       copy bucket k's gradients -> host; record O=k+1
//   host stream         wait O=k+1; adamw (host grads) -> masters, moments
//                       [BF16: cast masters -> bf16 host buffers]
//                       record U=k+1
//   to-device stream    wait U=k+1; copy masters (or bf16 buffers) ->
//                       weight copies; record D=k+1
//   optimizer stream    ... wait D=N at the end of the step
//
// so one bucket's AdamW runs beside the next bucket's copies to the host
// and the previous bucket's copies back. The weights are back before the
// step ends, and so before the next step's forward. The `init` program
// fills the weight copies from the masters the same way (BF16: a host
// cast, then a copy). The numbers do not change: the host runs the
// kernels the device would.
//
// Runs on braid-lower-to-sched's (or braid-lower-pipeline's) step before
// braid-fuse-adamw, which then fuses each bucket's AdamW launches.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include <algorithm>
#include <map>

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include "compiler/spec/OffloadTargets.h"
#include "dialects/braid/Marks.h"
#include "dialects/sched/SchedOps.h"
#include "passes/MemoryComparison.h"
#include "passes/PipelineAttrs.h"
#include "passes/analysis/Liveness.h"

namespace braid {
#define GEN_PASS_DEF_OPTIMIZEROFFLOADPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

int64_t bytesOf(Type type) { return bufferBytes(cast<MemRefType>(type)); }

// The global a launch operand is, or null.
sched::GlobalOp globalOf(ModuleOp module, Value v) {
  auto get = v.getDefiningOp<sched::GetGlobalOp>();
  return get ? module.lookupSymbol<sched::GlobalOp>(get.getGlobalAttr())
             : sched::GlobalOp();
}

// One parameter the rank updates.
struct Update {
  sched::LaunchOp adamw;
  sched::GlobalOp param, grad, m, v;
  sched::GlobalOp copy;              // what compute reads
  sched::LaunchOp refresh;           // BF16: the step's cast into the copy
};

// What one rank's rewrite copies per step.
struct Traffic {
  int64_t toHost = 0, toDevice = 0;
};

class OptimizerOffloader {
public:
  OptimizerOffloader(ModuleOp module, int64_t bucketBytes)
      : module_(module), b_(module.getContext()), bucketBytes_(bucketBytes) {}

  FailureOr<Traffic> run();

private:
  LogicalResult collect(sched::ProgramOp step);
  void makeCopies();
  void redirectComputeReads(const llvm::DenseSet<Operation *> &kept);
  void rewriteInit();
  void rewriteStep(sched::ProgramOp step);
  Value global(sched::GlobalOp g) {
    return sched::GetGlobalOp::create(b_, module_.getLoc(), g.getType(),
                                      FlatSymbolRefAttr::get(g.getSymNameAttr()));
  }
  Value hostAlloc(Type type) {
    return sched::AllocOp::create(b_, module_.getLoc(), cast<MemRefType>(type),
                                  IntegerAttr(), /*host=*/true);
  }
  sched::LaunchOp launch(StringRef kernel, uint32_t stream, ValueRange ins,
                         ValueRange outs, DictionaryAttr params,
                         Operation *marksFrom) {
    auto l = sched::LaunchOp::create(
        b_, module_.getLoc(), b_.getStringAttr(kernel),
        b_.getI32IntegerAttr(stream), IntegerAttr(), ins, outs, params);
    if (marksFrom)
      copyMarks(marksFrom, l);
    setPhaseMark(l, Phase::Optimizer);
    return l;
  }
  void record(uint32_t event, int64_t value, uint32_t stream) {
    sched::EventRecordOp::create(b_, module_.getLoc(),
                                 b_.getI32IntegerAttr(event),
                                 b_.getI64IntegerAttr(value),
                                 b_.getI32IntegerAttr(stream));
  }
  void wait(uint32_t event, int64_t value, uint32_t stream) {
    sched::EventWaitOp::create(b_, module_.getLoc(),
                               b_.getI32IntegerAttr(event),
                               b_.getI64IntegerAttr(value),
                               b_.getI32IntegerAttr(stream));
  }
  static bool bf16(Update u) {
    return cast<MemRefType>(u.copy.getType()).getElementType().isBF16();
  }

  ModuleOp module_;
  OpBuilder b_;
  const int64_t bucketBytes_;
  sched::LaunchOp guard_;
  std::vector<Update> updates_;
  uint32_t optimizerStream_ = 0, toHost_ = 0, host_ = 0, toDevice_ = 0;
  uint32_t nextEvent_ = 0;
  Traffic traffic_;
};

// The step's step_guard and, after it, each AdamW launch with its
// parameter, gradient and weight copy.
LogicalResult OptimizerOffloader::collect(sched::ProgramOp step) {
  for (Operation &op : step.getBody().front()) {
    auto l = dyn_cast<sched::LaunchOp>(op);
    if (!l)
      continue;
    if (l.getKernel() == "step_guard") {
      guard_ = l;
      continue;
    }
    if (!guard_)
      continue;
    if (l.getKernel() == "multi_adamw")
      return l.emitOpError("braid-offload-optimizer runs before "
                           "braid-fuse-adamw: it splits the optimizer into "
                           "buckets, which braid-fuse-adamw then fuses");
    if (l.getKernel() != "adamw")
      continue;
    Update u;
    u.adamw = l;
    u.param = globalOf(module_, l.getOuts()[0]);
    u.grad = globalOf(module_, l.getIns()[0]);
    u.m = globalOf(module_, l.getOuts()[1]);
    u.v = globalOf(module_, l.getOuts()[2]);
    if (!u.param || !u.grad || !u.m || !u.v ||
        u.param.getKind() != sched::GlobalKind::Parameter)
      return l.emitOpError("braid-offload-optimizer: an adamw launch updates "
                           "a parameter global from its gradient global");
    if (u.param.getShardAttr() && u.param.getShardAttr().getDpRows())
      return l.emitOpError("braid-offload-optimizer: '")
             << u.param.getSymName()
             << "' is a ZeRO shard; optimizer offload keeps whole (or "
                "tensor-parallel) masters on the host";
    updates_.push_back(u);
  }
  if (!guard_)
    return step.emitOpError("braid-offload-optimizer: the step has no "
                            "step_guard launch (run braid-lower-to-sched "
                            "first)");
  for (Operation &op : step.getBody().front()) {
    auto cast = dyn_cast<sched::LaunchOp>(op);
    if (!cast || cast.getKernel() != "cast" || op.isBeforeInBlock(guard_))
      continue;
    sched::GlobalOp from = globalOf(module_, cast.getIns()[0]);
    for (Update &u : updates_)
      if (u.param == from)
        u.refresh = cast;
  }
  return success();
}

// A parameter compute reads as f32 gets an f32 device copy (sharded as
// the parameter is), named by its compute_copy.
void OptimizerOffloader::makeCopies() {
  MLIRContext *ctx = module_.getContext();
  Operation *last = nullptr;
  for (auto g : module_.getOps<sched::GlobalOp>())
    last = g;
  for (Update &u : updates_) {
    sched::ParamInfoAttr info = u.param.getInfoAttr();
    if (FlatSymbolRefAttr copy = info.getComputeCopy()) {
      u.copy = module_.lookupSymbol<sched::GlobalOp>(copy);
      continue;
    }
    b_.setInsertionPointAfter(last);
    const std::string name = (u.param.getSymName() + ".copy").str();
    u.copy = sched::GlobalOp::create(
        b_, u.param.getLoc(), b_.getStringAttr(name),
        sched::GlobalKindAttr::get(ctx, sched::GlobalKind::WeightCopy),
        FlatSymbolRefAttr::get(u.param.getSymNameAttr()), sched::RoleAttr(),
        u.param.getTypeAttr(), IntegerAttr(), sched::ParamInfoAttr(),
        u.param.getShardAttr());
    last = u.copy;
    u.param.setInfoAttr(sched::ParamInfoAttr::get(
        ctx, info.getName(), info.getInit(), info.getInitStd(),
        info.getWeightDecay(), info.getCheckpointTransposed(), info.getGrad(),
        info.getExpAvg(), info.getExpAvgSq(),
        FlatSymbolRefAttr::get(u.copy.getSymNameAttr())));
  }
  for (Update &u : updates_)
    for (sched::GlobalOp g : {u.param, u.m, u.v})
      g.setHostAttr(UnitAttr::get(ctx));
}

// Compute reads the f32 copies made above instead of the masters; only the
// optimizer's own launches (`kept`) read the masters.
void OptimizerOffloader::redirectComputeReads(
    const llvm::DenseSet<Operation *> &kept) {
  llvm::DenseMap<Operation *, sched::GlobalOp> copyOf;
  for (Update &u : updates_)
    if (!bf16(u))
      copyOf[u.param] = u.copy;
  SmallVector<sched::GetGlobalOp> gets;
  module_.walk([&](sched::GetGlobalOp g) { gets.push_back(g); });
  for (sched::GetGlobalOp get : gets) {
    auto param = module_.lookupSymbol<sched::GlobalOp>(get.getGlobalAttr());
    sched::GlobalOp copy = copyOf.lookup(param);
    if (!copy)
      continue;
    for (OpOperand &use : llvm::make_early_inc_range(get->getUses())) {
      if (kept.contains(use.getOwner()))
        continue;
      b_.setInsertionPoint(use.getOwner());
      use.set(global(copy));
    }
  }
}

// The init program fills every weight copy from its host master: FP32 by
// a copy on stream 0, BF16 by a cast on the host stream into a host bf16
// buffer, then a copy on stream 0.
void OptimizerOffloader::rewriteInit() {
  sched::ProgramOp init;
  for (auto p : module_.getOps<sched::ProgramOp>())
    if (p.getKind() == sched::ProgramKind::Init)
      init = p;
  if (!init) {
    b_.setInsertionPointToEnd(module_.getBody());
    init = sched::ProgramOp::create(b_, module_.getLoc(), "init",
                                    sched::ProgramKind::Init);
    init.getBody().emplaceBlock();
  }
  Block &body = init.getBody().front();
  // The init's own casts of the masters go.
  llvm::DenseSet<Operation *> params;
  for (Update &u : updates_)
    params.insert(u.param);
  for (auto l : llvm::make_early_inc_range(body.getOps<sched::LaunchOp>()))
    if (l.getKernel() == "cast" &&
        params.contains(globalOf(module_, l.getIns()[0])))
      l.erase();
  b_.setInsertionPointToEnd(&body);
  SmallVector<std::pair<Value, sched::GlobalOp>> back;
  for (Update &u : updates_) {
    if (!bf16(u))
      continue;
    Value h = hostAlloc(u.copy.getType());
    launch("cast", host_, {global(u.param)}, {h}, DictionaryAttr(), nullptr);
    back.push_back({h, u.copy});
  }
  if (!back.empty()) {
    const uint32_t event = nextEvent_++;
    record(event, 1, host_);
    wait(event, 1, 0);
  }
  for (auto [h, copy] : back)
    launch("copy", 0, {h}, {global(copy)}, DictionaryAttr(), nullptr);
  for (Update &u : updates_)
    if (!bf16(u))
      launch("copy", 0, {global(u.param)}, {global(u.copy)}, DictionaryAttr(),
             nullptr);
}

// The optimizer after step_guard, bucket by bucket (file comment).
void OptimizerOffloader::rewriteStep(sched::ProgramOp step) {
  const uint32_t started = nextEvent_++, out = nextEvent_++,
                 updated = nextEvent_++, back = nextEvent_++;
  b_.setInsertionPointAfter(guard_);
  record(started, 1, optimizerStream_);
  wait(started, 1, toHost_);
  sched::LaunchOp first = updates_.front().adamw;
  auto scalar = [&](Value v) {
    Value h = hostAlloc(v.getType());
    b_.setInsertionPointAfter(h.getDefiningOp());
    launch("copy", toHost_, {global(globalOf(module_, v))}, {h},
           DictionaryAttr(), first);
    traffic_.toHost += bytesOf(v.getType());
    return h;
  };
  Value norm = scalar(first.getIns()[1]);
  Value skipped = scalar(first.getIns()[2]);

  int64_t bucket = 0;
  for (size_t i = 0; i < updates_.size();) {
    // The bucket: parameters in AdamW order up to bucketBytes_.
    size_t end = i;
    int64_t bytes = 0;
    while (end < updates_.size() && (end == i || bytes < bucketBytes_))
      bytes += bytesOf(updates_[end++].param.getType());
    ++bucket;
    SmallVector<Value> grads, casts;
    for (size_t k = i; k < end; ++k) {
      Value h = hostAlloc(updates_[k].grad.getType());
      launch("copy", toHost_, {global(updates_[k].grad)}, {h},
             DictionaryAttr(), updates_[k].adamw);
      grads.push_back(h);
      traffic_.toHost += bytesOf(h.getType());
    }
    record(out, bucket, toHost_);
    wait(out, bucket, host_);
    for (size_t k = i; k < end; ++k) {
      Update u = updates_[k];
      launch("adamw", host_, {grads[k - i], norm, skipped},
             {global(u.param), global(u.m), global(u.v)},
             u.adamw.getParamsAttr(), u.adamw);
    }
    for (size_t k = i; k < end; ++k) {
      Update u = updates_[k];
      if (!bf16(u))
        continue;
      Value h = hostAlloc(u.copy.getType());
      launch("cast", host_, {global(u.param)}, {h}, DictionaryAttr(), u.adamw);
      casts.push_back(h);
    }
    record(updated, bucket, host_);
    wait(updated, bucket, toDevice_);
    size_t c = 0;
    for (size_t k = i; k < end; ++k) {
      Update u = updates_[k];
      Value from = bf16(u) ? casts[c++] : global(u.param);
      launch("copy", toDevice_, {from}, {global(u.copy)}, DictionaryAttr(),
             u.adamw);
      traffic_.toDevice += bytesOf(u.copy.getType());
    }
    record(back, bucket, toDevice_);
    i = end;
  }
  // Everything the step changed on the host is back on the device.
  b_.setInsertionPointToEnd(&step.getBody().front());
  wait(back, bucket, optimizerStream_);
  for (Update &u : updates_) {
    u.adamw.erase();
    if (u.refresh)
      u.refresh.erase();
  }
}

FailureOr<Traffic> OptimizerOffloader::run() {
  sched::ProgramOp step;
  for (auto p : module_.getOps<sched::ProgramOp>())
    if (p.getKind() == sched::ProgramKind::Step)
      step = p;
  if (!step)
    return module_.emitError("braid-offload-optimizer: no step program");
  if (failed(collect(step)))
    return failure();
  if (updates_.empty())
    return Traffic();
  // The three streams and the events: the first the rank leaves free.
  const sched::FreeIds free = sched::firstFree(module_);
  optimizerStream_ = guard_.getStream();
  toHost_ = free.stream;
  host_ = free.stream + 1;
  toDevice_ = free.stream + 2;
  nextEvent_ = free.event;
  SmallVector<int32_t> hostStreams;
  if (auto a = module_->getAttrOfType<DenseI32ArrayAttr>(
          sched::SchedDialect::kHostStreamsAttr))
    hostStreams.assign(a.asArrayRef().begin(), a.asArrayRef().end());
  hostStreams.push_back(static_cast<int32_t>(host_));
  module_->setAttr(sched::SchedDialect::kHostStreamsAttr,
                   b_.getDenseI32ArrayAttr(hostStreams));

  makeCopies();
  llvm::DenseSet<Operation *> kept;
  for (Update &u : updates_) {
    kept.insert(u.adamw);
    if (u.refresh)
      kept.insert(u.refresh);
  }
  redirectComputeReads(kept);
  rewriteInit();
  rewriteStep(step);
  // The masters' reads that went with the old launches.
  SmallVector<sched::GetGlobalOp> dead;
  module_.walk([&](sched::GetGlobalOp g) {
    if (g->use_empty())
      dead.push_back(g);
  });
  for (sched::GetGlobalOp g : dead)
    g.erase();
  return traffic_;
}

struct OptimizerOffloadPass
    : impl::OptimizerOffloadPassBase<OptimizerOffloadPass> {
  using OptimizerOffloadPassBase::OptimizerOffloadPassBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    if (!enabled(top))
      return;
    if (auto zero = top->getAttrOfType<IntegerAttr>(BraidDialect::kZeroStageAttr);
        zero && zero.getInt() > 0) {
      top.emitError("braid-offload-optimizer: optimizer offload does not "
                    "combine with ZeRO (braid.zero_stage ")
          << zero.getInt() << "): choose one";
      return signalPassFailure();
    }
    double mb = bucketMb;
    if (mb < 0) {
      auto a = top->getAttrOfType<FloatAttr>(BraidDialect::kBucketMbAttr);
      mb = a ? a.getValueAsDouble() : 0;
    }
    if (!(mb >= 0 && mb <= double(int64_t{1} << 20))) {
      top.emitError() << "braid-offload-optimizer: a bucket of " << mb
                      << " MiB; buckets are 0 to 2^20 MiB";
      return signalPassFailure();
    }
    const int64_t bucketBytes = static_cast<int64_t>(mb * 1024 * 1024);
    std::vector<MemoryFigures> without;
    if (compare) {
      FailureOr<std::vector<MemoryFigures>> planned =
          planAsItIs(top, "braid-offload-optimizer");
      if (failed(planned))
        return signalPassFailure();
      without = std::move(*planned);
    }
    SmallVector<ModuleOp> ranks = rankModules(top);
    Builder b(top.getContext());
    SmallVector<Attribute> entries;
    for (auto [r, module] : llvm::enumerate(ranks)) {
      FailureOr<Traffic> t = OptimizerOffloader(module, bucketBytes).run();
      if (failed(t))
        return signalPassFailure();
      SmallVector<NamedAttribute> entry = {
          b.getNamedAttr("to_host", b.getI64IntegerAttr(t->toHost)),
          b.getNamedAttr("to_device", b.getI64IntegerAttr(t->toDevice))};
      if (r < without.size())
        entry.push_back(b.getNamedAttr(
            "arena_without", b.getI64IntegerAttr(without[r].arena)));
      entries.push_back(b.getDictionaryAttr(entry));
    }
    top->setAttr(BraidDialect::kOptimizerOffloadReportAttr,
                 b.getArrayAttr(entries));
  }

  // The `enable` option, else the module's braid.offload naming optimizer.
  bool enabled(ModuleOp top) {
    if (enable)
      return true;
    auto attr = top->getAttrOfType<StringAttr>(BraidDialect::kOffloadAttr);
    if (!attr)
      return false;
    absl::StatusOr<OffloadTargets> parsed = parseOffloadTargets(attr.str());
    return parsed.ok() && parsed->optimizer;
  }
};

} // namespace
} // namespace braid
