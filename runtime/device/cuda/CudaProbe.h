// Finding a usable GPU before anything is allocated on it, so that a machine
// without one is refused with a sentence naming what is missing: the NVIDIA
// driver, a new enough driver, a visible device, or cuBLASLt.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace braid {

struct CudaGpu {
  int ordinal = 0;         // the CUDA device number used
  std::string name;        // "NVIDIA H200"
  uint64_t memoryBytes = 0;
  int major = 0;           // compute capability
  int minor = 0;
};

// The GPU the backend runs on: device 0 of those the driver shows (set
// CUDA_VISIBLE_DEVICES to choose another), after checking that cuBLASLt
// loads. FailedPrecondition starting "cannot use a GPU: " otherwise.
absl::StatusOr<CudaGpu> probeCudaGpu();

} // namespace braid
