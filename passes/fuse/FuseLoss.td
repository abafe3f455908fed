//===- FuseLoss.td - fusion passes: Loss ------------*- tablegen -*-===//
//
// the LM head chunked with softmax+cross-entropy, multi-tensor AdamW (docs/fusion.md).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSE_LOSS_TD
#define BRAID_FUSE_LOSS_TD

include "mlir/Pass/PassBase.td"

#endif // BRAID_FUSE_LOSS_TD
