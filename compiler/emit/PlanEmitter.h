//===- PlanEmitter.h - planned sched module to plan protobuf ----*- C++ -*-===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include "plan.pb.h"

namespace braid {

// Converts a module that went through braid-plan-memory into a plan. Emits a
// diagnostic on the module and fails if anything the plan needs is missing
// (an offset, the model or training settings, the loss scalar).
mlir::FailureOr<plan::Plan> emitPlan(mlir::ModuleOp module);

} // namespace braid
