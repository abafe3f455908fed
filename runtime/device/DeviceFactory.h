// Choosing and creating the device a loaded plan runs on.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

class Ranks;

struct DeviceOptions {
  // CUDA: capture each program into a CUDA graph after its first run and
  // replay it (braid-run --cuda-graphs). Ignored on the CPU.
  bool cudaGraphs = true;
  // Threads of the device's pool (DeviceBackend::hostPool; on the CPU the
  // kernel threads); 0: ThreadPool::defaultThreadCount().
  int numThreads = 0;
  // The run's ranks (runtime/comm/Ranks.h): the collectives' groups and
  // this rank's micro-batches. Null for a single-rank run. Must outlive the
  // device.
  const Ranks *ranks = nullptr;
};

// Whether this build has the CUDA backend (it was built where nvcc exists).
bool haveCudaBackend();

// Checks that `device` can be used on this machine before anything is loaded
// for it: OK for the CPU; for CUDA, FailedPrecondition with a sentence naming
// what is missing (the backend in this build, the NVIDIA driver, a device,
// cuBLASLt).
absl::Status probeDevice(Device device);

// The device `plan` was loaded for (plan.device), with the plan's arena
// allocated and zero-filled and its programs bound, owning its thread
// pool. The plan must outlive the device. FailedPrecondition naming what is missing when CUDA is asked for
// and this build or this machine cannot provide it; ResourceExhausted when
// the arena cannot be allocated.
absl::StatusOr<std::unique_ptr<DeviceBackend>>
createDevice(const LoadedPlan &plan, const DeviceOptions &options);

} // namespace braid
