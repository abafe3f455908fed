//===- Recompute.cpp - the backward computes forward values again --------===//
//
// See RecomputePass in Passes.td. For each group of forward ops a policy
// picks (a layer, a group of layers, or one layer's ops of chosen kinds),
// the ops whose results a backward op reads are cloned right before the
// first such backward op, and every backward op reads the clones' results
// instead. The originals then die with the forward, so the planner no
// longer keeps their buffers until the backward. What a clone reads and
// the group does not make (the group's input, the weights) is kept, and so
// is what a forward op outside the group reads (the group's output, the
// next layer's input): those are the checkpoints. A clone is the op itself
// with its attributes, so a fused op recomputes fused and a dropout draws
// its mask again from the same rng_offset.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include <map>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "compiler/spec/RecomputePolicy.h"
#include "dialects/braid/Marks.h"
#include "passes/PipelineAttrs.h"
#include "passes/Recomputer.h"
#include "passes/analysis/OpFlops.h"

namespace braid {

#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

bool isForward(Operation *op) { return phaseMark(op) == Phase::Forward; }

// The transformer layer of a forward op; nullopt for the embedding, the
// loss and unmarked ops, which no policy recomputes.
std::optional<int64_t> layerOf(Operation *op) {
  LayerAttr layer = layerMark(op);
  if (!layer || layer.isEmbedding() || layer.isLoss())
    return std::nullopt;
  return layer.getIndex();
}

// The pipeline stage holding `layer` (0 without a pipeline).
int64_t stageOfLayer(const pipeline::Partition &partition, int64_t layer) {
  for (size_t s = 0; s < partition.stages.size(); ++s)
    if (layer >= partition.stages[s].first &&
        layer < partition.stages[s].first + partition.stages[s].layers)
      return static_cast<int64_t>(s);
  return 0;
}

// A stage's policy among `policies`: the one for all, its own, or its
// rank's.
const RecomputePolicy &policyForStage(
    const std::vector<RecomputePolicy> &policies,
    const pipeline::Partition &partition, int64_t stage) {
  if (policies.size() == 1)
    return policies.front();
  if (policies.size() == partition.stages.size())
    return policies[stage];
  return policies[partition.placement.rankOf(stage)];
}

class Recomputer {
public:
  // `policies`: one for all, one per pipeline rank, or one per stage of
  // `partition` (empty without a pipeline: one stage).
  Recomputer(std::vector<RecomputePolicy> policies,
             pipeline::Partition partition)
      : policies_(std::move(policies)), partition_(std::move(partition)) {}

  // Returns the number of ops cloned.
  int64_t run(func::FuncOp func);

private:
  int64_t stageOf(int64_t layer) const {
    return stageOfLayer(partition_, layer);
  }
  const RecomputePolicy &policyOf(int64_t stage) const {
    return policyForStage(policies_, partition_, stage);
  }
  // The group of a forward op under its stage's policy, among the stage's
  // layers in order; nullopt when it is kept.
  std::optional<int64_t> groupOf(Operation *op, const RecomputePolicy &policy,
                                 const std::vector<int64_t> &layers) const;
  int64_t recomputeGroup(ArrayRef<Operation *> ops,
                         const RecomputePolicy &policy);

