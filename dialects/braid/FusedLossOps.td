//===- FusedLossOps.td - fused braid ops: Loss ----------*- tablegen -*-===//
//
// Fused ops (docs/fusion.md). Each op's mnemonic is the name of the kernel
// it lowers to; verifiers live in FusedLossOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSED_LOSS_OPS_TD
#define BRAID_FUSED_LOSS_OPS_TD

#endif // BRAID_FUSED_LOSS_OPS_TD
