// The CUDA device's class, shared by the files that implement it by
// concern: CudaDevice.cpp (set-up, device memory, errors), CudaStaging.cpp
// (pinned staging of inputs, step values and readbacks) and
// CudaPrograms.cpp (the executor's target on CUDA streams, CUDA graphs and
// kernel timing).
// Internal to runtime/device/cuda; everyone else goes through
// createCudaDevice (CudaDevice.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/cpu/ThreadPool.h"
#include "kernels/cuda/CublasLtApi.h"
#include "runtime/comm/DeviceCommunicator.h"
#include "runtime/comm/Mesh.h"
#include "runtime/comm/Ranks.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/device/cuda/CudaHandles.h"
#include "runtime/device/cuda/CudaProbe.h"
#include "runtime/device/cuda/GraphPolicy.h"
#include "runtime/executor/Executor.h"
#include "runtime/executor/StagingLayout.h"
#include "runtime/plan/PlanLoader.h"

namespace braid::cuda_device {

// Alignment of the regions after the arena in the single allocation.
constexpr uint64_t kRegionAlignment = 256;
// cuBLASLt scratch per stream: what NVIDIA recommends for Hopper.
constexpr uint64_t kWorkspaceBytes = 32ull << 20;
// Pinned step-value slots: a slot is reused only after the copy out of it
// has run, which the ring makes rare (one wait per kStepSlots runs at most).
constexpr int kStepSlots = 64;

inline uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct BlasLtRelease {
  const cuda::CublasLtApi *api = nullptr;
  cublasLtHandle_t handle = nullptr;
  ~BlasLtRelease() {
    if (api && handle)
      cuda::destroyHandle(*api, handle);
  }
};

class CudaDevice final : public DeviceBackend {
public:
  CudaDevice(const LoadedPlan &plan, bool cudaGraphs, int hostThreads,
             const Ranks *ranks)
      : plan_(plan), cudaGraphs_(cudaGraphs), ranks_(ranks),
        hostPool_(hostThreads), layout_(plan) {}
  ~CudaDevice() override;

  absl::Status init(const CudaGpu &gpu);

  const DeviceInfo &info() const override { return info_; }
  uint8_t *hostArena() override { return nullptr; }
  // The arena is the start of the one allocation, exactly the plan's bytes
  // (the step values and workspaces follow it).
  uint64_t arenaBytes() const override {
    return plan_.proto.memory().arena_bytes();
  }
  // The pinned host arena is exactly the plan's bytes, or nothing.
  uint64_t hostArenaBytes() const override {
    return hostArena_ ? plan_.proto.memory().host_bytes() : 0;
  }
  absl::Status read(uint64_t offset, void *out, uint64_t bytes) override;
  absl::Status write(uint64_t offset, const void *in, uint64_t bytes) override;
  absl::Status zero(uint64_t offset, uint64_t bytes) override;
  // The pinned host arena, after waiting for every stream (CudaDevice.cpp).
  absl::Status readHost(uint64_t offset, void *out, uint64_t bytes) override;
  absl::Status writeHost(uint64_t offset, const void *in,
                         uint64_t bytes) override;
  absl::Status zeroHost(uint64_t offset, uint64_t bytes) override;
  uint8_t *hostTensorArena() override { return nullptr; }
  absl::StatusOr<absl::Span<uint8_t>> stageInput(uint32_t tensor,
                                                 int64_t microBatch) override;
  absl::Status run(plan::ProgramKind kind, const StepValues &values) override;
  absl::StatusOr<std::vector<float>> readbacks() override;
  void setProfile(KernelProfile *profile) override { profile_ = profile; }
  void setTrace(ScheduleTrace *trace) override { trace_ = trace; }
  DeviceStats stats() const override {
    DeviceStats s = stats_;
    s.arenaHighWater = executor_ ? executor_->arenaHighWater() : 0;
    s.hostArenaHighWater = executor_ ? executor_->hostHighWater() : 0;
    return s;
  }
  ThreadPool &hostPool() override { return hostPool_; }

private:
  // What the device keeps per program of the executor (same index): the
  // CUDA event of each signal slot, and its graph.
  // A launch on a host stream (plan.proto Plan.host_streams): its CPU
  // kernel and bound arguments, which a host function on the stream's CUDA
  // stream (cudaLaunchHostFunc, a host node in a graph) runs with the
  // device's hostContext_. Made the first time the program issues it and
  // kept (a graph replays the same pointer).
  struct HostLaunch {
    CudaDevice *device = nullptr;
    const KernelDef *kernel = nullptr;
    KernelArgs args;
  };
  // The argument of the host function that sets hostContext_ from step
  // value slot `values` before a run's host launches.
  struct HostValues {
    CudaDevice *device = nullptr;
    const StepValues *values = nullptr;
  };
  struct Program {
    const Executor::Program *bound = nullptr;
    std::vector<CudaEvent> signals;
    GraphPolicy policy{false};
    CudaGraphExec graph;
    // By issue order: the k-th host-stream launch of every run is the same.
    std::vector<std::unique_ptr<HostLaunch>> hostLaunches;
  };
  // Host functions (CUDA calls them on a thread of its own; they call no
  // CUDA API).
  static void CUDART_CB runHostLaunch(void *launch);
  static void CUDART_CB setHostValues(void *values);
  class Streams;
  // A mark a traced run recorded: its event is markEvents_[its index].
  struct TimedMark {
    MarkCall call;
    uint32_t stream = 0;
  };