  std::vector<RecomputePolicy> policies_;
  pipeline::Partition partition_;
};

std::optional<int64_t>
Recomputer::groupOf(Operation *op, const RecomputePolicy &policy,
                    const std::vector<int64_t> &layers) const {
  std::optional<int64_t> layer = layerOf(op);
  if (!layer || !isForward(op))
    return std::nullopt;
  switch (policy.kind) {
  case RecomputePolicy::Kind::kNone:
    return std::nullopt;
  case RecomputePolicy::Kind::kFull:
  case RecomputePolicy::Kind::kUniform: {
    // Groups of `layers` consecutive layers of the stage, in order.
    const auto at = llvm::find(layers, *layer) - layers.begin();
    return at / policy.layers;
  }
  case RecomputePolicy::Kind::kBlock: {
    const auto at = llvm::find(layers, *layer) - layers.begin();
    return at < policy.layers ? std::optional<int64_t>(at) : std::nullopt;
  }
  case RecomputePolicy::Kind::kOps: {
    const std::string name = op->getName().stripDialect().str();
    if (llvm::is_contained(policy.ops, name))
      return *layer;
    // The MoE levels: kinds that count inside an MoE block only.
    if (moeBlockMark(op) && (llvm::is_contained(policy.ops, "moe:" + name) ||
                             llvm::is_contained(policy.ops, "moe:*")))
      return *layer;
    return std::nullopt;
  }
  }
  return std::nullopt;
}

int64_t Recomputer::recomputeGroup(ArrayRef<Operation *> ops,
                                   const RecomputePolicy &policy) {
  DenseSet<Operation *> group(ops.begin(), ops.end());
  // Kept, for the layer policies: ops a forward op outside the group (or
  // the function's return) reads, the group's output, from which the next
  // group recomputes; the group's own clones read them as they are. An op
  // chosen by kind is cloned for its backward readers whoever else reads it.
  DenseSet<Operation *> kept;
  if (policy.kind != RecomputePolicy::Kind::kOps)
    for (Operation *op : ops)
      for (Operation *user : op->getUsers())
        if (!group.contains(user) &&
            (isForward(user) || user->hasTrait<OpTrait::IsTerminator>()))
          kept.insert(op);
  // Cloned: the group's ops not kept that a backward op reads, and those
  // of the group they read in turn.
  llvm::SetVector<Operation *> cloned;
  SmallVector<Operation *> work;
  for (Operation *op : ops)
    if (!kept.contains(op) && llvm::any_of(op->getUsers(), [](Operation *u) {
          return !isForward(u) && !u->hasTrait<OpTrait::IsTerminator>();
        }))
      work.push_back(op);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!cloned.insert(op))
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && group.contains(def) && !kept.contains(def))
        work.push_back(def);
  }
  if (cloned.empty())
    return 0;
  // Right before the first backward op that reads one of them.
  Operation *first = nullptr;
  for (Operation *op : cloned)
    for (Operation *user : op->getUsers())
      if (!isForward(user) && !user->hasTrait<OpTrait::IsTerminator>() &&
          (!first || user->isBeforeInBlock(first)))
        first = user;
  if (!first)
    return 0;
  SmallVector<Operation *> order(cloned.begin(), cloned.end());
  llvm::sort(order, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  OpBuilder b(first);
  IRMapping map;
  for (Operation *op : order) {
    Operation *clone = b.clone(*op, map);
    clone->setAttr(kRecomputedAttr, b.getUnitAttr());
    setPhaseMark(clone, Phase::InputGrad);
  }
  for (Operation *op : order)
    for (Value result : op->getResults()) {
      Value again = map.lookup(result);
      result.replaceUsesWithIf(again, [&](OpOperand &use) {
        Operation *user = use.getOwner();
        return !isForward(user) && !user->hasAttr(kRecomputedAttr) &&
               !user->hasTrait<OpTrait::IsTerminator>();
      });
    }
  return static_cast<int64_t>(order.size());
}

int64_t Recomputer::run(func::FuncOp func) {
  // Each stage's layers in order.
  std::map<int64_t, std::vector<int64_t>> layersOf;
  func.walk([&](Operation *op) {
    std::optional<int64_t> l = layerOf(op);
    if (!l || !isForward(op))
      return;
    std::vector<int64_t> &layers = layersOf[stageOf(*l)];
    if (!llvm::is_contained(layers, *l))
      layers.push_back(*l);
  });
  for (auto &[stage, layers] : layersOf)
    llvm::sort(layers);
  // Groups by (stage, group). Chosen by kind, an op is a group of its own,
  // or of the chosen ops of its layer it reads or that read it (rope then
  // repeat_kv): each group is cloned right before its first backward
  // reader.
  using GroupKey = std::pair<int64_t, int64_t>;
  std::map<GroupKey, SmallVector<Operation *>> groups;
  DenseMap<Operation *, GroupKey> groupOfOp;
  int64_t next = 0;
  for (Operation &op : func.getBody().front()) {
    std::optional<int64_t> layer = layerOf(&op);
    if (!layer)
      continue;
    const int64_t stage = stageOf(*layer);
    const RecomputePolicy &policy = policyOf(stage);
    std::optional<int64_t> g = groupOf(&op, policy, layersOf[stage]);
    if (!g)
      continue;
    GroupKey key{stage, *g};
    if (policy.kind == RecomputePolicy::Kind::kOps) {
      std::optional<GroupKey> joined;
      for (Value v : op.getOperands()) {
        auto it = groupOfOp.find(v.getDefiningOp());
        if (it == groupOfOp.end() || layerOf(it->first) != layer)
          continue;
        if (!joined) {
          joined = it->second;
        } else if (const GroupKey other = it->second; other != *joined) {
          // Two groups meet: the later one joins the earlier.
          for (Operation *moved : groups[other])
            groupOfOp[moved] = *joined;
          groups[*joined].append(groups[other]);
          groups.erase(other);
        }
      }
      key = joined ? *joined : GroupKey{stage, next++};
      groupOfOp[&op] = key;
    }
    groups[key].push_back(&op);
  }
  int64_t n = 0;
  for (auto &[key, ops] : groups) {
    llvm::sort(ops, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    n += recomputeGroup(ops, policyOf(key.first));
  }
  return n;
}

} // namespace

