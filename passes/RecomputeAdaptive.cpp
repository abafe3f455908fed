//===- RecomputeAdaptive.cpp - expert GEMMs kept or recomputed at run time ===//
//
// See applyAdaptiveRecompute in Recomputer.h. Under expert parallel the rows
// a rank's experts receive vary with the routing, and the plan holds the
// dropless bound's worth for each expert activation. Adaptive recompute
// keeps, per MoE layer, only the first `keptRows` rows of the gate and up
// GEMMs' outputs for the backward; a micro-batch whose rank received more
// computes them again in the backward instead. Both paths are in the plan
// and the kernels choose by the last offset, the rows received:
//
//   forward:   g = moe_grouped_linear(x, w, off)     (as before)
//              k = moe_keep_rows(g, off)             [keptRows, F]
//   backward:  g' = moe_grouped_linear(x, w, off) {recompute_above = keptRows}
//              r = moe_restore_rows(k, g', off)      (in g''s buffer)
//              a' = swiglu(r_gate, r_up)             (the SwiGLU, always)
//
// Either path gives the backward the same rows bit for bit: the clone is
// the same GEMM on the same inputs, and the kept rows are a copy.
//
//===----------------------------------------------------------------------===//

#include "passes/Recomputer.h"

#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "dialects/braid/BraidOps.h"
#include "dialects/braid/Marks.h"

namespace braid {

using namespace mlir;

namespace {

bool isForward(Operation *op) { return phaseMark(op) == Phase::Forward; }

// A backward op of the step, which reads what the forward kept.
bool isBackward(Operation *op) {
  return !isForward(op) && !op->hasTrait<OpTrait::IsTerminator>();
}

bool hasBackwardUser(Value v) {
  return llvm::any_of(v.getUsers(), isBackward);
}

// The forward GEMMs adaptive recompute applies to: an MoE block's grouped
// GEMMs over the rows the rank's experts received (offsets from the
// exchange), whose result the backward reads, not already cloned by the
// policy. Hot-expert replication's GEMMs over the replicas' rows keep
// theirs: those rows stay on the rank that routed them, bounded by its own
// tokens.
bool isCandidate(Operation *op) {
  auto gemm = dyn_cast<MoeGroupedLinearOp>(op);
  return gemm && isForward(op) && moeBlockMark(op) &&
         gemm.getOffsets().getDefiningOp<MoeEpOffsetsOp>() &&
         !gemm.getRecomputeAbove() && hasBackwardUser(gemm.getResult());
}

// Adapts `gemms` (in block order) and the activation `act` reading them
// (null when none does) to keep `keptRows` rows. Fails with a sentence in
// `error`.
LogicalResult adapt(ArrayRef<MoeGroupedLinearOp> gemms, Operation *act,
                    int64_t keptRows, std::string &error) {
  // Where the backward first reads one of them.
  Operation *first = nullptr;
  auto earliest = [&](Value v) {
    for (Operation *user : v.getUsers())
      if (isBackward(user) && (!first || user->isBeforeInBlock(first)))
        first = user;
  };
  for (MoeGroupedLinearOp g : gemms)
    earliest(g.getResult());
  const bool actRead = act && hasBackwardUser(act->getResult(0));
  if (actRead)
    earliest(act->getResult(0));

  DenseSet<Operation *> made;
  SmallVector<Value> kept;
  for (MoeGroupedLinearOp g : gemms) {
    auto type = cast<RankedTensorType>(g.getResult().getType());
    if (type.getDimSize(0) <= keptRows) {
      error = "adaptive recompute keeps " + std::to_string(keptRows) +
               " rows of an expert GEMM of " +
               std::to_string(type.getDimSize(0)) +
               ", so it would never recompute; set "
               "model.moe.adaptive_recompute lower or leave it out";
      return failure();
    }
    OpBuilder b(g->getContext());
    b.setInsertionPointAfter(g);
    auto keep = MoeKeepRowsOp::create(
        b, g.getLoc(),
        RankedTensorType::get({keptRows, type.getDimSize(1)},
                              type.getElementType()),
        g.getResult(), g.getOffsets());
    keep->setDiscardableAttrs(g->getDiscardableAttrDictionary());
    made.insert(keep);
    kept.push_back(keep.getResult());
  }

  OpBuilder b(first);
  IRMapping map;
  SmallVector<std::pair<Value, Value>> replaced;
  for (auto [gemm, k] : llvm::zip(gemms, kept)) {
    MoeGroupedLinearOp g = gemm;
    auto again = cast<MoeGroupedLinearOp>(b.clone(*g));
    again.setRecomputeAbove(keptRows);
    again->setAttr(kRecomputedAttr, b.getUnitAttr());
    setPhaseMark(again, Phase::InputGrad);
    auto restore = MoeRestoreRowsOp::create(b, g.getLoc(),
                                            g.getResult().getType(), k,
                                            again.getResult(), g.getOffsets());
    restore->setDiscardableAttrs(again->getDiscardableAttrDictionary());
    restore->removeAttr(kRecomputedAttr);
    made.insert(again);
    made.insert(restore);
    map.map(g.getResult(), restore.getResult());
    replaced.push_back({g.getResult(), restore.getResult()});
  }
  if (actRead) {
    Operation *again = b.clone(*act, map);
    again->setAttr(kRecomputedAttr, b.getUnitAttr());
    setPhaseMark(again, Phase::InputGrad);
    made.insert(again);
    replaced.push_back({act->getResult(0), again->getResult(0)});
  }
  for (auto [from, to] : replaced)
    from.replaceUsesWithIf(to, [&](OpOperand &use) {
      return isBackward(use.getOwner()) && !made.contains(use.getOwner());
    });
  return success();
}

} // namespace

FailureOr<int64_t> applyAdaptiveRecompute(ModuleOp module, int64_t keptRows,
                                          std::string &error) {
  int64_t adapted = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    SmallVector<MoeGroupedLinearOp> candidates;
    for (Operation &op : func.getBody().front())
      if (isCandidate(&op))
        candidates.push_back(cast<MoeGroupedLinearOp>(op));
    DenseSet<Operation *> done;
    for (MoeGroupedLinearOp g : candidates) {
      if (done.contains(g))
        continue;
      // The SwiGLU reading g, and the other candidate it reads (gate, up).
      Operation *act = nullptr;
      for (Operation *user : g.getResult().getUsers())
        if (isForward(user) && isa<SwiGLUOp, FusedBiasSwiGLUOp>(user))
          act = user;
      SmallVector<MoeGroupedLinearOp> gemms;
      if (act) {
        for (Value operand : act->getOperands())
          if (auto d = operand.getDefiningOp<MoeGroupedLinearOp>();
              d && llvm::is_contained(candidates, d) && !done.contains(d))
            gemms.push_back(d);
      } else {
        gemms.push_back(g);
      }
      llvm::sort(gemms, [](MoeGroupedLinearOp a, MoeGroupedLinearOp b) {
        return a->isBeforeInBlock(b);
      });
      if (failed(adapt(gemms, act, keptRows, error)))
        return failure();
      for (MoeGroupedLinearOp d : gemms)
        done.insert(d);
      adapted += static_cast<int64_t>(gemms.size());
    }
  }
  return adapted;
}

} // namespace braid
