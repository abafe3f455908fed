// Set-up, device memory and errors of the CUDA device (CudaDeviceImpl.h).
#include "runtime/device/cuda/CudaDevice.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/CudaDeviceImpl.h"
#include "runtime/device/cuda/CudaStatus.h"
#include "runtime/device/GpuPeaks.h"

namespace braid::cuda_device {

CudaDevice::~CudaDevice() {
  // Nothing may still run over the memory released below. A collective
  // that hangs is first aborted by its watchdog, so that the streams drain.
  if (communicates_)
    for (uint32_t s = 0; s < streams_.size(); ++s)
      (void)hostWaitStream(s);
  if (!streams_.empty())
    (void)cudaDeviceSynchronize();
}

absl::Status CudaDevice::init(const CudaGpu &gpu) {
  BRAID_CUDA_TRY(cudaSetDevice(gpu.ordinal));
  info_.kind = Device::kCUDA;
  info_.name = gpu.name;
  info_.memoryBytes = gpu.memoryBytes;
  if (std::optional<double> tflops = bf16DensePeakTflops(gpu.name))
    info_.peakGflops = *tflops * 1000.0;
  info_.cudaGraphs = cudaGraphs_;
  ccMajor_ = gpu.major;
  ccMinor_ = gpu.minor;

  absl::StatusOr<const cuda::CublasLtApi *> api = cuda::loadCublasLt();
  if (!api.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("cannot use a GPU: ", api.status().message()));
  blasApi_ = *api;
  absl::StatusOr<cublasLtHandle_t> handle = cuda::createHandle(*blasApi_);
  if (!handle.ok())
    return handle.status();
  blasLt_.api = blasApi_;
  blasLt_.handle = *handle;

  const uint32_t numStreams = plan_.proto.num_streams();
  const uint64_t arenaBytes = plan_.proto.memory().arena_bytes();
  stepValuesOffset_ = alignUp(arenaBytes, kRegionAlignment);
  workspaceOffset_ =
      alignUp(stepValuesOffset_ + sizeof(StepValues), kRegionAlignment);
  const uint64_t total = workspaceOffset_ + numStreams * kWorkspaceBytes;
  void *memory = nullptr;
  if (cudaError_t err = cudaMalloc(&memory, total); err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate the arena on ", gpu.name, ": ", total,
        " bytes (arena ", arenaBytes, " + step values + cuBLASLt workspaces) "
        "asked for, ", cudaGetErrorString(err)));
  }
  memory_ = DeviceMemory(memory);
  // On the legacy default stream, which the non-blocking streams below do
  // not order against: finish it before anything else touches the arena.
  BRAID_CUDA_TRY(cudaMemset(memory, 0, total));
  BRAID_CUDA_TRY(cudaDeviceSynchronize());
  if (absl::Status s = allocateHostArena(gpu); !s.ok())
    return s;

  for (uint32_t s = 0; s < numStreams; ++s) {
    cudaStream_t st = nullptr;
    BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    streams_.emplace_back(st);
  }
  auto newEvent = [](CudaEvent &out) -> absl::Status {
    cudaEvent_t e = nullptr;
    BRAID_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    out = CudaEvent(e);
    return absl::OkStatus();
  };
  if (absl::Status s = newEvent(fork_); !s.ok())
    return s;
  joins_.resize(numStreams);
  for (CudaEvent &e : joins_)
    if (absl::Status s = newEvent(e); !s.ok())
      return s;
  drained_.resize(numStreams);
  for (CudaEvent &e : drained_)
    if (absl::Status s = newEvent(e); !s.ok())
      return s;
  if (ranks_ != nullptr) {
    for (MeshAxis a : kMeshAxes)
      if (DeviceCommunicator *c = ranks_->deviceAxis(a)) {
        comms_[static_cast<int>(a)] = c;
        watched_.push_back(c);
        communicates_ = true;
      }
    for (uint32_t channel : {0u, 1u})
      channels_[channel] = ranks_->devicePipelineChannel(channel);
    if (channels_[1] != nullptr)
      watched_.push_back(channels_[1]);
  }

  const auto *stepValues =
      reinterpret_cast<const StepValues *>(at(stepValuesOffset_));
  gpuContexts_.resize(numStreams);
  for (uint32_t s = 0; s < numStreams; ++s) {
    GpuContext &g = gpuContexts_[s];
    g.stream = stream(s);
    g.blasLt = blasLt_.handle;
    g.workspace = at(workspaceOffset_ + s * kWorkspaceBytes);
    g.workspaceBytes = kWorkspaceBytes;
    g.api = blasApi_;
    g.stepValues = stepValues;
  }

  // Pinned staging: the step's inputs and readbacks, and the step-value
  // ring.
  void *staging = nullptr;
  BRAID_CUDA_TRY(cudaMallocHost(&staging, std::max<uint64_t>(1, layout_.bytes())));
  staging_ = PinnedMemory(staging);
  if (absl::Status s = newEvent(stagingDone_); !s.ok())
    return s;
  void *stepHost = nullptr;
  BRAID_CUDA_TRY(cudaMallocHost(&stepHost, kStepSlots * sizeof(StepValues)));
  stepHost_ = PinnedMemory(stepHost);
  stepCopied_.resize(kStepSlots);
  stepPending_.assign(kStepSlots, false);
  for (CudaEvent &e : stepCopied_)
    if (absl::Status s = newEvent(e); !s.ok())
      return s;
  return bindPrograms();
}

