#include "runtime/device/cuda/CudaStatus.h"

#include "absl/strings/str_cat.h"

namespace braid {

absl::Status cudaStatus(cudaError_t err, std::string_view call) {
  if (err == cudaSuccess)
    return absl::OkStatus();
  std::string_view name = call.substr(0, call.find('('));
  std::string message =
      absl::StrCat(absl::string_view(name.data(), name.size()), " failed: ",
                   cudaGetErrorString(err), " (", cudaGetErrorName(err), ")");
  if (err == cudaErrorMemoryAllocation)
    return absl::ResourceExhaustedError(std::move(message));
  return absl::InternalError(std::move(message));
}

} // namespace braid
