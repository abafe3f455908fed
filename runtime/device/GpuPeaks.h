// The dense bf16 tensor-core peak of the GPUs this build knows, the default
// denominator of MFU on a GPU (braid-run --peak-tflops overrides it).
// Figures are NVIDIA's datasheet numbers without structured sparsity.
#pragma once

#include <optional>
#include <string_view>

namespace braid {

// TFLOP/s for a GPU called `name` (as cudaGetDeviceProperties reports it,
// e.g. "NVIDIA H200"), or nullopt for a model not in the table.
std::optional<double> bf16DensePeakTflops(std::string_view name);

} // namespace braid
