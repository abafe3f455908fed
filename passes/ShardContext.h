//===- ShardContext.h - braid-shard's context-parallel rewrite -*- C++ -*-===//
//
// Not a public header: braid-shard (Shard.cpp) runs this before its
// tensor-parallel layouts, where braid.mesh has cp above 1.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace braid {

// Lays the differentiated step `func` out over `cp` context-parallel
// ranks: every activation holds the rank's load-balanced part of each
// sequence of `seqLen` positions, and attention reaches the other ranks'
// keys and values by an all-gather (`allGather`) or as ring attention
// (ShardContext.cpp).
mlir::LogicalResult shardContext(mlir::func::FuncOp func, int64_t cp,
                                 int64_t seqLen, bool allGather);

} // namespace braid
