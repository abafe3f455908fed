//===- MemoryComparison.cpp - one plan's memory against another's ---------===//
#include "passes/MemoryComparison.h"

#include <algorithm>
#include <string>
#include <utility>

#include "llvm/Support/Format.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include "dialects/braid/BraidDialect.h"
#include "passes/Passes.h"

using namespace mlir;

namespace braid {

std::string humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.2f %s", v, units[u]);
  return s;
}

FailureOr<MemoryFigures> readMemoryFigures(ModuleOp module) {
  auto memory = module->getAttrOfType<DictionaryAttr>("sched.memory");
  // A pipeline plans each rank's stage module: rank 0's figures, as the
  // report's are.
  if (!memory)
    for (auto stage : module.getOps<ModuleOp>())
      if (auto rank = stage->getAttrOfType<IntegerAttr>(
              BraidDialect::kPipelineRankAttr);
          rank && rank.getInt() == 0)
        return readMemoryFigures(stage);
  if (!memory)
    return module.emitError("needs sched.memory (run braid-plan-memory "
                            "first)");
  MemoryFigures figures;
  const std::pair<StringRef, int64_t *> totals[] = {
      {"activation_peak_bytes", &figures.activationPeak},
      {"saved_activation_bytes", &figures.savedActivations},
      {"arena_bytes", &figures.arena}};
  for (auto [key, field] : totals) {
    auto value = memory.getAs<IntegerAttr>(key);
    if (!value)
      return module.emitError("sched.memory has no integer ") << key;
    *field = value.getInt();
  }
  for (StringRef key : {"parameter_bytes", "gradient_bytes", "optimizer_bytes",
                        "weight_copy_bytes"})
    if (auto value = memory.getAs<IntegerAttr>(key))
      figures.persistent += value.getInt();
  Attribute layers = module->getAttr(kMemoryLayersAttr);
  if (!layers)
    return figures;
  auto array = dyn_cast<ArrayAttr>(layers);
  if (!array)
    return module.emitError(kMemoryLayersAttr) << " must be an array";
  for (Attribute layer : array) {
    auto triple = dyn_cast<DenseI64ArrayAttr>(layer);
    if (!triple || triple.size() != 3)
      return module.emitError(kMemoryLayersAttr)
             << " must hold one [forward, saved, backward] array per layer";
    figures.layers.push_back({triple[0], triple[1], triple[2]});
  }
  return figures;
}

namespace {

// "-131072 (-4.35%)": the change from `unfused` to `fused`, and in percent
// of `unfused` where that is not zero.
std::string change(int64_t fused, int64_t unfused) {
  int64_t delta = fused - unfused;
  std::string s;
  llvm::raw_string_ostream os(s);
  if (delta == 0)
    os << "0";
  else
    os << (delta < 0 ? "-" : "+")
       << static_cast<unsigned long long>(delta < 0 ? -delta : delta);
  if (unfused != 0 && delta == 0)
    os << " (0.00%)";
  else if (unfused != 0)
    os << llvm::format(" (%+.2f%%)", 100.0 * static_cast<double>(delta) /
                                         static_cast<double>(unfused));
  return s;
}

int digits(int64_t v) { return static_cast<int>(std::to_string(v).size()); }

} // namespace

void printMemoryComparison(llvm::raw_ostream &os, const MemoryFigures &fused,
                           const MemoryFigures &unfused) {
  // A layer only one plan has counts as zero bytes in the other.
  size_t numLayers = std::max(fused.layers.size(), unfused.layers.size());
  auto layerOf = [](const MemoryFigures &f, size_t i) {
    return i < f.layers.size() ? f.layers[i] : LayerMemory();
  };

  // One width for every figure, so that the columns line up.
  int width = 1;
  for (const MemoryFigures *f : {&fused, &unfused}) {
    for (int64_t v : {f->activationPeak, f->savedActivations, f->arena})
      width = std::max(width, digits(v));
    for (const LayerMemory &l : f->layers)
      for (int64_t v : {l.forward, l.saved, l.backward})
        width = std::max(width, digits(v));
  }
  auto line = [&](const std::string &label, int64_t f, int64_t u) {
    os << llvm::format("%-26s fused %*lld | unfused %*lld | %s\n",
                       label.c_str(), width, static_cast<long long>(f), width,
                       static_cast<long long>(u), change(f, u).c_str());
  };

  os << "memory fused against unfused (rank 0)\n";
  line("  activations (peak)", fused.activationPeak, unfused.activationPeak);
  line("    saved for backward", fused.savedActivations,
       unfused.savedActivations);
  line("  arena", fused.arena, unfused.arena);
  if (numLayers == 0)
    return;
  os << "  activations per layer\n";
  for (size_t i = 0; i < numLayers;) {
    LayerMemory f = layerOf(fused, i), u = layerOf(unfused, i);
    size_t j = i;
    while (j + 1 < numLayers && layerOf(fused, j + 1) == f &&
           layerOf(unfused, j + 1) == u)
      ++j;
    std::string label =
        "    " + (i == j ? "layer " + std::to_string(i)
                         : "layers " + std::to_string(i) + "-" +
                               std::to_string(j));
    line(label + " forward", f.forward, u.forward);
    line(label + " saved", f.saved, u.saved);
    line(label + " backward", f.backward, u.backward);
    i = j + 1;
  }
}

FailureOr<std::vector<MemoryFigures>>
planCopy(ModuleOp copy, PassManager &pm, std::string &error) {
  copy->removeAttr(BraidDialect::kMemoryBudgetAttr);
  std::string diagnostics;
  ScopedDiagnosticHandler capture(copy.getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  if (failed(pm.run(copy))) {
    error = "planning failed: " + diagnostics;
    return failure();
  }
  SmallVector<ModuleOp> modules(copy.getOps<ModuleOp>());
  const bool pipelined = !modules.empty();
  if (!pipelined)
    modules.push_back(copy);
  std::vector<MemoryFigures> ranks(modules.size());
  for (ModuleOp rank : modules) {
    int64_t index = 0;
    if (pipelined) {
      auto attr =
          rank->getAttrOfType<IntegerAttr>(BraidDialect::kPipelineRankAttr);
      index = attr ? attr.getInt() : -1;
    }
    FailureOr<MemoryFigures> figures = readMemoryFigures(rank);
    if (index < 0 || index >= static_cast<int64_t>(ranks.size()) ||
        failed(figures)) {
      error = "a planned pipeline rank has no valid braid.pipeline_rank or "
              "sched.memory" +
              (diagnostics.empty() ? std::string() : ": " + diagnostics);
      return failure();
    }
    ranks[index] = *figures;
  }
  return ranks;
}

FailureOr<std::vector<MemoryFigures>> planAsItIs(ModuleOp top,
                                                 StringRef pass) {
  OwningOpRef<ModuleOp> copy(top.clone());
  PassManager pm(top.getContext(), ModuleOp::getOperationName());
  pm.addPass(createPlanMemoryPass());
  std::string error;
  FailureOr<std::vector<MemoryFigures>> planned = planCopy(*copy, pm, error);
  if (failed(planned))
    top.emitError() << pass << ": " << error;
  return planned;
}

} // namespace braid
