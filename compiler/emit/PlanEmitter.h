//===- PlanEmitter.h - planned sched module to plan protobuf ----*- C++ -*-===//
#pragma once

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include "plan.pb.h"

namespace braid {

// Converts a module that went through braid-plan-memory into a plan. Emits a
// diagnostic on the module and fails if anything the plan needs is missing
// (an offset, the model or training settings, the loss scalar).
mlir::FailureOr<plan::Plan> emitPlan(mlir::ModuleOp module);

// The bytes of a plan file: the binary plan with its header and checksum
// (runtime/plan/PlanFile.h), or, with `text`, protobuf text for reading
// (which braid-run does not load).
std::string planFileBytes(const plan::Plan &plan, bool text);

} // namespace braid