int64_t applyRecompute(ModuleOp module,
                       const std::vector<RecomputePolicy> &policies,
                       const pipeline::Partition &partition) {
  Recomputer recomputer(policies, partition);
  int64_t n = 0;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal())
      n += recomputer.run(func);
  return n;
}

std::vector<RecomputeCost> recomputeCosts(ModuleOp module,
                                          const pipeline::Partition &partition) {
  const int64_t ranks =
      partition.stages.empty() ? 1 : partition.placement.ranks;
  const int64_t lastStage =
      std::max<int64_t>(static_cast<int64_t>(partition.stages.size()) - 1, 0);
  std::vector<RecomputeCost> costs(ranks);
  module.walk([&](Operation *op) {
    LayerAttr layer = layerMark(op);
    if (!layer)
      return;
    const bool recomputed = op->hasAttr(kRecomputedAttr);
    if (!recomputed && !isForward(op))
      return;
    const int64_t stage = layer.isEmbedding() ? 0
                          : layer.isLoss()    ? lastStage
                                              : stageOfLayer(partition,
                                                             layer.getIndex());
    const int64_t rank =
        partition.stages.empty() ? 0 : partition.placement.rankOf(stage);
    (recomputed ? costs[rank].flops : costs[rank].forwardFlops) +=
        forwardFlops(op);
  });
  return costs;
}

namespace {

// A rank's policy as written: the one for all, its own, or its stages'
// joined by " / " in model order.
std::string rankPolicyText(const std::string &text, int64_t rank,
                           const pipeline::Partition &partition) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(text, '|'))
    parts.emplace_back(absl::StripAsciiWhitespace(part));
  for (std::string &p : parts)
    if (p.empty())
      p = "none";
  if (parts.size() == 1)
    return parts.front();
  if (static_cast<int64_t>(parts.size()) == partition.placement.ranks &&
      parts.size() != partition.stages.size())
    return parts[rank];
  std::string joined;
  for (size_t s = 0; s < partition.stages.size() && s < parts.size(); ++s)
    if (partition.placement.rankOf(static_cast<int64_t>(s)) == rank)
      joined += (joined.empty() ? "" : " / ") + parts[s];
  return joined;
}

