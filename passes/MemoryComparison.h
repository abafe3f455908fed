//===- MemoryComparison.h - one plan's memory against another's -*- C++ -*-===//
//
// braid-plan-memory records its figures on the module: the totals in
// `sched.memory`, and the transient bytes of each layer of one micro-batch in
// `sched.memory_layers`, an array with one [forward, saved, backward] triple
// per layer (absent when the plan has no layers to attribute). This reads
// them back and prints how two planned modules of one spec differ, figure by
// figure: `braidc --report-memory` with fusion compiles the spec a second
// time without it and prints the fused plan against the unfused one.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"

namespace braid {

// The module attribute with the per-layer figures.
constexpr llvm::StringLiteral kMemoryLayersAttr = "sched.memory_layers";

// Transient bytes of one layer of one micro-batch (docs/memory.md).
struct LayerMemory {
  int64_t forward = 0;  // written by the layer's forward launches
  int64_t saved = 0;    // of those, alive at the first backward launch
  int64_t backward = 0; // written by the layer's backward launches
  bool operator==(const LayerMemory &o) const {
    return forward == o.forward && saved == o.saved && backward == o.backward;
  }
};

// The figures of a planned module: what fusion and recompute change, and
// what they leave.
struct MemoryFigures {
  int64_t activationPeak = 0;
  int64_t savedActivations = 0;
  int64_t arena = 0;
  // Parameters, gradients, optimizer state and weight copies.
  int64_t persistent = 0;
  std::vector<LayerMemory> layers;
};

// "8.17 MiB": bytes in the largest binary unit below 1024 of it.
std::string humanBytes(int64_t bytes);

// The figures braid-plan-memory recorded on `module`; fails, with an error
// on the module, when it has not run or the attributes are malformed.
mlir::FailureOr<MemoryFigures> readMemoryFigures(mlir::ModuleOp module);

// Runs `pm` (passes that end with braid-plan-memory) on `copy`, a copy of
// a compilation's module, and returns each pipeline rank's figures in rank
// order (one entry without a pipeline). The copy is weighed, not refused:
// its memory budget goes, and its diagnostics are kept out of the
// compilation's and named in `error` if planning fails.
mlir::FailureOr<std::vector<MemoryFigures>>
planCopy(mlir::ModuleOp copy, mlir::PassManager &pm, std::string &error);

// `top` planned as it is now (a copy of it, through braid-plan-memory
// alone): what a rewriting pass's memory report compares its plan with.
// Fails with an error on `top`, prefixed `pass: `, if planning fails.
mlir::FailureOr<std::vector<MemoryFigures>>
planAsItIs(mlir::ModuleOp top, llvm::StringRef pass);

// Prints the activation peak, the bytes saved for backward, the arena and
// each layer's forward, saved and backward bytes (runs of equal layers on
// one line) as
//   fused X | unfused Y | change (change in percent of Y)
// with the change negative where the fused plan needs less.
void printMemoryComparison(llvm::raw_ostream &os, const MemoryFigures &fused,
                           const MemoryFigures &unfused);

} // namespace braid
