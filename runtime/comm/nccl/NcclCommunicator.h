// The GPU's communicators: one NCCL communicator per mesh axis group
// (DeviceCommunicator.h), bootstrapped over the host communicator of the
// same group (MPI's under a launcher, SelfCommunicator's for a single rank).
// Built where nvcc exists; NCCL itself is loaded at run time (NcclApi.h).
//
// Bootstrap, collective over the group, in three host calls: the ranks
// agree that every one of them loaded NCCL (an all-reduce of the failures,
// so that none is left waiting in NCCL for a rank that gave up), rank 0
// makes NCCL's unique id and broadcasts it, and every rank joins with
// ncclCommInitRank on the CUDA device given.
//
// Calls are enqueued on the caller's stream between two CUDA events; the
// watchdog (poll) reads them against the timeout (PendingCalls.h), polls
// ncclCommGetAsyncError, and aborts the communicator (ncclCommAbort) when
// a call runs out of time or NCCL reports an error.
//
// This header is free of CUDA so that the device factory compiles without
// the toolkit's headers.
#pragma once

#include <array>
#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceCommunicator.h"
#include "runtime/comm/Mesh.h"

namespace braid {

class Ranks;

namespace nccl {

// The NCCL communicator of `host`'s group on CUDA device `cudaDevice`
// (made current), named as `host` is. Collective over the group. Calls
// that run longer than `timeout` once started fail (DeadlineExceeded).
// FailedPrecondition naming what was tried when NCCL cannot be loaded here
// or on another rank of the group; Internal naming the NCCL call that
// failed otherwise.
absl::StatusOr<std::unique_ptr<DeviceCommunicator>>
createNcclCommunicator(Communicator &host, int cudaDevice,
                       std::chrono::milliseconds timeout);

// One per mesh axis of `ranks`, created in kMeshAxes order (TP first) over
// ranks.axis(axis), as MpiWorld creates the host's.
absl::StatusOr<std::array<std::unique_ptr<DeviceCommunicator>, kNumMeshAxes>>
createNcclCommunicators(const Ranks &ranks, int cudaDevice,
                        std::chrono::milliseconds timeout);

} // namespace nccl
} // namespace braid
