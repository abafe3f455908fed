// The registration function of each CUDA kernel family. Each family lives in
// its own source file of kernels/cuda and adds one Device::kCUDA entry per
// kernel of docs/kernels.md it implements, with the shared check of
// kernels/checks (kernelCheck(name)).
#pragma once

#include "absl/status/status.h"
#include "kernels/registry/Kernel.h"

namespace braid::cuda {

// GEMM-based and parameter kernels.
absl::Status registerLinearKernels(KernelRegistry &registry);     // linear*
absl::Status registerEmbeddingKernels(KernelRegistry &registry);  // embedding*
absl::Status registerOptimizerKernels(KernelRegistry &registry);  // grad_norm, adamw
absl::Status registerCastKernels(KernelRegistry &registry);       // cast, fill, accumulate

// Row-wise and element-wise kernels.
absl::Status registerNormKernels(KernelRegistry &registry);       // layer_norm*, rms_norm*
absl::Status registerElementwiseKernels(KernelRegistry &registry);// gelu*, swiglu*, add, dropout*, split*
absl::Status registerRopeKernels(KernelRegistry &registry);       // rope*
absl::Status registerRepeatKvKernels(KernelRegistry &registry);   // repeat_kv*
absl::Status registerAttentionKernels(KernelRegistry &registry);  // attention*
absl::Status registerCrossEntropyKernels(KernelRegistry &registry); // cross_entropy*
absl::Status registerDocumentKernels(KernelRegistry &registry);   // document_ids
absl::Status registerPartsKernels(KernelRegistry &registry);      // take_part, stack_parts, unstack_parts

absl::Status registerMoeKernels(KernelRegistry &registry);        // moe_route*

// Fused kernels (docs/fusion.md).
absl::Status registerFusedElementwiseKernels(KernelRegistry &registry);
absl::Status registerFusedAttentionKernels(KernelRegistry &registry);
absl::Status registerAttentionMergeKernel(KernelRegistry &registry); // attention_merge
absl::Status registerFusedLossKernels(KernelRegistry &registry);

} // namespace braid::cuda