absl::Status CudaDevice::allocateHostArena(const CudaGpu &gpu) {
  const uint64_t bytes = plan_.proto.memory().host_bytes();
  if (bytes == 0)
    return absl::OkStatus();
  void *host = nullptr;
  if (cudaError_t err = cudaHostAlloc(&host, bytes, cudaHostAllocDefault);
      err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate the host arena for ", gpu.name, ": ", bytes,
        " bytes of pinned host memory (plan.memory.host_bytes) asked for, ",
        cudaGetErrorString(err)));
  }
  hostArena_ = PinnedMemory(host);
  // Zero-filled like the arena, so that no run depends on what the memory
  // held before. Pinned memory is ordinary host memory to the CPU.
  std::memset(host, 0, bytes);
  return absl::OkStatus();
}

absl::Status CudaDevice::read(uint64_t offset, void *out, uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  BRAID_CUDA_TRY(cudaMemcpyAsync(out, at(offset), bytes, cudaMemcpyDeviceToHost,
                                 stream(0)));
  return hostWaitStream(0);
}

absl::Status CudaDevice::write(uint64_t offset, const void *in,
                               uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  BRAID_CUDA_TRY(cudaMemcpyAsync(at(offset), in, bytes, cudaMemcpyHostToDevice,
                                 stream(0)));
  // `in` is the caller's memory, valid only until this call returns.
  return hostWaitStream(0);
}

absl::Status CudaDevice::zero(uint64_t offset, uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  BRAID_CUDA_TRY(cudaMemsetAsync(at(offset), 0, bytes, stream(0)));
  return absl::OkStatus();
}

// The host arena is pinned host memory that copies and host functions use
// in stream order: every program joins its streams back into stream 0, so
// once stream 0 has drained nothing uses it.
absl::Status CudaDevice::readHost(uint64_t offset, void *out, uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  if (absl::Status s = hostWaitStream(0); !s.ok())
    return s;
  std::memcpy(out, static_cast<const uint8_t *>(hostArena_.get()) + offset,
              bytes);
  return absl::OkStatus();
}

absl::Status CudaDevice::writeHost(uint64_t offset, const void *in,
                                   uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  if (absl::Status s = hostWaitStream(0); !s.ok())
    return s;
  std::memcpy(static_cast<uint8_t *>(hostArena_.get()) + offset, in, bytes);
  return absl::OkStatus();
}

