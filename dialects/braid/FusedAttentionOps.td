//===- FusedAttentionOps.td - fused braid ops: Attention ----------*- tablegen -*-===//
//
// Fused ops (docs/fusion.md). Each op's mnemonic is the name of the kernel
// it lowers to; verifiers live in FusedAttentionOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_FUSED_ATTENTION_OPS_TD
#define BRAID_FUSED_ATTENTION_OPS_TD

#endif // BRAID_FUSED_ATTENTION_OPS_TD
