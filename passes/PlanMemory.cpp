//===- PlanMemory.cpp - static arena offsets from liveness ----------------===//
//
// The arena the runtime allocates is exactly what this pass computes, so the
// peak reported here is the peak the run will use. Transient placement is
// greedy: largest buffer first, at the lowest 64-byte-aligned offset where it
// collides with no already-placed buffer whose live range overlaps its own
// (FirstFitPlacer finds that offset without scanning every placed buffer).
// Every buffer counts at its element type's size, so a BF16 plan's bf16
// activations and weight copies take half the bytes of their f32 twins.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include <algorithm>
#include <numeric>

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include "dialects/braid/Marks.h"
#include "dialects/sched/SchedOps.h"
#include "passes/MemoryComparison.h"
#include "passes/PipelineAttrs.h"
#include "passes/Recomputer.h"
#include "passes/analysis/FirstFit.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/PeakBreakdown.h"

namespace braid {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t v) {
  return (v + kAlignment - 1) / kAlignment * kAlignment;
}

struct MemoryTotals {
  int64_t parameter = 0, gradient = 0, optimizer = 0, weightCopy = 0;
  int64_t input = 0;
  int64_t activationPeak = 0, savedActivations = 0, arena = 0;
  // The host arena (braid-offload's copies, optimizer offload's masters,
  // moments and copies), the bytes braid-offload copies out to it in a
  // step, and the masters and moments on the host.
  int64_t host = 0, offloaded = 0;
  int64_t hostParameter = 0, hostOptimizer = 0;
};

// Host buffers (braid-offload's) go to the host arena, the rest to the
// device's transient region: two address spaces, planned apart.
std::vector<LiveRange> takeHostRanges(std::vector<LiveRange> &ranges) {
  std::vector<LiveRange> host;
  auto device = std::stable_partition(
      ranges.begin(), ranges.end(),
      [](LiveRange &r) { return !r.alloc.getHost(); });
  host.assign(device, ranges.end());
  ranges.erase(device, ranges.end());
  return host;
}

// Lays out the persistent globals kind by kind, the device's from 0 and
// the host's (optimizer offload's masters and moments) from 0 of the host
// arena; returns the end offset of each.
std::pair<int64_t, int64_t> placeGlobals(ModuleOp module,
                                         MemoryTotals &totals) {
  int64_t offset = 0, hostOffset = 0;
  OpBuilder b(module.getContext());
  using sched::GlobalKind;
  for (GlobalKind kind :
       {GlobalKind::Parameter, GlobalKind::Gradient, GlobalKind::OptimizerState,
        GlobalKind::WeightCopy, GlobalKind::Input, GlobalKind::Scalar,
        GlobalKind::Buffer}) {
    for (auto global : module.getOps<sched::GlobalOp>()) {
      if (global.getKind() != kind)
        continue;
      int64_t bytes = bufferBytes(global.getType());
      int64_t &at = global.getHost() ? hostOffset : offset;
      global.setOffsetAttr(b.getI64IntegerAttr(at));
      at += alignUp(bytes);
      if (global.getHost()) {
        (kind == GlobalKind::Parameter ? totals.hostParameter
                                       : totals.hostOptimizer) += bytes;
        continue;
      }
      switch (kind) {
      case GlobalKind::Parameter:
        totals.parameter += bytes;
        break;
      case GlobalKind::Gradient:
        totals.gradient += bytes;
        break;
      case GlobalKind::OptimizerState:
        totals.optimizer += bytes;
        break;
      case GlobalKind::WeightCopy:
        totals.weightCopy += bytes;
        break;
      case GlobalKind::Input:
      case GlobalKind::Scalar:
        totals.input += bytes;
        break;
      // Model state beside the parameters (an expert bias), and its load.
      case GlobalKind::Buffer:
        totals.parameter += bytes;
        break;
      }
    }
  }
  return {offset, hostOffset};
}

