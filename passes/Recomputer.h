//===- Recomputer.h - recompute policies applied to a module ----*- C++ -*-===//
//
// braid-recompute's rewrite (Recompute.cpp) and its auto mode
// (RecomputeAuto.cpp), which applies candidate policies to copies of the
// module and plans each.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"

#include "compiler/spec/RecomputePolicy.h"
#include "passes/MemoryComparison.h"
#include "passes/pipeline/Partition.h"

namespace braid {

// On each clone braid-recompute makes: it computes again what a forward op
// computed.
inline constexpr llvm::StringLiteral kRecomputedAttr = "braid.recomputed";

// What recompute adds on one pipeline rank, per micro-batch.
struct RecomputeCost {
  double flops = 0;        // of the ops cloned into the backward
  double forwardFlops = 0; // of the rank's forward ops, as a scale
};

// Applies `policies` (one for all, one per pipeline rank, or one per stage
// of `partition`; empty partition: one stage) to every function of
// `module`: clones the forward ops a backward op reads right before the
// first such op (Recompute.cpp's header says which). Returns the number of
// ops cloned.
int64_t applyRecompute(mlir::ModuleOp module,
                       const std::vector<RecomputePolicy> &policies,
                       const pipeline::Partition &partition);

// Adaptive recompute (docs/moe.md): each forward expert GEMM of an MoE
// block whose result the backward reads (expert parallel's gate and up)
// keeps its first `keptRows` rows (braid.moe_keep_rows); the backward
// clones it with recompute_above = keptRows, which computes only when the
// rank received more rows, and reads braid.moe_restore_rows of the kept
// and the recomputed rows. The SwiGLU reading them is cloned after them,
// so the backward keeps no activation of the experts' width but those
// rows. Returns the number of GEMMs adapted; fails with a sentence in
// `error` when an expert GEMM has no more rows than it would keep.
mlir::FailureOr<int64_t> applyAdaptiveRecompute(mlir::ModuleOp module,
                                                int64_t keptRows,
                                                std::string &error);

// Per pipeline rank (one without a pipeline): the FLOPs of the ops
// applyRecompute cloned and of the forward ops.
std::vector<RecomputeCost> recomputeCosts(mlir::ModuleOp module,
                                          const pipeline::Partition &partition);

// Plans a copy of `module` (after braid-partition) with `policies` applied,
// through the passes that follow braid-recompute with the sched-stage
// fusions of `fusionList`; returns each pipeline rank's figures, or fails
// with a sentence in `error`.
mlir::FailureOr<std::vector<MemoryFigures>>
planWithRecompute(mlir::ModuleOp module,
                  const std::vector<RecomputePolicy> &policies,
                  const pipeline::Partition &partition,
                  const std::string &fusionList, std::string &error);

// The policy auto chose for one pipeline rank, with what it cost and
// saved, and the other candidates it weighed.
struct RecomputeChoice {
  std::string policy;
  RecomputeCost cost;
  int64_t arena = 0;        // with the policy
  int64_t arenaWithout = 0; // with none
  int64_t planned = 0;      // candidate plans made (each for every rank)
  int64_t candidates = 0;   // candidates there were
};

// For every pipeline rank, the candidate of least recompute FLOPs whose
// arena fits `budget` bytes (ties: the smaller arena). Candidates: none,
// the op kinds (norm, activation, selective, and them together), block-N
// and uniform-N for N up to a stage's layers, and full; planned in the
// order of their FLOPs, each plan serving every rank, until no rank could
// do better. Fails, with the shortfall and what would close it in
// `error`, when some rank fits with none of them.
mlir::FailureOr<std::vector<RecomputeChoice>>
chooseRecompute(mlir::ModuleOp module, const pipeline::Partition &partition,
                int64_t budget, const std::string &fusionList,
                std::string &error);

// "pipeline rank R needs an arena of ... bytes over the budget ..." for a
// rank whose smallest plan (`best`, under `policy`) exceeds `budget`.
std::string budgetShortfall(mlir::ModuleOp module, int64_t rank,
                            const MemoryFigures &best, const std::string &policy,
                            int64_t budget);

// "what would close it:" and a line for each change of the spec that would
// (a smaller micro-batch or sequence, sequence parallel, more tensor or
// pipeline parallel, ZeRO), from `module`'s settings and the rank furthest
// over (`worst`).
std::string closingHints(mlir::ModuleOp module, const MemoryFigures &worst,
                         int64_t budget);

} // namespace braid