absl::Status CudaDevice::zeroHost(uint64_t offset, uint64_t bytes) {
  if (bytes == 0)
    return absl::OkStatus();
  if (absl::Status s = hostWaitStream(0); !s.ok())
    return s;
  std::memset(static_cast<uint8_t *>(hostArena_.get()) + offset, 0, bytes);
  return absl::OkStatus();
}

absl::Status CudaDevice::hostWait(cudaEvent_t event, std::string_view what) {
  if (!communicates_) {
    if (cudaError_t err = cudaEventSynchronize(event); err != cudaSuccess)
      return waitError(what, err);
    return absl::OkStatus();
  }
  using Clock = std::chrono::steady_clock;
  // The watchdogs' limits are seconds: a look every millisecond is plenty,
  // and leaves the event's query cheap.
  constexpr auto kPollEvery = std::chrono::milliseconds(1);
  const auto start = Clock::now();
  auto polled = start - kPollEvery;
  for (;;) {
    const cudaError_t err = cudaEventQuery(event);
    if (err == cudaSuccess)
      return absl::OkStatus();
    if (err != cudaErrorNotReady)
      return waitError("cudaEventQuery", err);
    const auto now = Clock::now();
    if (now - polled >= kPollEvery) {
      polled = now;
      for (DeviceCommunicator *c : watched_)
        if (absl::Status s = c->poll(); !s.ok())
          return s;
    }
    // Spin briefly, then back off and leave the core to the other ranks'
    // host threads, as the MPI communicator's wait does.
    if (now - start < std::chrono::microseconds(100))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

absl::Status CudaDevice::hostWaitStream(uint32_t s) {
  if (!communicates_) {
    if (cudaError_t err = cudaStreamSynchronize(stream(s)); err != cudaSuccess)
      return waitError("cudaStreamSynchronize", err);
    return absl::OkStatus();
  }
  BRAID_CUDA_TRY(cudaEventRecord(drained_[s].get(), stream(s)));
  return hostWait(drained_[s].get(), "cudaEventSynchronize");
}

absl::Status CudaDevice::launchError(const Program &program,
                                     cudaError_t err) const {
  std::string message = absl::StrCat(
      "launching the kernels of program \"", program.bound->name, "\" on ",
      info_.name, " failed: ", cudaGetErrorString(err), " (",
      cudaGetErrorName(err), ")");
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx ||
      err == cudaErrorUnsupportedPtxVersion)
    absl::StrAppend(&message,
                    "; this build's CUDA kernels do not run on compute "
                    "capability ",
                    ccMajor_, ".", ccMinor_,
                    " (rebuild with -DCMAKE_CUDA_ARCHITECTURES=", ccMajor_,
                    ccMinor_, ")");
  return absl::InternalError(std::move(message));
}

absl::Status CudaDevice::waitError(std::string_view what,
                                   cudaError_t err) const {
  const absl::Status s = cudaStatus(err, what);
  return absl::Status(
      s.code(),
      absl::StrCat("waiting for the work started on ", info_.name, ": ",
                   s.message(),
                   "; a kernel launched since the last wait may be the "
                   "cause (run with --cuda-graphs=off and "
                   "CUDA_LAUNCH_BLOCKING=1 to find it)"));
}

} // namespace braid::cuda_device

namespace braid {

absl::StatusOr<std::unique_ptr<DeviceBackend>>
createCudaDevice(const LoadedPlan &plan, bool cudaGraphs, int hostThreads,
                 const Ranks *ranks) {
  if (plan.device != Device::kCUDA)
    return absl::InvalidArgumentError(
        "the plan was loaded for the CPU; load it for Device::kCUDA to run "
        "it on a GPU");
  absl::StatusOr<CudaGpu> gpu = probeCudaGpu();
  if (!gpu.ok())
    return gpu.status();
  auto device = std::make_unique<cuda_device::CudaDevice>(
      plan, cudaGraphs, hostThreads, ranks);
  if (absl::Status s = device->init(*gpu); !s.ok())
    return s;
  return std::unique_ptr<DeviceBackend>(std::move(device));
}

} // namespace braid
