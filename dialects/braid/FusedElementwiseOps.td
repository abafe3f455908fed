//===- FusedElementwiseOps.td - fused braid ops: Elementwise ----------*- tablegen -*-===//
//
// Fused ops (docs/fusion.md). Each op's mnemonic is the name of the kernel
// it lowers to; verifiers live in FusedElementwiseOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSED_ELEMENTWISE_OPS_TD
#define BRAID_FUSED_ELEMENTWISE_OPS_TD

#endif // BRAID_FUSED_ELEMENTWISE_OPS_TD
