#include "runtime/device/GpuPeaks.h"

namespace braid {
namespace {

struct KnownGpu {
  std::string_view pattern; // a substring of the reported name
  double tflops;
};

// First match wins, so variants come before the model they extend ("H200
// NVL" before "H200"). GH200 reports "NVIDIA GH200 ..." and has an H100- or
// H200-class die, both 989 TFLOP/s.
constexpr KnownGpu kKnownGpus[] = {
    {"H200 NVL", 835}, {"H200", 989}, {"H100 NVL", 835},
    {"H100 PCIe", 756}, {"H100", 989}, {"A100", 312},
};

} // namespace

std::optional<double> bf16DensePeakTflops(std::string_view name) {
  for (const KnownGpu &gpu : kKnownGpus)
    if (name.find(gpu.pattern) != std::string_view::npos)
      return gpu.tflops;
  return std::nullopt;
}

} // namespace braid
