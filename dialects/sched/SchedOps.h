//===- SchedOps.h - sched dialect ops ---------------------------*- C++ -*-===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/sched/SchedDialect.h"

#define GET_OP_CLASSES
#include "dialects/sched/SchedOps.h.inc"

namespace braid::sched {

// The first stream and the first event no op under `root` uses: one past
// the largest `stream` attribute and the largest recorded event (0 where
// there is none). Passes that add streams or events take theirs from here.
struct FreeIds {
  uint32_t stream = 0, event = 0;
};
FreeIds firstFree(mlir::Operation *root);

} // namespace braid::sched
