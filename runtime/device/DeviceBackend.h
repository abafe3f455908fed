// The device a rank trains on, as the Trainer sees it: one arena holding every
// tensor of the plan, and the plan's programs run over it. The Trainer goes
// through this interface for every byte it puts into or takes out of the
// arena, so the same training code drives the CPU (cpu/CpuDevice.h: the arena
// is host memory, programs run on worker threads) and a GPU
// (cuda/CudaDevice.h: the arena is device memory, programs run on CUDA
// streams, optionally as CUDA graphs).
//
// Ordering: calls are made from one thread. Work a call starts (a run and
// its copies) may still be in flight on return; every later call observes
// it as finished. Errors of in-flight work surface at the next call that
// waits for it (readbacks, read, or a staging buffer reuse).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/registry/Kernel.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/profile/KernelProfile.h"
#include "runtime/profile/ScheduleTrace.h"

namespace braid {

class ThreadPool;

// What a device says about itself, for reports.
struct DeviceInfo {
  Device kind = Device::kCPU;
  // "CPU", or the GPU's name as the driver reports it ("NVIDIA H200").
  std::string name;
  // Memory of the GPU; 0 for the CPU, whose arena is ordinary host memory.
  uint64_t memoryBytes = 0;
  // CPU kernel threads; 0 on a GPU.
  int threads = 0;
  // The GPU's dense bf16 peak when this build knows the model (GpuPeaks.h).
  std::optional<double> peakGflops;
  // Whether programs are captured into CUDA graphs after their first run.
  bool cudaGraphs = false;
};

// How the programs ran so far (CUDA graphs on a GPU; all eager on a CPU).
struct DeviceStats {
  int64_t eagerRuns = 0;    // runs that launched every kernel from the host
  int64_t graphCaptures = 0; // runs that captured a graph, then launched it
  int64_t graphReplays = 0;  // runs that launched an existing graph
  // The arena's high-water mark: the end of the highest 64-byte block of
  // the arena that an instruction issued so far reads or writes
  // (Executor::arenaHighWater); the plan predicts plan.memory.arena_bytes.
  uint64_t arenaHighWater = 0;
  // The same for the host arena, where offloaded activations live
  // (Executor::hostHighWater); the plan predicts plan.memory.host_bytes.
  uint64_t hostArenaHighWater = 0;
};

class DeviceBackend {
public:
  virtual ~DeviceBackend() = default;

  virtual const DeviceInfo &info() const = 0;

  // The arena when it is host memory (the CPU), so that callers may read and
  // write tensors in place; null when it lives in device memory. (Not the
  // host arena below: this is the arena of every device tensor.)
  virtual uint8_t *hostArena() = 0;
  // The bytes the arena was allocated with: the plan's prediction
  // (plan.memory.arena_bytes), measured.
  virtual uint64_t arenaBytes() const = 0;
  // The bytes the host arena was allocated with (plan.memory.host_bytes;
  // 0 when the plan has no host tensors): the host memory, pinned on a GPU,
  // that host tensors (plan.proto Tensor.host: offloaded activations, host
  // parameters and optimizer state) live in beside the arena, and that the
  // plan's copy launches and host-stream launches read and write.
  virtual uint64_t hostArenaBytes() const = 0;

  // Copies `bytes` bytes at arena offset `offset` out to `out` / in from
  // `in`, after all work started so far, and returns once the copy is
  // complete. The range must lie within the arena (callers take it from a
  // validated plan).
  virtual absl::Status read(uint64_t offset, void *out, uint64_t bytes) = 0;
  virtual absl::Status write(uint64_t offset, const void *in,
                             uint64_t bytes) = 0;
  // Sets `bytes` bytes at `offset` to zero, ordered after all work so far.
  virtual absl::Status zero(uint64_t offset, uint64_t bytes) = 0;

  // The same three for the host arena (plan.proto Tensor.host: offloaded
  // activations, and the parameters and moments of optimizer offload): the
  // range must lie within it. On a GPU the host arena is pinned memory that
  // copies and host-stream launches use asynchronously, so these first
  // wait for all work started so far, then copy or clear with the CPU.
  virtual absl::Status readHost(uint64_t offset, void *out,
                                uint64_t bytes) = 0;
  virtual absl::Status writeHost(uint64_t offset, const void *in,
                                 uint64_t bytes) = 0;
  virtual absl::Status zeroHost(uint64_t offset, uint64_t bytes) = 0;
  // The host arena when callers may read and write it in place at any time
  // between calls (the CPU, where everything a call starts has finished
  // when it returns); null on a GPU (use readHost) or without host bytes.
  virtual uint8_t *hostTensorArena() = 0;

  // The whole of tensor `t` of the plan, in whichever arena it lives in
  // (t.host(): the host arena): read, write and zero as above.
  absl::Status readTensor(const plan::Tensor &t, void *out) {
    return t.host() ? readHost(t.offset(), out, t.size_bytes())
                    : read(t.offset(), out, t.size_bytes());
  }
  absl::Status writeTensor(const plan::Tensor &t, const void *in) {
    return t.host() ? writeHost(t.offset(), in, t.size_bytes())
                    : write(t.offset(), in, t.size_bytes());
  }
  absl::Status zeroTensor(const plan::Tensor &t) {
    return t.host() ? zeroHost(t.offset(), t.size_bytes())
                    : zero(t.offset(), t.size_bytes());
  }

  // Host memory of the size of INPUT tensor `tensor`, for its values in
  // micro-batch `microBatch` of the next step, which the step program's
  // stage instructions copy in. On the CPU ordinary memory, on a GPU pinned
  // memory. Valid until the next run(); may wait for the previous step to
  // have copied its values out. InvalidArgument when `tensor` is not an
  // INPUT or `microBatch` not one of a step's.
  virtual absl::StatusOr<absl::Span<uint8_t>>
  stageInput(uint32_t tensor, int64_t microBatch) = 0;

  // Runs the plan's program of kind `kind` (plan.proto: STEP once per
  // optimizer step, INIT once before the first) with `values` (the
  // kernels' step, learning rate and seed). NotFound when the plan has no
  // program of that kind.
  virtual absl::Status run(plan::ProgramKind kind,
                           const StepValues &values) = 0;

  // Waits for the work started so far and returns the readback slots the
  // last STEP run filled (plan.num_readbacks values: each micro-batch's
  // loss, the gradient norm, the skipped flag; plan.*_readback say which).
  virtual absl::StatusOr<std::vector<float>> readbacks() = 0;

  // While set, the time of every kernel launch on stream 0 is added to
  // `profile` (null to stop). On a GPU, profiled runs are eager.
  virtual void setProfile(KernelProfile *profile) = 0;
  // While set, the STEP program's marks are timed into `trace` (null to
  // stop; ScheduleTrace.h). On a GPU, traced runs are eager.
  virtual void setTrace(ScheduleTrace *trace) = 0;

  virtual DeviceStats stats() const = 0;

  // What the kernels of the last STEP run counted (adaptive recompute's
  // decisions); null where the kernels do not count (a GPU).
  virtual const KernelCounters *kernelCounters() const { return nullptr; }

  // Threads for host-side work on the run's behalf (initialising the
  // parameters). The CPU device's kernel threads; a GPU's own small pool.
  virtual ThreadPool &hostPool() = 0;
};

} // namespace braid
