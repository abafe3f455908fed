//===- BraidOps.h - braid dialect ops ---------------------------*- C++ -*-===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/braid/Gradient.h"

namespace braid {

// Ops whose every result is the gradient of a weight (BraidBase.td).
template <typename ConcreteType>
class WeightGradient
    : public mlir::OpTrait::TraitBase<ConcreteType, WeightGradient> {};

// Ops whose result is a loss beside the cross-entropy (BraidBase.td).
template <typename ConcreteType>
class SideLoss : public mlir::OpTrait::TraitBase<ConcreteType, SideLoss> {};

} // namespace braid

#include "dialects/braid/BraidInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/braid/BraidOps.h.inc"