// Places one program's transient buffers in the transient region that
// starts at `base`; returns the region size the program needs.
// Places one program's transient buffers in the transient region that
// starts at `base`; returns the region size the program needs.
int64_t placeTransients(std::vector<LiveRange> &ranges, int64_t base) {
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].bytes != ranges[b].bytes)
      return ranges[a].bytes > ranges[b].bytes;
    return ranges[a].begin < ranges[b].begin;
  });

  int64_t numSteps = 0;
  for (const LiveRange &r : ranges)
    numSteps = std::max(numSteps, r.end + 1);
  FirstFitPlacer placer(numSteps);
  std::vector<int64_t> offsets(ranges.size(), -1);
  int64_t peak = 0;
  for (size_t i : order) {
    const LiveRange &r = ranges[i];
    int64_t size = alignUp(r.bytes);
    offsets[i] = placer.findOffset(r.begin, r.end, size);
    placer.place(r.begin, r.end, offsets[i], size);
    peak = std::max(peak, offsets[i] + size);
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    OpBuilder b(ranges[i].alloc);
    ranges[i].alloc.setOffsetAttr(b.getI64IntegerAttr(base + offsets[i]));
  }
  return peak;
}

// The index of the first backward launch (phase B or W); -1 when there is
// none.
int64_t backwardBoundary(const std::vector<Operation *> &launches) {
  for (size_t i = 0; i < launches.size(); ++i) {
    if (isBackwardPhase(launches[i]))
      return static_cast<int64_t>(i);
  }
  return -1;
}

// Bytes live across the forward/backward boundary: what the forward pass
// saves for the backward pass.
int64_t savedAcrossBoundary(const std::vector<LiveRange> &ranges,
                            const std::vector<Operation *> &launches) {
  int64_t boundary = backwardBoundary(launches);
  if (boundary < 0)
    return 0;
  int64_t saved = 0;
  for (const LiveRange &r : ranges)
    if (r.begin < boundary && r.end >= boundary)
      saved += r.bytes;
  return saved;
}

// Transient bytes attributed to one layer of one micro-batch.
struct LayerBytes {
  int64_t forward = 0;  // buffers first written by the layer's forward
  int64_t saved = 0;    // of those, the ones alive into backward
  int64_t backward = 0; // buffers first written by the layer's backward
  bool operator==(const LayerBytes &o) const {
    return forward == o.forward && saved == o.saved && backward == o.backward;
  }
};

// Each transient buffer (one micro-batch's: the step states it once, in a
// sched.repeat) goes to the layer mark of the launch that first writes it;
// launches of the embedding or the loss, and launches without a layer,
// count for no layer.
std::vector<LayerBytes>
activationsPerLayer(const std::vector<LiveRange> &ranges,
                    const std::vector<Operation *> &launches,
                    int64_t boundary) {
  int64_t numLayers = 0;
  for (Operation *launch : launches)
    if (LayerAttr layer = layerMark(launch); layer && layer.isBlock())
      numLayers = std::max(numLayers, layer.getIndex() + 1);
  std::vector<LayerBytes> perLayer(numLayers);
  for (const LiveRange &r : ranges) {
    LayerAttr layer = layerMark(launches[r.begin]);
    if (!layer || !layer.isBlock())
      continue;
    LayerBytes &l = perLayer[layer.getIndex()];
    if (boundary < 0 || r.begin < boundary) {
      l.forward += r.bytes;
      if (boundary >= 0 && r.end >= boundary)
        l.saved += r.bytes;
    } else {
      l.backward += r.bytes;
    }
  }
  return perLayer;
}


// Every offset the planner computes is at most the sum of all buffer sizes,
// so bounding that sum once makes all later int64 arithmetic safe.
constexpr int64_t kMaxArenaBytes = int64_t{1} << 62;

