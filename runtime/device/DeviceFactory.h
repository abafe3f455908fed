// Choosing and creating the device a loaded plan runs on.
#pragma once

#include <chrono>
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

// Whether `plan` needs communicators: its mesh has several ranks, or one of
// its programs runs collectives (as ZeRO's do even at data_parallel 1).
bool planNeedsCommunicators(const LoadedPlan &plan);

// Gives `ranks` what the device `plan` was loaded for needs to run the
// plan's collectives, before the device is created: nothing on the CPU,
// whose streams use the ranks' own communicators (MPI); on a GPU, when the
// plan needs communicators, one NCCL communicator per mesh axis on the GPU
// the device will use (runtime/comm/nccl/NcclCommunicator.h), bootstrapped
// over the ranks' own. Collective over every rank. FailedPrecondition
// naming what is missing: the CUDA backend in this build, a GPU, NCCL.
// Calls that run longer than `timeout` fail (DeadlineExceeded).
absl::Status attachDeviceCommunicators(const LoadedPlan &plan, Ranks &ranks,
                                       std::chrono::milliseconds timeout);

// The device `plan` was loaded for (plan.device), with the plan's arena
// allocated and zero-filled and its programs bound, owning its thread
// pool. The plan must outlive the device. FailedPrecondition naming what is
// missing when CUDA is asked for and this build or this machine cannot
// provide it, or when the plan needs communicators on a GPU and the ranks
// have none attached (attachDeviceCommunicators); ResourceExhausted when the
// arena cannot be allocated.
absl::StatusOr<std::unique_ptr<DeviceBackend>>
createDevice(const LoadedPlan &plan, const DeviceOptions &options);

} // namespace braid