// A layer policy naming more layers than the layout holds where it
// applies recomputes layers that are not there: refused, with the stage
// and its layers. One policy for every stage applies as far as each
// stage's layers go, so only more than the largest stage holds is refused.
LogicalResult checkLayerCounts(ModuleOp module, const std::string &text,
                               const std::vector<RecomputePolicy> &policies,
                               const pipeline::Partition &partition) {
  std::vector<pipeline::StageLayers> stages = partition.stages;
  if (stages.empty()) {
    pipeline::StageLayers all;
    if (auto model = module->getAttrOfType<ModelAttr>(BraidDialect::kModelAttr))
      all.layers = model.getNumLayers();
    stages.push_back(all);
  }
  // The stages each policy is held against: its own, or the largest.
  std::vector<std::pair<size_t, const RecomputePolicy *>> checks;
  if (policies.size() == 1) {
    size_t largest = 0;
    for (size_t s = 1; s < stages.size(); ++s)
      if (stages[s].layers > stages[largest].layers)
        largest = s;
    checks.push_back({largest, &policies.front()});
  } else {
    for (size_t s = 0; s < stages.size(); ++s)
      checks.push_back(
          {s, &policyForStage(policies, partition, static_cast<int64_t>(s))});
  }
  for (auto [s, p] : checks) {
    if ((p->kind != RecomputePolicy::Kind::kBlock &&
         p->kind != RecomputePolicy::Kind::kUniform) ||
        p->layers <= stages[s].layers)
      continue;
    const std::string name =
        p->kind == RecomputePolicy::Kind::kBlock ? "block-" : "uniform-";
    InFlightDiagnostic d = module.emitError()
                           << "braid-recompute: '" << text << "' asks for "
                           << name << p->layers << " on ";
    if (partition.stages.empty())
      d << "a model of " << stages[s].layers << " layers";
    else
      d << (policies.size() == 1 ? "every pipeline stage; the largest, stage "
                                 : "pipeline stage ")
        << s << " (rank "
        << partition.placement.rankOf(static_cast<int64_t>(s))
        << (policies.size() == 1 ? "), holds " : "), which holds ")
        << (stages[s].layers == 1
                ? "1 layer (layer " + std::to_string(stages[s].first) + ")"
                : std::to_string(stages[s].layers) + " layers (" +
                      std::to_string(stages[s].first) + "-" +
                      std::to_string(stages[s].first + stages[s].layers - 1) +
                      ")");
    d << "; give N up to " << stages[s].layers
      << ", 'full' for every layer, or one policy per stage separated by "
         "'|'";
    return failure();
  }
  return success();
}

