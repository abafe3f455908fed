//===- RecomputeAuto.cpp - the recompute policy a memory budget needs -----===//
//
// braid-recompute's auto mode. The memory a policy leaves on a pipeline
// rank is what braid-plan-memory plans for it, with the schedule's
// micro-batches in flight and the transients of the backward that
// recomputes, so each candidate is applied to a copy of the module and
// planned by the passes that follow: the arena auto compares with the
// budget is the arena the run maps. A rank's arena depends on its own
// policy only (each rank plans its own arena), so one plan of a candidate
// tells every rank what it would need with it, and the choice is made rank
// by rank.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <optional>

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "compiler/spec/OffloadTargets.h"
#include "dialects/braid/BraidDialect.h"
#include "passes/MemoryComparison.h"
#include "passes/Passes.h"
#include "passes/Recomputer.h"

using namespace mlir;

namespace braid {
namespace {

// The layers of each stage (the whole model without a pipeline).
std::vector<int64_t> stageLayers(ModuleOp module,
                                 const pipeline::Partition &partition) {
  std::vector<int64_t> layers;
  for (const pipeline::StageLayers &s : partition.stages)
    layers.push_back(s.layers);
  if (layers.empty())
    if (auto model = module->getAttrOfType<ModelAttr>(BraidDialect::kModelAttr))
      layers.push_back(model.getNumLayers());
  return layers;
}

struct Candidate {
  std::string text;
  RecomputePolicy policy;
  std::vector<RecomputeCost> cost;               // per rank
  std::optional<std::vector<MemoryFigures>> memory; // per rank, once planned
};

// From no recompute to all of it: the op kinds alone and together (with
// mixture-of-experts blocks, their three levels too), the layers by blocks
// and by groups, and every layer.
std::vector<std::string> candidateTexts(int64_t maxLayers, bool moe) {
  std::vector<std::string> texts = {"none",
                                    "norm",
                                    "activation",
                                    "norm,activation",
                                    "selective",
                                    "selective,norm,activation"};
  if (moe)
    for (const char *level : {"moe-light", "moe-medium", "moe-full"}) {
      texts.push_back(level);
      texts.push_back(std::string("selective,norm,") + level);
    }
  for (int64_t n = 1; n < maxLayers; ++n)
    texts.push_back("block-" + std::to_string(n));
  for (int64_t n = 2; n <= maxLayers; ++n)
    texts.push_back("uniform-" + std::to_string(n));
  texts.push_back("full");
  return texts;
}

} // namespace

FailureOr<std::vector<MemoryFigures>>
planWithRecompute(ModuleOp module, const std::vector<RecomputePolicy> &policies,
                  const pipeline::Partition &partition,
                  const std::string &fusionList, std::string &error) {
  OwningOpRef<ModuleOp> copy(module.clone());
  applyRecompute(*copy, policies, partition);
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  if (failed(addPlanningPasses(pm, fusionList, /*reportMemory=*/false, error)))
    return failure();
  return planCopy(*copy, pm, error);
}

FailureOr<std::vector<RecomputeChoice>>
chooseRecompute(ModuleOp module, const pipeline::Partition &partition,
                int64_t budget, const std::string &fusionList,
                std::string &error) {
  const std::vector<int64_t> layers = stageLayers(module, partition);
  const int64_t maxLayers =
      layers.empty() ? 1 : *std::max_element(layers.begin(), layers.end());
  const int64_t ranks =
      partition.stages.empty() ? 1 : partition.placement.ranks;

  // Each candidate's FLOPs, rank by rank, from a copy with it applied.
  std::vector<Candidate> candidates;
  for (const std::string &text :
       candidateTexts(maxLayers, module->hasAttr(BraidDialect::kMoeAttr))) {
    Candidate c;
    c.text = text;
    c.policy = *parseRecomputePolicy(text);
    OwningOpRef<ModuleOp> copy(module.clone());
    applyRecompute(*copy, {c.policy}, partition);
    c.cost = recomputeCosts(*copy, partition);
    candidates.push_back(std::move(c));
  }

  // A rank's best so far: the fitting planned candidate of least FLOPs,
  // the smaller arena on a tie.
  auto best = [&](int64_t r) -> const Candidate * {
    const Candidate *found = nullptr;
    for (const Candidate &c : candidates) {
      if (!c.memory || (*c.memory)[r].arena > budget)
        continue;
      if (!found || c.cost[r].flops < found->cost[r].flops ||
          (c.cost[r].flops == found->cost[r].flops &&
           (*c.memory)[r].arena < (*found->memory)[r].arena))
        found = &c;
    }
    return found;
  };
  // The cheapest candidate not yet planned, for rank r.
  auto nextFor = [&](int64_t r) -> Candidate * {
    Candidate *next = nullptr;
    for (Candidate &c : candidates)
      if (!c.memory && (!next || c.cost[r].flops < next->cost[r].flops))
        next = &c;
    return next;
  };
  int64_t planned = 0;
  while (true) {
    Candidate *toPlan = nullptr;
    for (int64_t r = 0; r < ranks && !toPlan; ++r) {
      Candidate *next = nextFor(r);
      const Candidate *fit = best(r);
      // Settled: nothing left to plan could fit at fewer FLOPs.
      if (next && (!fit || next->cost[r].flops < fit->cost[r].flops))
        toPlan = next;
    }
    if (!toPlan)
      break;
    FailureOr<std::vector<MemoryFigures>> memory = planWithRecompute(
        module, {toPlan->policy}, partition, fusionList, error);
    if (failed(memory)) {
      error = "planning '" + toPlan->text + "' for recompute auto: " + error;
      return failure();
    }
    if (static_cast<int64_t>(memory->size()) != ranks) {
      error = "recompute auto planned " + std::to_string(memory->size()) +
              " pipeline ranks where the partition has " +
              std::to_string(ranks);
      return failure();
    }
    toPlan->memory = std::move(*memory);
    ++planned;
  }

  std::vector<RecomputeChoice> choices;
  std::string refusals;
  std::optional<MemoryFigures> worst;
  for (int64_t r = 0; r < ranks; ++r) {
    const Candidate *fit = best(r);
    if (!fit) {
      // Every candidate was planned for this rank: report the smallest.
      const Candidate *smallest = nullptr;
      for (const Candidate &c : candidates)
        if (c.memory && (!smallest || (*c.memory)[r].arena <
                                          (*smallest->memory)[r].arena))
          smallest = &c;
      const MemoryFigures &m = (*smallest->memory)[r];
      refusals += "\n" + budgetShortfall(module, r, m, smallest->text, budget);
      if (!worst || m.arena > worst->arena)
        worst = m;
      continue;
    }
    RecomputeChoice c;
    c.policy = fit->text;
    c.cost = fit->cost[r];
    c.arena = (*fit->memory)[r].arena;
    // "none" is the cheapest of all, so it is always planned.
    c.arenaWithout = (*candidates.front().memory)[r].arena;
    c.planned = planned;
    c.candidates = static_cast<int64_t>(candidates.size());
    choices.push_back(std::move(c));
  }
  if (!refusals.empty()) {
    error = "no recompute policy fits the memory budget (" +
            std::to_string(candidates.size()) + " planned):" + refusals +
            "\n" + closingHints(module, *worst, budget);
    return failure();
  }
  return choices;
}

std::string budgetShortfall(ModuleOp module, int64_t rank,
                            const MemoryFigures &best, const std::string &policy,
                            int64_t budget) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const bool pipelined = module->hasAttr(BraidDialect::kPartitionAttr);
  os << (pipelined ? "pipeline rank " + std::to_string(rank) : "each rank")
     << " needs an arena of " << best.arena << " bytes (" << humanBytes(best.arena)
     << ") with recompute '" << policy << "', " << best.arena - budget
     << " bytes over the budget of " << budget << " bytes (" << humanBytes(budget)
     << "); of it, parameters, gradients and optimizer state take "
     << best.persistent << " and activations at the peak "
     << best.activationPeak << " (" << best.savedActivations
     << " of them saved for backward)";
  return s;
}

