#include "kernels/cuda/CudaKernels.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/checks/KernelChecks.h"
#include "kernels/cuda/CudaFamilies.h"

namespace braid {

absl::Status registerCudaKernels(KernelRegistry &registry) {
  using Family = absl::Status (*)(KernelRegistry &);
  static constexpr Family kFamilies[] = {
      cuda::registerLinearKernels,      cuda::registerEmbeddingKernels,
      cuda::registerOptimizerKernels,   cuda::registerCastKernels,
      cuda::registerNormKernels,        cuda::registerElementwiseKernels,
      cuda::registerRopeKernels,        cuda::registerRepeatKvKernels,
      cuda::registerAttentionKernels,   cuda::registerCrossEntropyKernels,
      cuda::registerDocumentKernels,    cuda::registerPartsKernels,
      cuda::registerFusedElementwiseKernels,
      cuda::registerFusedAttentionKernels,
      cuda::registerFusedLossKernels,
  };
  for (Family family : kFamilies)
    if (absl::Status s = family(registry); !s.ok())
      return s;
  return absl::OkStatus();
}

namespace cuda {

absl::Status addCudaKernels(KernelRegistry &registry,
                            std::initializer_list<CudaKernel> kernels) {
  for (const CudaKernel &k : kernels) {
    KernelDef def;
    def.name = k.name;
    def.device = Device::kCUDA;
    def.check = kernelCheck(k.name);
    def.run = k.run;
    if (def.check == nullptr)
      return absl::InternalError(
          absl::StrCat("CUDA kernel '", std::string(k.name),
                       "' is not in the kernel catalogue (no check)"));
    if (absl::Status s = registry.add(def); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace braid
