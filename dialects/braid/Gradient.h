//===- Gradient.h - what a gradient rule may ask of autodiff ----*- C++ -*-===//
//
// Each differentiable op states its gradient rule once, as its
// DifferentiableOp::buildGradient (Gradients.cpp). The rule reads the
// gradient of the op's results and adds gradients to its operands through
// this interface, which braid-autodiff implements.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace braid {

class GradientBuilder {
public:
  virtual ~GradientBuilder() = default;

  // Creates the backward ops, at the end of the step function.
  virtual mlir::OpBuilder &builder() = 0;
  // The gradient of `v` summed so far; null when nothing reached it.
  virtual mlir::Value grad(mlir::Value v) const = 0;
  // Whether `v` depends on a parameter, so that its gradient is wanted.
  virtual bool needsGrad(mlir::Value v) const = 0;
  // Adds `g` to the gradient of `v` (through a braid.add once `v` has
  // one); does nothing when `v` needs no gradient or `g` is null.
  virtual void addGrad(mlir::Value v, mlir::Value g) = 0;
  // Where the gradient of weight operand `w` goes: the f32 parameter when
  // `w` is its bf16 cast (mixed precision), `w` itself otherwise.
  virtual mlir::Value gradTarget(mlir::Value w) = 0;
};

} // namespace braid
