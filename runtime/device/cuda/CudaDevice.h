// An NVIDIA GPU as a device (docs/gpu-backend.md).
//
// The implementation is split by concern (CudaDeviceImpl.h). One cudaMalloc
// holds the plan's arena, the step values the kernels read
// (StepValues, refreshed from pinned host memory before each run) and one
// cuBLASLt workspace per plan stream. Each plan stream is a CUDA stream; the
// plan's counter events become CUDA events (StreamSchedule.h). A run is
// enqueued from the calling thread in program order:
//
//   stream 0: copy the step values in, record "fork"
//   stream s: wait "fork", its instructions, record "join s"
//   stream 0: wait every "join s"
//
// so every run starts and ends on stream 0 and the next one (or a copy the
// runtime orders on stream 0) sees it finished. The part between fork and
// join is what a CUDA graph captures (GraphPolicy.h decides when): the
// program's stage and readback copies, from and into pinned memory whose
// addresses never change, are inside it; the step-value copy stays outside,
// and kernels read everything that changes per run from the step-values
// buffer, so replaying the graph is the same as running the program
// eagerly. A capture that fails has run nothing: the
// program then runs eagerly, with a note on stderr, and is not captured
// again.
//
// Collectives go on the instruction's stream through the NCCL communicator
// of their axis (Ranks::deviceAxis), a pipeline's sends and receives
// through that of their channel (Ranks::devicePipelineChannel). A program
// that runs either is never captured: the watchdog finds a hung call by the
// events enqueued around it from the host, which a graph replay does not
// enqueue, so a replayed step could only be reported hung as a whole. While
// such calls may be in flight, every wait of the host for the device polls the
// communicators' watchdogs instead of blocking, so that a hang ends in an
// error naming the call rather than in a wait for ever.
//
// This header is free of CUDA so that the device factory compiles without
// the toolkit's headers.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

class Ranks;

// Probes the GPU (CudaProbe.h), loads cuBLASLt, allocates and zero-fills the
// arena and binds the programs of `plan`, which must have been loaded for
// Device::kCUDA and must outlive the device. `cudaGraphs`: capture programs
// into CUDA graphs after their first run and replay them. `hostThreads`:
// the threads of the device's host pool. `ranks` (null: a single-rank run
// without collectives; else it must outlive the device) gives this rank's
// micro-batches and the device communicators (Ranks::deviceAxis) that the
// plan's collectives are enqueued on.
absl::StatusOr<std::unique_ptr<DeviceBackend>>
createCudaDevice(const LoadedPlan &plan, bool cudaGraphs, int hostThreads,
                 const Ranks *ranks = nullptr);

} // namespace braid
