//===- Marks.h - layer and phase marks of braid and sched ops ---*- C++ -*-===//
//
// `braid.layer` (set at import), `braid.phase` (set by autodiff, and on
// the optimizer's launches by the lowering) and `braid.moe_block` (set at
// import on a mixture-of-experts block's ops) are discardable attributes, so
// that any op may carry them: braid ops, and the sched.launch each becomes.
// A pass that replaces ops gives the new op the marks of the op it
// replaces (copyMarks), so that no later pass has to guess them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include "mlir/IR/Operation.h"

#include "dialects/braid/BraidDialect.h"

namespace braid {

// The marks of `op`; null / nullopt when it has none.
LayerAttr layerMark(mlir::Operation *op);
std::optional<Phase> phaseMark(mlir::Operation *op);

// Whether `op` is marked input_grad or weight_grad (recomputed forward ops
// are input_grad ones).
bool isBackwardPhase(mlir::Operation *op);
// Whether `op` is marked optimizer.
bool isOptimizerPhase(mlir::Operation *op);

void setLayerMark(mlir::Operation *op, LayerAttr layer);
void setPhaseMark(mlir::Operation *op, Phase phase);

// `braid.moe_block` (a unit attribute, set at import): the op is part of a
// mixture-of-experts block (router, experts, exchanges, shared experts),
// which the MoE recompute levels go by (docs/memory.md).
bool moeBlockMark(mlir::Operation *op);
void setMoeBlockMark(mlir::Operation *op);

// Gives `to` whichever marks `from` has.
void copyMarks(mlir::Operation *from, mlir::Operation *to);

// "layer 3", "embedding", "loss": for messages and reports.
std::string describeLayer(LayerAttr layer);

} // namespace braid
