//===- FuseElementwise.td - fusion passes: Elementwise ------------*- tablegen -*-===//
//
// add+norm(+dropout), bias+GELU, bias+SwiGLU, bias+dropout+add, RoPE in the QKV epilogue (docs/fusion.md).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSE_ELEMENTWISE_TD
#define BRAID_FUSE_ELEMENTWISE_TD

include "mlir/Pass/PassBase.td"

#endif // BRAID_FUSE_ELEMENTWISE_TD