  uint8_t *at(uint64_t offset) const {
    return static_cast<uint8_t *>(memory_.get()) + offset;
  }
  cudaStream_t stream(uint32_t s) const { return streams_[s].get(); }
  // Allocates the pinned, zero-filled host arena of plan.memory.host_bytes
  // (nothing when 0).
  absl::Status allocateHostArena(const CudaGpu &gpu);
  absl::Status bindPrograms();
  // `trace` (null: none) times the program's marks; the run then waits for
  // the program before it returns.
  absl::Status enqueue(Program &program, const KernelContext *contexts,
                       bool profiling, ScheduleTrace *trace = nullptr);
  // Waits for the run, then adds to `trace` the span of each pair of marks
  // (in issue order) timed from the origin the host saw at `origin`.
  absl::Status timeMarks(const std::vector<TimedMark> &marked,
                         ScheduleTrace::Clock::time_point origin,
                         ScheduleTrace &trace);
  // Captures the program into a graph and launches it. On failure nothing
  // of the program has run and no stream is left capturing, unless the
  // returned status says otherwise (`recoverable` false).
  absl::Status capture(Program &program, const KernelContext *contexts,
                       bool *recoverable);
  absl::Status copyIn(const StepValues &values);
  // The error of a kernel launch of `program`, as a sentence.
  absl::Status launchError(const Program &program, cudaError_t err) const;
  // `what` failed while waiting for work started earlier.
  absl::Status waitError(std::string_view what, cudaError_t err) const;
  // Waits until `event` has completed (`what`: the wait, for errors). With
  // device communicators, by polling the event and their watchdogs, whose
  // error it returns; otherwise by blocking.
  absl::Status hostWait(cudaEvent_t event, std::string_view what);
  // hostWait for everything queued so far on stream `s`.
  absl::Status hostWaitStream(uint32_t s);

  const LoadedPlan &plan_;
  const bool cudaGraphs_;
  // The run's ranks (may be null), and by plan axis - 1 (MeshAxis) the
  // device communicators the collectives go through (null: none).
  const Ranks *ranks_;
  std::array<DeviceCommunicator *, kNumMeshAxes> comms_{};
  // By channel, the communicators a pipeline's transfers go through
  // (Ranks::devicePipelineChannel; null: none).
  std::array<DeviceCommunicator *, 2> channels_{};
  // Every communicator above, once: the ones the watchdog polls.
  std::vector<DeviceCommunicator *> watched_;
  bool communicates_ = false;
  ThreadPool hostPool_;
  DeviceInfo info_;
  int ccMajor_ = 0, ccMinor_ = 0; // compute capability
  const cuda::CublasLtApi *blasApi_ = nullptr;
  BlasLtRelease blasLt_;
  // arena | step values | workspace per stream
  DeviceMemory memory_;
  // The host tensors' arena (plan.proto Tensor.host): pinned, so that the
  // copy kernel's cudaMemcpyAsync moves offloaded activations to and from
  // it asynchronously on its stream; null when the plan has none.
  PinnedMemory hostArena_;
  uint64_t stepValuesOffset_ = 0;
  uint64_t workspaceOffset_ = 0;
  std::vector<CudaStream> streams_;
  CudaEvent fork_;
  std::vector<CudaEvent> joins_;
  // Recorded by hostWaitStream.
  std::vector<CudaEvent> drained_;
  std::vector<GpuContext> gpuContexts_;
  std::unique_ptr<Executor> executor_;
  std::vector<Program> programs_;
  // Pinned staging block (StagingLayout.h): the step's inputs and its
  // readback slots, and the event after the last run that copies from or
  // into it.
  // Host-stream launches: the plan has host streams; the CPU kernels'
  // context (the run's step values, set by setHostValues on stream 0 before
  // each run; the host pool), and the lock that runs one at a time, so that
  // they share the host pool with no one. hostValueArgs_[slot] is the
  // argument for step value slot `slot`.
  bool hostStreams_ = false;
  KernelContext hostContext_;
  std::mutex hostMutex_;
  std::vector<HostValues> hostValueArgs_;
  StagingLayout layout_;
  PinnedMemory staging_;
  CudaEvent stagingDone_;
  bool stagingPending_ = false;
  // Pinned ring of step values and the event after each slot's copy.
  PinnedMemory stepHost_;
  std::vector<CudaEvent> stepCopied_;
  std::vector<bool> stepPending_;
  int nextStepSlot_ = 0;
  // Profiling: one start/stop pair per timed launch of a run.
  std::vector<std::pair<CudaEvent, CudaEvent>> timers_;
  KernelProfile *profile_ = nullptr;
  // Tracing: one event per mark of a run, and the run's origin.
  std::vector<CudaEvent> markEvents_;
  CudaEvent markOrigin_;
  ScheduleTrace *trace_ = nullptr;
  DeviceStats stats_;
};

} // namespace braid::cuda_device
