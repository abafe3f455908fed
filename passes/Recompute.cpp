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

#include "compiler/spec/RecomputePolicy.h"
#include "dialects/braid/Marks.h"
#include "passes/PipelineAttrs.h"

namespace braid {

#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// On each clone: it computes again what a forward op computed.
constexpr llvm::StringLiteral kRecomputedAttr = "braid.recomputed";

bool isForward(Operation *op) { return phaseMark(op) == Phase::Forward; }

// The transformer layer of a forward op; nullopt for the embedding, the
// loss and unmarked ops, which no policy recomputes.
std::optional<int64_t> layerOf(Operation *op) {
  LayerAttr layer = layerMark(op);
  if (!layer || layer.isEmbedding() || layer.isLoss())
    return std::nullopt;
  return layer.getIndex();
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
  // The pipeline stage holding `layer`.
  int64_t stageOf(int64_t layer) const {
    for (size_t s = 0; s < partition_.stages.size(); ++s)
      if (layer >= partition_.stages[s].first &&
          layer < partition_.stages[s].first + partition_.stages[s].layers)
        return static_cast<int64_t>(s);
    return 0;
  }
  // A stage's policy: the one for all, its own, or its rank's.
  const RecomputePolicy &policyOf(int64_t stage) const {
    if (policies_.size() == 1)
      return policies_.front();
    if (policies_.size() == partition_.stages.size())
      return policies_[stage];
    return policies_[partition_.placement.rankOf(stage)];
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
  case RecomputePolicy::Kind::kOps:
    if (llvm::is_contained(policy.ops,
                           op->getName().stripDialect().str()))
      return *layer;
    return std::nullopt;
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
    Recomputer recomputer(std::move(*parsed), std::move(partition));
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        numRecomputed += recomputer.run(func);
  }
};

} // namespace
} // namespace braid
