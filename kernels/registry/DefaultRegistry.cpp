#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cpu/CpuKernels.h"
#if BRAID_HAVE_CUDA
#include "kernels/cuda/CudaKernels.h"
#endif
#include "kernels/registry/Kernel.h"

namespace braid {

// Built once, on first use; C++ makes the initialisation of a function-local
// static thread-safe. Registration fails only on a duplicate kernel name,
// which is a defect of this build rather than of any input, so it aborts
// with the reason instead of returning a half-filled registry.
const KernelRegistry &defaultKernelRegistry() {
  static const KernelRegistry *registry = [] {
    auto *r = new KernelRegistry();
    absl::Status s = registerCpuKernels(*r);
#if BRAID_HAVE_CUDA
    // The CUDA entries exist whether or not a GPU does: choosing a device
    // happens at run time (docs/gpu-backend.md).
    if (s.ok())
      s = registerCudaKernels(*r);
#endif
    if (!s.ok()) {
      std::fprintf(stderr, "braid: cannot build the kernel registry: %s\n",
                   std::string(s.message()).c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

} // namespace braid
