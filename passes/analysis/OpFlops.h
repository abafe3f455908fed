//===- OpFlops.h - floating-point operations of a forward op ----*- C++ -*-===//
//
// What recomputing a forward op costs, counted as Megatron counts model
// FLOPs: a matmul of [M, K] by [K, N] is 2 M N K, the attention core's two
// products 4 B H Sq Sk Dh, halved when causal (the masked half is skipped
// by flash attention and counted as skipped by the model-FLOPs formula),
// the experts' grouped and batched GEMMs 2 R M K over the R rows the plan
// holds for them (under expert parallel the most a micro-batch routes).
// Ops that are not matmuls (norms, activations, RoPE, adds, copies) count
// one per element they write: small beside the matmuls, but not nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Operation.h"

namespace braid {

double forwardFlops(mlir::Operation *op);

} // namespace braid
