#include "kernels/cpu/CpuKernels.h"

#include "absl/strings/str_cat.h"
#include "kernels/checks/KernelChecks.h"
#include "kernels/checks/LaunchChecker.h"
#include "kernels/cpu/KernelFamilies.h"

namespace braid {
namespace cpu {

absl::Status registerAll(KernelRegistry &registry,
                         std::initializer_list<CpuKernel> kernels) {
  for (const CpuKernel &k : kernels) {
    KernelCheckFn check = kernelCheck(k.name);
    if (!check)
      return absl::InternalError(
          absl::StrCat("CPU kernel '", checks::toAbsl(k.name),
                       "' has no check in kernels/checks"));
    BRAID_KERNEL_TRY(registry.add({k.name, Device::kCPU, check, k.run}));
  }
  return absl::OkStatus();
}

} // namespace cpu

absl::Status registerCpuKernels(KernelRegistry &registry) {
  BRAID_KERNEL_TRY(cpu::registerLinearKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerEmbeddingKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerNormKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerAttentionKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerRepeatKvKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerRopeKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerElementwiseKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerCastKernel(registry));
  BRAID_KERNEL_TRY(cpu::registerCrossEntropyKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerOptimizerKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerPartsKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerFusedElementwiseKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerFusedAttentionKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerAttentionMergeKernel(registry));
  BRAID_KERNEL_TRY(cpu::registerFusedLossKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerMoeKernels(registry));
  return absl::OkStatus();
}

} // namespace braid
