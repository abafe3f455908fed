// The load-time checks of every kernel in docs/kernels.md, shared by all
// devices: a launch is valid or not whatever runs it, so the CPU and the
// CUDA registry entries of one kernel use the same check.
#pragma once

#include <string_view>

#include "kernels/registry/Kernel.h"

namespace braid {

using KernelCheckFn = absl::Status (*)(const KernelSignature &sig);

// The check of the kernel called `name`; null for a name docs/kernels.md
// does not list.
KernelCheckFn kernelCheck(std::string_view name);

}  // namespace braid
