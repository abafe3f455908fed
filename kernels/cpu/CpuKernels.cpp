#include "kernels/cpu/CpuKernels.h"

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchChecker.h"

namespace braid {
namespace cpu {

absl::Status registerAll(KernelRegistry &registry,
                         std::initializer_list<KernelDef> defs) {
  for (const KernelDef &def : defs)
    BRAID_KERNEL_TRY(registry.add(def));
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
  BRAID_KERNEL_TRY(cpu::registerCrossEntropyKernels(registry));
  BRAID_KERNEL_TRY(cpu::registerOptimizerKernels(registry));
  return absl::OkStatus();
}

} // namespace braid