struct RecomputePass : impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string text = policy;
    if (text.empty())
      if (auto attr =
              module->getAttrOfType<StringAttr>(BraidDialect::kRecomputeAttr))
        text = attr.str();
    absl::StatusOr<std::vector<RecomputePolicy>> parsed =
        parseRecomputeStages(text);
    if (!parsed.ok()) {
      module.emitError() << "braid-recompute: "
                         << std::string(parsed.status().message());
      return signalPassFailure();
    }
    // The pipeline's stages (braid-partition's), or one.
    pipeline::Partition partition;
    if (module->hasAttr(BraidDialect::kPartitionAttr)) {
      absl::StatusOr<pipeline::Partition> read = readPartition(module);
      if (!read.ok()) {
        module.emitError() << "braid-recompute: "
                           << std::string(read.status().message());
        return signalPassFailure();
      }
      partition = std::move(*read);
    }
    const int64_t numStages =
        std::max<int64_t>(static_cast<int64_t>(partition.stages.size()), 1);
    const int64_t numRanks = partition.stages.empty()
                                 ? 1
                                 : partition.placement.ranks;
    auto adaptive =
        module->getAttrOfType<IntegerAttr>(BraidDialect::kMoeAdaptiveRowsAttr);
    if (parsed->front().kind == RecomputePolicy::Kind::kAuto) {
      if (adaptive) {
        module.emitError()
            << "braid-recompute: model.moe.adaptive_recompute decides per "
               "micro-batch when the plan runs, which recompute: auto does "
               "not weigh; choose a policy (none or moe-light keep the "
               "experts' GEMMs for it to adapt)";
        return signalPassFailure();
      }
      return runAuto(module, partition);
    }
    const int64_t given = static_cast<int64_t>(parsed->size());
    if (given != 1 && given != numStages && given != numRanks) {
      module.emitError()
          << "braid-recompute: '" << text << "' gives " << given
          << " policies separated by '|' for " << numRanks
          << " pipeline rank" << (numRanks == 1 ? "" : "s") << " and "
          << numStages << " stage" << (numStages == 1 ? "" : "s")
          << "; give one for all, one per pipeline rank, or one per stage "
             "in model order";
      return signalPassFailure();
    }
    if (failed(checkLayerCounts(module, text, *parsed, partition)))
      return signalPassFailure();
    const bool recomputes =
        adaptive || llvm::any_of(*parsed, [](const RecomputePolicy &p) {
          return p.kind != RecomputePolicy::Kind::kNone;
        });
    // What the arena would be without: for the memory report's saving.
    std::vector<MemoryFigures> without;
    if (recomputes && compare) {
      std::string error;
      FailureOr<std::vector<MemoryFigures>> planned = planWithRecompute(
          module, {RecomputePolicy{}}, partition, fusion, error);
      if (failed(planned)) {
        module.emitError() << "braid-recompute: " << error;
        return signalPassFailure();
      }
      without = std::move(*planned);
    }
    numRecomputed += applyRecompute(module, *parsed, partition);
    if (adaptive && failed(adapt(module, text, adaptive.getInt())))
      return signalPassFailure();
    if (!recomputes)
      return;
    std::vector<RecomputeChoice> report;
    const std::vector<RecomputeCost> costs = recomputeCosts(module, partition);
    for (int64_t r = 0; r < numRanks; ++r) {
      RecomputeChoice c;
      c.policy = rankPolicyText(text, r, partition);
      // The experts' GEMMs count as recomputed: what a step costs at most.
      if (adaptive)
        c.policy = (c.policy == "none" ? std::string() : c.policy + ", ") +
                   "adaptive experts (" + std::to_string(adaptive.getInt()) +
                   " rows kept)";
      c.cost = costs[r];
      if (!without.empty())
        c.arenaWithout = without[r].arena;
      report.push_back(std::move(c));
    }
    writeReport(module, report);
  }

  // Adaptive recompute of the expert GEMMs `policy` keeps.
  LogicalResult adapt(ModuleOp module, const std::string &policy,
                      int64_t keptRows) {
    std::string error;
    FailureOr<int64_t> adapted =
        applyAdaptiveRecompute(module, keptRows, error);
    if (failed(adapted))
      return module.emitError() << "braid-recompute: " << error;
    if (*adapted == 0)
      return module.emitError()
             << "braid-recompute: model.moe.adaptive_recompute adapts the "
                "experts' gate and up GEMMs, but the recompute policy '"
             << policy
             << "' recomputes them always; choose none or moe-light, or "
                "leave adaptive_recompute out";
    numAdapted += *adapted;
    return success();
  }

  void runAuto(ModuleOp module, const pipeline::Partition &partition) {
    auto budget =
        module->getAttrOfType<IntegerAttr>(BraidDialect::kMemoryBudgetAttr);
    if (!budget || budget.getInt() <= 0) {
      module.emitError()
          << "braid-recompute: auto chooses under a memory budget; set "
             "compile.memory_budget_gb in the spec or braidc "
             "--memory-budget-gb (GiB per rank)";
      return signalPassFailure();
    }
    std::string error;
    FailureOr<std::vector<RecomputeChoice>> chosen =
        chooseRecompute(module, partition, budget.getInt(), fusion, error);
    if (failed(chosen)) {
      module.emitError() << "braid-recompute: " << error;
      return signalPassFailure();
    }
    std::vector<RecomputePolicy> policies;
    for (const RecomputeChoice &c : *chosen)
      policies.push_back(*parseRecomputePolicy(c.policy));
    numRecomputed += applyRecompute(module, policies, partition);
    writeReport(module, *chosen);
  }

  // One dictionary per pipeline rank, for braid-plan-memory's report.
  static void writeReport(ModuleOp module,
                          const std::vector<RecomputeChoice> &choices) {
    Builder b(module.getContext());
    SmallVector<Attribute> ranks;
    for (const RecomputeChoice &c : choices) {
      SmallVector<NamedAttribute> entries = {
          b.getNamedAttr("policy", b.getStringAttr(c.policy)),
          b.getNamedAttr("flops", b.getF64FloatAttr(c.cost.flops)),
          b.getNamedAttr("forward_flops",
                         b.getF64FloatAttr(c.cost.forwardFlops))};
      if (c.arenaWithout > 0)
        entries.push_back(b.getNamedAttr(
            "arena_without", b.getI64IntegerAttr(c.arenaWithout)));
      if (c.candidates > 0) {
        entries.push_back(
            b.getNamedAttr("planned", b.getI64IntegerAttr(c.planned)));
        entries.push_back(
            b.getNamedAttr("candidates", b.getI64IntegerAttr(c.candidates)));
      }
      ranks.push_back(b.getDictionaryAttr(entries));
    }
    module->setAttr(BraidDialect::kRecomputeReportAttr, b.getArrayAttr(ranks));
  }
};

} // namespace
} // namespace braid