LogicalResult checkAddressable(ModuleOp module) {
  __int128 total = 0;
  auto add = [&](Operation *op, MemRefType type) -> LogicalResult {
    int64_t bytes = bufferBytes(type);
    if (bytes < 0 || bytes > kMaxArenaBytes)
      return op->emitOpError("buffer of ")
             << type << " is larger than the 2^62 bytes an arena can address";
    total += alignUp(bytes);
    return success();
  };
  for (auto global : module.getOps<sched::GlobalOp>())
    if (failed(add(global, global.getType())))
      return failure();
  WalkResult r = module.walk([&](sched::AllocOp alloc) {
    return failed(add(alloc, alloc.getType())) ? WalkResult::interrupt()
                                               : WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  if (total > kMaxArenaBytes)
    return module.emitError(
        "the buffers of this plan add up to more than 2^62 bytes, which the "
        "arena cannot address; reduce seq_len, micro_batch_size, num_layers "
        "or the model's sizes");
  return success();
}

// "linear (layer 3, input_grad)": the instruction where the peak falls.
std::string describeUser(Operation *op) {
  std::string s;
  if (auto launch = dyn_cast<sched::LaunchOp>(op))
    s = launch.getKernel().str();
  else
    s = op->getName().stripDialect().str();
  std::string where;
  if (LayerAttr layer = layerMark(op))
    where = describeLayer(layer);
  if (std::optional<Phase> phase = phaseMark(op))
    where += (where.empty() ? "" : ", ") + stringifyPhase(*phase).str();
  return where.empty() ? s : s + " (" + where + ")";
}

// The transients live where the most are, and why: saved for backward
// (per layer, runs of equal layers on one line), pipeline transfers,
// forward and backward transients, and the gaps the placement leaves.
void printPeakBreakdown(llvm::raw_ostream &os, const PeakBreakdown &b,
                        const std::string &user, int64_t placed,
                        bool onlyHeld) {
  auto line = [&](StringRef what, int64_t bytes) {
    os << llvm::format("    %-20s %14lld bytes  %12s\n", what.str().c_str(),
                       static_cast<long long>(bytes),
                       humanBytes(bytes).c_str());
  };
  os << llvm::format("  %-22s %14lld bytes  %12s  at %s\n",
                     "live at the peak", static_cast<long long>(b.live),
                     humanBytes(b.live).c_str(), user.c_str());
  int64_t saved = b.savedOther;
  for (int64_t l : b.savedPerLayer)
    saved += l;
  line("saved for backward", saved);
  for (size_t i = 0; i < b.savedPerLayer.size();) {
    size_t j = i;
    while (j + 1 < b.savedPerLayer.size() &&
           b.savedPerLayer[j + 1] == b.savedPerLayer[i])
      ++j;
    if (b.savedPerLayer[i] != 0 || !onlyHeld) {
      std::string label =
          i == j ? "layer " + std::to_string(i)
                 : "layers " + std::to_string(i) + "-" + std::to_string(j);
      os << llvm::format("      %-18s %14lld bytes each\n", label.c_str(),
                         static_cast<long long>(b.savedPerLayer[i]));
    }
    i = j + 1;
  }
  if (b.savedOther != 0)
    os << llvm::format("      %-18s %14lld bytes\n", "no layer",
                       static_cast<long long>(b.savedOther));
  line("pipeline transfers", b.transfers);
  line("forward transients", b.forwardTransient);
  line("backward transients", b.backwardTransient);
  line("placement gaps", placed - b.live);
}

// braid-recompute's entry for pipeline rank `rank` (braid.recompute_report
// on the module the spec was imported into); null without one.
DictionaryAttr recomputeEntry(ModuleOp top, int64_t rank) {
  auto report =
      top->getAttrOfType<ArrayAttr>(BraidDialect::kRecomputeReportAttr);
  if (!report || rank >= static_cast<int64_t>(report.size()))
    return {};
  return dyn_cast<DictionaryAttr>(report[rank]);
}

// The budget the arena fits, and what braid-recompute chose on the rank,
// with what it saved and cost.
void printBudgetAndRecompute(llvm::raw_ostream &os, ModuleOp top, int64_t rank,
                             const MemoryTotals &totals) {
  if (auto budget =
          top->getAttrOfType<IntegerAttr>(BraidDialect::kMemoryBudgetAttr))
    os << llvm::format("  %-22s %14lld bytes  %12s  (%s to spare)\n",
                       "budget", static_cast<long long>(budget.getInt()),
                       humanBytes(budget.getInt()).c_str(),
                       humanBytes(budget.getInt() - totals.arena).c_str());
  DictionaryAttr entry = recomputeEntry(top, rank);
  if (!entry)
    return;
  auto policy = entry.getAs<StringAttr>("policy");
  auto flops = entry.getAs<FloatAttr>("flops");
  auto forward = entry.getAs<FloatAttr>("forward_flops");
  if (!policy || !flops || !forward)
    return;
  os << "  recompute              " << policy.getValue();
  if (auto candidates = entry.getAs<IntegerAttr>("candidates"))
    if (auto planned = entry.getAs<IntegerAttr>("planned"))
      os << "  (auto: the least recompute FLOPs that fit the budget; "
         << planned.getInt() << " of " << candidates.getInt()
         << " candidate policies planned)";
  os << "\n";
  if (policy.getValue() == "none")
    return;
  if (auto without = entry.getAs<IntegerAttr>("arena_without")) {
    const int64_t saved = without.getInt() - totals.arena;
    os << llvm::format("    %-20s %14lld bytes  %12s  of arena (%lld without)\n",
                       "saves", static_cast<long long>(saved),
                       humanBytes(saved).c_str(),
                       static_cast<long long>(without.getInt()));
  }
  // Training FLOPs of the rank: three times its forward (forward, input
  // and weight gradients).
  const double training = 3 * forward.getValueAsDouble();
  os << llvm::format("    %-20s %14.0f FLOPs per micro-batch  (%.3g%% of "
                     "the rank's %.4g training FLOPs)\n",
                     "costs", flops.getValueAsDouble(),
                     training > 0 ? 100 * flops.getValueAsDouble() / training
                                  : 0.0,
                     training);
}

// What braid-offload moved on the rank: the arena and saved activations
// it saves (against the plan without offload, where planned) and the bytes
// it copies.
void printOffload(llvm::raw_ostream &os, ModuleOp top, int64_t rank,
                  const MemoryTotals &totals) {
  auto report =
      top->getAttrOfType<ArrayAttr>(BraidDialect::kOffloadReportAttr);
  if (!report || rank >= static_cast<int64_t>(report.size()))
    return;
  auto entry = dyn_cast<DictionaryAttr>(report[rank]);
  auto targets = entry ? entry.getAs<StringAttr>("targets") : StringAttr();
  if (!targets)
    return;
  os << "  offload                " << targets.getValue() << "\n";
  auto arena = entry.getAs<IntegerAttr>("arena_without");
  auto saved = entry.getAs<IntegerAttr>("saved_without");
  if (arena && saved) {
    // Offload can cost arena too (the last layer of a stage, say, whose
    // copy comes back as soon as its backward starts).
    const int64_t less = arena.getInt() - totals.arena;
    os << llvm::format("    %-20s %14lld bytes  %12s  of arena (%lld "
                       "without); saved for backward %lld less (%lld "
                       "without)\n",
                       less >= 0 ? "saves" : "costs more",
                       static_cast<long long>(less >= 0 ? less : -less),
                       humanBytes(less >= 0 ? less : -less).c_str(),
                       static_cast<long long>(arena.getInt()),
                       static_cast<long long>(saved.getInt() -
                                              totals.savedActivations),
                       static_cast<long long>(saved.getInt()));
  }
  os << llvm::format("    %-20s %14lld bytes  %12s  copied to the host per "
                     "step, and as many back\n",
                     "costs", static_cast<long long>(totals.offloaded),
                     humanBytes(totals.offloaded).c_str());
}

// What braid-offload-optimizer moved on the rank: the masters and moments
// now on the host, the arena it saves (against the plan without, where
// planned) and the bytes it copies each step.
void printOptimizerOffload(llvm::raw_ostream &os, ModuleOp top, int64_t rank,
                           const MemoryTotals &totals) {
  auto report = top->getAttrOfType<ArrayAttr>(
      BraidDialect::kOptimizerOffloadReportAttr);
  if (!report || rank >= static_cast<int64_t>(report.size()))
    return;
  auto entry = dyn_cast<DictionaryAttr>(report[rank]);
  auto toHost = entry ? entry.getAs<IntegerAttr>("to_host") : IntegerAttr();
  auto toDevice = entry ? entry.getAs<IntegerAttr>("to_device") : IntegerAttr();
  if (!toHost || !toDevice)
    return;
  os << "  optimizer offload      masters, moments and AdamW on the host\n";
  const int64_t onHost = totals.hostParameter + totals.hostOptimizer;
  os << llvm::format("    %-20s %14lld bytes  %12s  of the host arena "
                     "(masters %lld, moments %lld)\n",
                     "holds", static_cast<long long>(onHost),
                     humanBytes(onHost).c_str(),
                     static_cast<long long>(totals.hostParameter),
                     static_cast<long long>(totals.hostOptimizer));
  if (auto arena = entry.getAs<IntegerAttr>("arena_without")) {
    const int64_t less = arena.getInt() - totals.arena;
    os << llvm::format("    %-20s %14lld bytes  %12s  of arena (%lld "
                       "without)\n",
                       less >= 0 ? "saves" : "costs more",
                       static_cast<long long>(less >= 0 ? less : -less),
                       humanBytes(less >= 0 ? less : -less).c_str(),
                       static_cast<long long>(arena.getInt()));
  }
  os << llvm::format("    %-20s %14lld bytes  %12s  copied to the host per "
                     "step (gradients), %lld back (weights)\n",
                     "costs", static_cast<long long>(toHost.getInt()),
                     humanBytes(toHost.getInt()).c_str(),
                     static_cast<long long>(toDevice.getInt()));
}

struct PlanMemoryPass : impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    // A lowered pipeline plans each pipeline rank's module on its own: each
    // rank has its own arena.
    for (ModuleOp module : rankModules(getOperation()))
      if (failed(planModule(module)))
        return signalPassFailure();
  }

  // The module the spec was imported into: a pipeline rank's parent.
  static ModuleOp topModule(ModuleOp module) {
    ModuleOp parent = module->getParentOfType<ModuleOp>();
    return parent ? parent : module;
  }

  // Refuses a plan over compile.memory_budget_gb, with the shortfall and
  // what would close it.
  static LogicalResult checkBudget(ModuleOp module, int64_t rank,
                                   const MemoryTotals &totals) {
    ModuleOp top = topModule(module);
    auto budget =
        top->getAttrOfType<IntegerAttr>(BraidDialect::kMemoryBudgetAttr);
    if (!budget || totals.arena <= budget.getInt())
      return success();
    MemoryFigures memory;
    memory.arena = totals.arena;
    memory.activationPeak = totals.activationPeak;
    memory.savedActivations = totals.savedActivations;
    memory.persistent = totals.parameter + totals.gradient + totals.optimizer +
                        totals.weightCopy;
    std::string policy = "none";
    if (DictionaryAttr entry = recomputeEntry(top, rank))
      if (auto p = entry.getAs<StringAttr>("policy"))
        policy = p.str();
    return module.emitError()
           << "braid-plan-memory: the plan does not fit "
              "compile.memory_budget_gb: "
           << budgetShortfall(top, rank, memory, policy, budget.getInt())
           << "; " << closingHints(top, memory, budget.getInt())
           << "\n  - recompute: 'auto' (the least recompute that fits)";
  }

  LogicalResult planModule(ModuleOp module) {
    if (failed(checkAddressable(module)))
      return failure();
    MemoryTotals totals;
    std::vector<LayerBytes> perLayer;
    auto [persistentEnd, hostPersistentEnd] = placeGlobals(module, totals);
    const int64_t transientBase = alignUp(persistentEnd);
    const int64_t hostBase = alignUp(hostPersistentEnd);
    totals.host = hostBase;
    // What is live at the peak of the program that sets the arena's.
    PeakBreakdown atPeak;
    std::string peakUser;

    for (auto program : module.getOps<sched::ProgramOp>()) {
      std::vector<Operation *> launches;
      std::vector<LiveRange> ranges = computeLiveRanges(program, &launches);
      numTransient += ranges.size();
      std::vector<LiveRange> host = takeHostRanges(ranges);
      totals.host =
          std::max(totals.host, hostBase + placeTransients(host, hostBase));
      // Activation offload's copies (the optimizer's count apart).
      if (program.getKind() == sched::ProgramKind::Step)
        for (const LiveRange &r : host)
          if (!llvm::any_of(r.alloc->getUsers(), isOptimizerPhase))
            totals.offloaded += r.bytes;
      int64_t peak = placeTransients(ranges, transientBase);
      if (peak > totals.activationPeak || atPeak.at < 0) {
        atPeak = breakdownAtPeak(ranges, launches, kAlignment);
        if (atPeak.at >= 0)
          peakUser = describeUser(launches[atPeak.at]);
      }
      totals.activationPeak = std::max(totals.activationPeak, peak);
      if (program.getKind() == sched::ProgramKind::Step) {
        totals.savedActivations = savedAcrossBoundary(ranges, launches);
        perLayer =
            activationsPerLayer(ranges, launches, backwardBoundary(launches));
      }
    }
    totals.arena = transientBase + totals.activationPeak;
    int64_t rank = 0;
    if (auto r = module->getAttrOfType<IntegerAttr>(
            BraidDialect::kPipelineRankAttr))
      rank = r.getInt();
    if (failed(checkBudget(module, rank, totals)))
      return failure();

    OpBuilder b(module.getContext());
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    SmallVector<NamedAttribute> memory = {
        b.getNamedAttr("parameter_bytes", i64(totals.parameter)),
        b.getNamedAttr("gradient_bytes", i64(totals.gradient)),
        b.getNamedAttr("optimizer_bytes", i64(totals.optimizer)),
        b.getNamedAttr("input_bytes", i64(totals.input)),
        b.getNamedAttr("activation_peak_bytes", i64(totals.activationPeak)),
        b.getNamedAttr("saved_activation_bytes", i64(totals.savedActivations)),
        b.getNamedAttr("arena_bytes", i64(totals.arena))};
    // Only plans with weight copies (BF16) carry the entry, so FP32 modules
    // read as they always did.
    if (totals.weightCopy > 0)
      memory.push_back(
          b.getNamedAttr("weight_copy_bytes", i64(totals.weightCopy)));
    // Likewise only plans that offload carry a host arena.
    if (totals.host > 0)
      memory.push_back(b.getNamedAttr("host_bytes", i64(totals.host)));
    module->setAttr("sched.memory", b.getDictionaryAttr(memory));
    // The per-layer figures, one [forward, saved, backward] triple per
    // layer, for whoever compares two compilations (MemoryComparison.h).
    if (perLayer.empty()) {
      module->removeAttr(kMemoryLayersAttr);
    } else {
      SmallVector<Attribute> layers;
      for (const LayerBytes &l : perLayer)
        layers.push_back(
            b.getDenseI64ArrayAttr({l.forward, l.saved, l.backward}));
      module->setAttr(kMemoryLayersAttr, b.getArrayAttr(layers));
    }

    if (report) {
      auto &os = llvm::errs();
      if (auto rank = module->getAttrOfType<IntegerAttr>(
              BraidDialect::kPipelineRankAttr)) {
        os << "memory report (pipeline rank " << rank.getInt() << ")\n";
        // The rank's stages, and where the empty layers went: they hold
        // no memory, so the figures below are the real layers'.
        if (auto parent = module->getParentOfType<ModuleOp>()) {
          absl::StatusOr<pipeline::Partition> partition =
              readPartition(parent);
          if (partition.ok()) {
            const std::vector<std::string> lines = partition->describe();
            for (size_t s = 0; s < lines.size(); ++s)
              if (partition->placement.rankOf(static_cast<int64_t>(s)) ==
                  rank.getInt())
                os << "  " << lines[s] << "\n";
          }
        }
      } else {
        os << "memory report (rank 0)\n";
      }
      auto line = [&](StringRef what, int64_t bytes) {
        os << llvm::format("  %-22s %14lld bytes  %12s\n", what.str().c_str(),
                           static_cast<long long>(bytes),
                           humanBytes(bytes).c_str());
      };
      line("parameters", totals.parameter);
      line("gradients", totals.gradient);
      line("optimizer state", totals.optimizer);
      if (totals.weightCopy > 0)
        line("weight copies", totals.weightCopy);
      line("inputs and scalars", totals.input);
      line("activations (peak)", totals.activationPeak);
      line("  saved for backward", totals.savedActivations);
      line("arena", totals.arena);
      if (totals.host > 0)
        line("host arena (offload)", totals.host);
      printBudgetAndRecompute(os, topModule(module), rank, totals);
      printOffload(os, topModule(module), rank, totals);
      printOptimizerOffload(os, topModule(module), rank, totals);
      // Transient bytes per layer and micro-batch, runs of equal layers on
      // one line: what fusion and recompute change.
      if (!perLayer.empty()) {
        os << llvm::format("  %-22s %14s %14s %14s\n", "activations per layer",
                           "forward", "saved", "backward");
        for (size_t i = 0; i < perLayer.size();) {
          size_t j = i;
          while (j + 1 < perLayer.size() && perLayer[j + 1] == perLayer[i])
            ++j;
          std::string label =
              i == j ? "layer " + std::to_string(i)
                     : "layers " + std::to_string(i) + "-" + std::to_string(j);
          // A pipeline rank lists the layers it holds only.
          const bool held = perLayer[i].forward != 0 ||
                            perLayer[i].saved != 0 ||
                            perLayer[i].backward != 0;
          if (!held && module->hasAttr(BraidDialect::kPipelineRankAttr)) {
            i = j + 1;
            continue;
          }
          os << llvm::format("    %-20s %14lld %14lld %14lld\n", label.c_str(),
                             static_cast<long long>(perLayer[i].forward),
                             static_cast<long long>(perLayer[i].saved),
                             static_cast<long long>(perLayer[i].backward));
          i = j + 1;
        }
      }
      if (atPeak.at >= 0)
        printPeakBreakdown(os, atPeak, peakUser, totals.activationPeak,
                           module->hasAttr(BraidDialect::kPipelineRankAttr));
    }
    return success();
  }
};

} // namespace
} // namespace braid
