#include "runtime/device/DeviceFactory.h"

#include "runtime/comm/Mesh.h"
#include "runtime/device/cpu/CpuDevice.h"
#if BRAID_HAVE_CUDA
#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/CudaProbe.h"
#endif

namespace braid {

bool haveCudaBackend() {
#if BRAID_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

absl::Status probeDevice(Device device) {
  if (device == Device::kCPU)
    return absl::OkStatus();
#if BRAID_HAVE_CUDA
  absl::StatusOr<CudaGpu> gpu = probeCudaGpu();
  return gpu.ok() ? absl::OkStatus() : gpu.status();
#else
  return absl::FailedPreconditionError(
      "this braid-run was built without the CUDA backend (no nvcc at build "
      "time); use --device=cpu, or rebuild where the CUDA toolkit is "
      "installed");
#endif
}

absl::StatusOr<std::unique_ptr<DeviceBackend>>
createDevice(const LoadedPlan &plan, const DeviceOptions &options) {
  const int threads = options.numThreads > 0
                          ? options.numThreads
                          : ThreadPool::defaultThreadCount();
  if (plan.device == Device::kCPU) {
    absl::StatusOr<std::unique_ptr<CpuDevice>> cpu =
        CpuDevice::create(plan, threads, options.ranks);
    if (!cpu.ok())
      return cpu.status();
    return std::unique_ptr<DeviceBackend>(std::move(*cpu));
  }
  if (planMesh(plan.proto.mesh()).worldSize() > 1)
    return absl::UnimplementedError(
        "this plan is for several ranks, which train on the CPU only so far "
        "(the GPU's NCCL communicator is not built yet); use --device=cpu");
#if BRAID_HAVE_CUDA
  return createCudaDevice(plan, options.cudaGraphs, threads);
#else
  (void)threads;
  return probeDevice(Device::kCUDA);
#endif
}

} // namespace braid
