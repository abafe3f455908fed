// CUDA runtime errors as absl::Status. Every CUDA call of the backend goes
// through BRAID_CUDA_TRY, so a failure comes back as a sentence naming the
// call: "cudaMalloc failed: out of memory (cudaErrorMemoryAllocation)".
#pragma once

#include <string_view>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace braid {

// OK for cudaSuccess; otherwise an error naming `call` (the call's source
// text; only the function name before '(' is kept) and the CUDA error.
// ResourceExhausted for an allocation failure, Internal for the rest.
absl::Status cudaStatus(cudaError_t err, std::string_view call);

} // namespace braid

// Evaluates a CUDA runtime call and returns its error from the enclosing
// function, which must return absl::Status or absl::StatusOr.
#define BRAID_CUDA_TRY(call)                                                   \
  do {                                                                         \
    if (absl::Status braid_cuda_status_ = ::braid::cudaStatus((call), #call);  \
        !braid_cuda_status_.ok())                                              \
      return braid_cuda_status_;                                               \
  } while (0)
