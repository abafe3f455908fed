//===- ImportSpec.h - model spec to braid forward graph ---------*- C++ -*-===//
#pragma once

#include <cstdint>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include "spec.pb.h"

namespace braid {

// Fills `module` (which must be empty) with `@train_step`, the forward graph
// of one micro-batch of `spec`, plus the `braid.name`, `braid.model`
// (#braid.model) and `braid.train` (#braid.train) module attributes. `spec`
// must be validated and have its defaults filled (loadSpecFile does both).
// docs/numerics.md defines the graph. With `train.precision` BF16,
// activations are bf16, every parameter stays an f32 argument that is cast
// once to bf16 (`braid.cast`) at the top of the step, and `braid.train`
// records `precision = bf16`.
mlir::LogicalResult importSpec(const spec::ModelSpec &spec,
                               mlir::ModuleOp module);

// Megatron's model FLOPs per trained token: 6 * (linear weights, LM head
// included) + 12 * layers * seq * hidden for attention scores and values.
// Causal masking is not halved, as in Megatron-LM. An MoE layer counts the
// weights a token multiplies: the router, top_k routed experts and the
// shared experts.
double modelFlopsPerToken(const spec::ModelSpec &spec);

} // namespace braid
