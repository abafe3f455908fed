// The CPU as a device: the arena is host memory (CpuArena), and so is the
// host arena of offloaded activations, a second allocation; the Executor
// issues programs to CpuStreams (stream 0 on the calling thread, other
// streams on worker threads; a host stream, plan.proto Plan.host_streams,
// is one of them like any other), and kernels split their work over the
// device's own ThreadPool.
// Everything a call starts has finished when it returns, so the staging
// block is ordinary memory that the step's stage and readback instructions
// copy from and into.
#pragma once

#include <memory>
#include <vector>

#include "kernels/cpu/ThreadPool.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/device/cpu/CpuArena.h"
#include "runtime/device/cpu/CpuStreams.h"
#include "runtime/executor/Executor.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

class CpuDevice final : public DeviceBackend {
public:
  // Allocates the zero-filled arena of `plan`, binds its programs and
  // starts `numThreads` kernel threads (at least 1). `ranks` (null: a
  // single-rank run, whose plan runs no collectives) gives the
  // collectives' groups and this rank's micro-batches. The plan (loaded for
  // Device::kCPU), its kernel registry and the ranks must outlive the
  // device.
  // ResourceExhausted, naming the size, when the arena or the host arena
  // (plan.memory.host_bytes) cannot be allocated.
  static absl::StatusOr<std::unique_ptr<CpuDevice>>
  create(const LoadedPlan &plan, int numThreads,
         const Ranks *ranks = nullptr);

  const DeviceInfo &info() const override { return info_; }
  uint8_t *hostArena() override { return arena_.data(); }
  uint64_t arenaBytes() const override { return arena_.size(); }
  uint64_t hostArenaBytes() const override { return hostArena_.size(); }
  absl::Status read(uint64_t offset, void *out, uint64_t bytes) override;
  absl::Status write(uint64_t offset, const void *in, uint64_t bytes) override;
  absl::Status zero(uint64_t offset, uint64_t bytes) override;
  absl::Status readHost(uint64_t offset, void *out, uint64_t bytes) override;
  absl::Status writeHost(uint64_t offset, const void *in,
                         uint64_t bytes) override;
  absl::Status zeroHost(uint64_t offset, uint64_t bytes) override;
  uint8_t *hostTensorArena() override { return hostArena_.data(); }
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
  ThreadPool &hostPool() override { return pool_; }
  const KernelCounters *kernelCounters() const override { return &counters_; }

private:
  CpuDevice(const LoadedPlan &plan, int numThreads, const Ranks *ranks);

  const LoadedPlan &plan_;
  ThreadPool pool_;
  DeviceInfo info_;
  CpuArena arena_;
  // The host tensors' (plan.proto Tensor.host): ordinary memory like the
  // arena, but an address space of its own.
  CpuArena hostArena_;
  StagingLayout layout_;
  std::vector<uint8_t> staging_;
  std::unique_ptr<Executor> executor_;
  CpuStreams streams_;
  KernelProfile *profile_ = nullptr;
  ScheduleTrace *trace_ = nullptr;
  DeviceStats stats_;
  KernelCounters counters_;
};

} // namespace braid
