// The LM head fused with cross-entropy, and multi-tensor AdamW (docs/fusion.md).
#include "kernels/cpu/KernelFamilies.h"

namespace braid::cpu {

absl::Status registerFusedLossKernels(KernelRegistry &registry) {
  return registerAll(registry, {});
}

} // namespace braid::cpu
