// The CPU kernels of docs/kernels.md.
#pragma once

#include "absl/status/status.h"
#include "kernels/registry/Kernel.h"

namespace braid {

// Adds every CPU kernel to `registry`. Fails (AlreadyExists) when one of
// them is registered already, leaving the kernels added before it in place.
absl::Status registerCpuKernels(KernelRegistry &registry);

} // namespace braid
