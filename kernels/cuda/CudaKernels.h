// The CUDA kernels of docs/kernels.md (docs/gpu-backend.md, "Kernels").
#pragma once

#include <initializer_list>
#include <string_view>

#include "absl/status/status.h"
#include "kernels/checks/KernelChecks.h"
#include "kernels/registry/Kernel.h"

namespace braid {

// Adds every CUDA kernel (Device::kCUDA) to `registry`: all the families of
// kernels/cuda/CudaFamilies.h. Fails (AlreadyExists) when one of them is
// registered already, leaving the kernels added before it in place.
absl::Status registerCudaKernels(KernelRegistry &registry);

namespace cuda {

// A CUDA kernel: its name and run function. Its check is the shared one of
// kernels/checks.
struct CudaKernel {
  std::string_view name;
  void (*run)(const KernelArgs &args);
};

// The check of CUDA kernel `name`: the shared kernelCheck(name), except for
// attention, flash_attention and their gradients, whose CUDA kernels do not
// implement context parallelism yet: their check refuses a launch with
// cp = 1 first (docs/kernels.md, "Context parallel"), so that such a plan
// is refused at load time rather than computed wrongly. Null for a name
// without a check.
KernelCheckFn cudaCheck(std::string_view name);

// Adds `kernels` in order as Device::kCUDA entries, each with
// cudaCheck(name), stopping at the first failure (a name without a check
// is one).
absl::Status addCudaKernels(KernelRegistry &registry,
                            std::initializer_list<CudaKernel> kernels);

}  // namespace cuda
}  // namespace braid
