#include "runtime/device/DeviceFactory.h"

#include "absl/strings/str_cat.h"
#include "runtime/comm/Mesh.h"
#include "runtime/comm/Ranks.h"
#include "runtime/device/cpu/CpuDevice.h"
#if BRAID_HAVE_CUDA
#include "runtime/comm/nccl/NcclCommunicator.h"
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

bool planNeedsCommunicators(const LoadedPlan &plan) {
  if (planMesh(plan.proto.mesh()).worldSize() > 1)
    return true;
  for (const LoadedProgram &program : plan.programs)
    for (const LoadedInstruction &inst : program.instructions)
      if (inst.kind == LoadedInstruction::Kind::kCollective ||
          inst.kind == LoadedInstruction::Kind::kSend ||
          inst.kind == LoadedInstruction::Kind::kRecv)
        return true;
  return false;
}

absl::Status attachDeviceCommunicators(const LoadedPlan &plan, Ranks &ranks,
                                       std::chrono::milliseconds timeout) {
  if (plan.device == Device::kCPU || !planNeedsCommunicators(plan))
    return absl::OkStatus();
#if BRAID_HAVE_CUDA
  absl::StatusOr<CudaGpu> gpu = probeCudaGpu();
  if (!gpu.ok())
    return gpu.status();
  auto comms = nccl::createNcclCommunicators(ranks, gpu->ordinal, timeout);
  if (!comms.ok())
    return absl::Status(
        comms.status().code(),
        absl::StrCat("this plan runs collectives, which on a GPU go over "
                     "NCCL: ",
                     comms.status().message()));
  ranks.attachDevice(std::move(*comms));
  // Ranks::devicePipelineChannel: the gradients' channel of a pipeline.
  if (ranks.mesh().size(MeshAxis::kPP) > 1) {
    auto gradients = nccl::createNcclCommunicator(
        ranks.axis(MeshAxis::kPP), gpu->ordinal, timeout);
    if (!gradients.ok())
      return absl::Status(
          gradients.status().code(),
          absl::StrCat("this plan sends and receives along the pipeline, "
                       "which on a GPU goes over NCCL: ",
                       gradients.status().message()));
    ranks.attachDeviceGradientChannel(std::move(*gradients));
  }
  return absl::OkStatus();
#else
  (void)ranks;
  (void)timeout;
  return probeDevice(Device::kCUDA);
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
#if BRAID_HAVE_CUDA
  if (planNeedsCommunicators(plan) &&
      (options.ranks == nullptr ||
       options.ranks->deviceAxis(MeshAxis::kDP) == nullptr))
    return absl::FailedPreconditionError(absl::StrCat(
        "this plan runs collectives (mesh ",
        planMesh(plan.proto.mesh()).describe(),
        "), which on a GPU go over NCCL, but no NCCL communicators were made "
        "for this run (attachDeviceCommunicators)"));
  return createCudaDevice(plan, options.cudaGraphs, threads, options.ranks);
#else
  (void)threads;
  return probeDevice(Device::kCUDA);
#endif
}

} // namespace braid
