//===- AttentionMatch.h - an attention and its backward ---------*- C++ -*-===//
//
// What the attention fusions (FuseGqa.cpp, FuseFlashAttention.cpp) ask of
// an attention_grad_input before treating it as the backward of an
// attention.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dialects/braid/BraidOps.h"

namespace braid {

// Whether `grad` has the heads, mask (causal, prefix, segment ids), scale
// and dropout of `fwd`: its operands aside, the backward of that attention.
inline bool sameAttention(AttentionOp fwd, AttentionGradInputOp grad) {
  return fwd.getNumHeads() == grad.getNumHeads() &&
         fwd.getNumKvHeads() == grad.getNumKvHeads() &&
         fwd.getCausal() == grad.getCausal() &&
         fwd.getPrefix() == grad.getPrefix() &&
         fwd.getSegmentIds() == grad.getSegmentIds() &&
         fwd.getScale() == grad.getScale() &&
         fwd.getDropout() == grad.getDropout() &&
         fwd.getRngOffset() == grad.getRngOffset() &&
         fwd.getCpAttr() == grad.getCpAttr() &&
         fwd.getCpKvStepAttr() == grad.getCpKvStepAttr();
}

} // namespace braid
