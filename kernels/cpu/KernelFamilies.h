// Registration of each family of CPU kernels; registerCpuKernels calls all.
#pragma once

#include <initializer_list>
#include <string_view>

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
absl::Status registerCastKernel(KernelRegistry &registry);
absl::Status registerCrossEntropyKernels(KernelRegistry &registry);
absl::Status registerOptimizerKernels(KernelRegistry &registry);
// take_part, stack_parts, unstack_parts (sequence parallelism).
absl::Status registerPartsKernels(KernelRegistry &registry);
// Fused kernels (docs/fusion.md).
absl::Status registerFusedElementwiseKernels(KernelRegistry &registry);
absl::Status registerFusedAttentionKernels(KernelRegistry &registry);
// attention_merge (context parallelism's ring of flash_attention steps).
absl::Status registerAttentionMergeKernel(KernelRegistry &registry);
absl::Status registerFusedLossKernels(KernelRegistry &registry);
// moe_route, moe_route_grad (mixture of experts).
absl::Status registerMoeKernels(KernelRegistry &registry);

// A CPU kernel: its name and run function. Its check is the device-
// independent one of kernels/checks.
struct CpuKernel {
  std::string_view name;
  void (*run)(const KernelArgs &args);
};

// Adds `kernels` in order, each with kernelCheck(name), stopping at the
// first failure.
absl::Status registerAll(KernelRegistry &registry,
                         std::initializer_list<CpuKernel> kernels);

} // namespace braid::cpu
