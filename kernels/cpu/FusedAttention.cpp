// Flash attention (docs/fusion.md).
#include "kernels/cpu/KernelFamilies.h"

namespace braid::cpu {

absl::Status registerFusedAttentionKernels(KernelRegistry &registry) {
  return registerAll(registry, {});
}

} // namespace braid::cpu
