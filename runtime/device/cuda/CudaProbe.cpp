#include "runtime/device/cuda/CudaProbe.h"

#include <cstdlib>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/CublasLtApi.h"
#include "runtime/device/cuda/CudaStatus.h"

namespace braid {
namespace {

absl::Status refuse(absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("cannot use a GPU: ", why));
}

// 12040 -> "12.4".
std::string cudaVersionName(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

absl::Status countDevices(int *count) {
  cudaError_t err = cudaGetDeviceCount(count);
  if (err == cudaSuccess && *count > 0)
    return absl::OkStatus();
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  if (driver == 0)
    return refuse("no NVIDIA driver is installed (libcuda.so.1 was not "
                  "found)");
  if (err == cudaErrorInsufficientDriver)
    return refuse(absl::StrCat("the NVIDIA driver supports CUDA ",
                               cudaVersionName(driver),
                               " but this build's runtime is CUDA ",
                               cudaVersionName(CUDART_VERSION),
                               "; update the driver"));
  if (err == cudaSuccess || err == cudaErrorNoDevice) {
    const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return refuse(absl::StrCat(
        "the NVIDIA driver shows no CUDA device",
        visible ? absl::StrCat(" (CUDA_VISIBLE_DEVICES is \"", visible, "\")")
                : ""));
  }
  return refuse(cudaStatus(err, "cudaGetDeviceCount").message());
}

} // namespace

absl::StatusOr<CudaGpu> probeCudaGpu() {
  int count = 0;
  if (absl::Status s = countDevices(&count); !s.ok())
    return s;
  CudaGpu gpu;
  cudaDeviceProp props;
  if (absl::Status s = cudaStatus(cudaGetDeviceProperties(&props, gpu.ordinal),
                                  "cudaGetDeviceProperties");
      !s.ok())
    return refuse(s.message());
  gpu.name = props.name;
  gpu.memoryBytes = props.totalGlobalMem;
  gpu.major = props.major;
  gpu.minor = props.minor;
  absl::StatusOr<const cuda::CublasLtApi *> blas = cuda::loadCublasLt();
  if (!blas.ok())
    return refuse(blas.status().message());
  return gpu;
}

} // namespace braid
