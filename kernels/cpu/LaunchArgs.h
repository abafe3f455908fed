// Accessors for the parts of a launch that a caller may leave out.
#pragma once

#include "kernels/registry/Kernel.h"

namespace braid::cpu {

inline ThreadPool *poolOf(const KernelArgs &args) {
  return args.ctx ? args.ctx->pool : nullptr;
}

// The launch's context; a default one (step 1, micro-batch 0, seed 0, no
// pool) when the caller passes none.
inline const KernelContext &contextOf(const KernelArgs &args) {
  static const KernelContext kDefault;
  return args.ctx ? *args.ctx : kDefault;
}

inline const KernelParams &paramsOf(const KernelArgs &args) {
  static const KernelParams kEmpty;
  return args.params ? *args.params : kEmpty;
}

// The `accumulate` flag that `check` validated.
inline bool accumulateOf(const KernelArgs &args) {
  return paramsOf(args).intOr("accumulate", 0) != 0;
}

} // namespace braid::cpu
