// Flash attention on CUDA (docs/fusion.md).
#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"

namespace braid::cuda {

absl::Status registerFusedAttentionKernels(KernelRegistry &registry) {
  return addCudaKernels(registry, {});
}

} // namespace braid::cuda
