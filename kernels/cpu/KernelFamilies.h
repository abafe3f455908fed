// Registration of each family of CPU kernels; registerCpuKernels calls all.
#pragma once

#include <initializer_list>

#include "absl/status/status.h"
#include "kernels/registry/Kernel.h"

namespace braid::cpu {

absl::Status registerLinearKernels(KernelRegistry &registry);
absl::Status registerEmbeddingKernels(KernelRegistry &registry);
absl::Status registerNormKernels(KernelRegistry &registry);
absl::Status registerAttentionKernels(KernelRegistry &registry);
absl::Status registerRepeatKvKernels(KernelRegistry &registry);
absl::Status registerRopeKernels(KernelRegistry &registry);
absl::Status registerElementwiseKernels(KernelRegistry &registry);
absl::Status registerCrossEntropyKernels(KernelRegistry &registry);
absl::Status registerOptimizerKernels(KernelRegistry &registry);

// Adds `defs` in order, stopping at the first failure.
absl::Status registerAll(KernelRegistry &registry,
                         std::initializer_list<KernelDef> defs);

} // namespace braid::cpu
