//===- FuseAttention.td - fusion passes: Attention ------------*- tablegen -*-===//
//
// grouped-query attention without repeated K/V, flash attention (docs/fusion.md).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSE_ATTENTION_TD
#define BRAID_FUSE_ATTENTION_TD

include "mlir/Pass/PassBase.td"

#endif // BRAID_FUSE_ATTENTION_TD