std::string closingHints(ModuleOp module, const MemoryFigures &worst,
                         int64_t budget) {
  std::vector<std::string> hints;
  auto train = module->getAttrOfType<TrainAttr>(BraidDialect::kTrainAttr);
  auto mesh = module->getAttrOfType<MeshAttr>(BraidDialect::kMeshAttr);
  if (worst.persistent > budget)
    hints.push_back("the parameters, gradients and optimizer state alone "
                    "exceed the budget: more tensor_parallel or "
                    "pipeline_parallel divides them, and with data parallel "
                    "zero_stage 1 to 3 shards them");
  if (train && train.getMicroBatchSize() > 1)
    hints.push_back("micro_batch_size: " +
                    std::to_string(train.getMicroBatchSize() / 2) +
                    " (the activations scale with the tokens of a "
                    "micro-batch)");
  else if (train && train.getSeqLen() > 1)
    hints.push_back("a shorter seq_len or context_parallel: 2 (the "
                    "activations scale with the tokens of a micro-batch)");
  if (mesh && mesh.getTp() > 1 &&
      !module->hasAttr(BraidDialect::kSequenceParallelAttr))
    hints.push_back("sequence_parallel: true (splits the activations "
                    "between the tensor-parallel regions " +
                    std::to_string(mesh.getTp()) + " ways)");
  if (mesh)
    hints.push_back("tensor_parallel: " + std::to_string(mesh.getTp() * 2) +
                    " or pipeline_parallel: " +
                    std::to_string(mesh.getPp() * 2) +
                    " (a rank then holds about half the parameters and "
                    "activations)");
  // What the forward saves for the backward can wait in host memory
  // instead (braid-offload), and the optimizer can live there
  // (braid-offload-optimizer; not beside ZeRO).
  OffloadTargets offload;
  if (auto text = module->getAttrOfType<StringAttr>(BraidDialect::kOffloadAttr))
    if (absl::StatusOr<OffloadTargets> t = parseOffloadTargets(text.str());
        t.ok())
      offload = *t;
  if (worst.savedActivations > 0 && offload.noActivations())
    hints.push_back("compile.offload: \"activations\" (the saved "
                    "activations, " + std::to_string(worst.savedActivations) +
                    " bytes at the start of the backward, wait in host "
                    "memory between their forward and backward, brought "
                    "back one layer ahead)");
  if (worst.persistent > 0 && !offload.optimizer &&
      !module->hasAttr(BraidDialect::kZeroStageAttr))
    hints.push_back("compile.offload: \"optimizer\" (the Adam moments and "
                    "fp32 masters live in host memory and AdamW runs there; "
                    "the device keeps the gradients and the weights compute "
                    "reads)");
  std::string s = "what would close it:";
  for (const std::string &h : hints)
    s += "\n  - " + h;
  return s;
}

} // namespace braid
