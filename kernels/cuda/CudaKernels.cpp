#include "kernels/cuda/CudaKernels.h"

#include <iterator>
#include <string>
#include <string_view>

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
      cuda::registerAttentionMergeKernel,
      cuda::registerFusedLossKernels,   cuda::registerMoeKernels,
  };
  for (Family family : kFamilies)
    if (absl::Status s = family(registry); !s.ok())
      return s;
  return absl::OkStatus();
}

namespace cuda {
namespace {

// The attention kernels whose CUDA twins have no context-parallel path.
constexpr std::string_view kWithoutCp[] = {"attention", "attention_grad_input",
                                           "flash_attention",
                                           "flash_attention_grad_input"};

template <int I> absl::Status checkWithoutCp(const KernelSignature &sig) {
  if (sig.params != nullptr && sig.params->intOr("cp", 0) != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(kWithoutCp[I]),
        ": context-parallel attention (cp = 1) has no CUDA kernel yet; train "
        "context-parallel plans on the CPU"));
  return kernelCheck(kWithoutCp[I])(sig);
}

constexpr KernelCheckFn kChecksWithoutCp[] = {
    checkWithoutCp<0>, checkWithoutCp<1>, checkWithoutCp<2>, checkWithoutCp<3>};

} // namespace

KernelCheckFn cudaCheck(std::string_view name) {
  for (size_t i = 0; i < std::size(kWithoutCp); ++i)
    if (name == kWithoutCp[i])
      return kChecksWithoutCp[i];
  return kernelCheck(name);
}

absl::Status addCudaKernels(KernelRegistry &registry,
                            std::initializer_list<CudaKernel> kernels) {
  for (const CudaKernel &k : kernels) {
    KernelDef def;
    def.name = k.name;
    def.device = Device::kCUDA;
    def.check = cudaCheck(k.name);
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
