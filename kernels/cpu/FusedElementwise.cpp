// Fused norm, activation, dropout and RoPE kernels (docs/fusion.md).
#include "kernels/cpu/KernelFamilies.h"

namespace braid::cpu {

absl::Status registerFusedElementwiseKernels(KernelRegistry &registry) {
  return registerAll(registry, {});
}

} // namespace braid::cpu
