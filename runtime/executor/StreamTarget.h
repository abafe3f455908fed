// A device's streams, as the executor (Executor.h) drives them: one call per
// instruction run, in program order, from one host thread. A call queues
// the work on `stream` (or does it there and then); work on one stream runs
// in the order it was queued, and work on different streams is ordered only
// by the records and waits it is given.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/registry/Kernel.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/DeviceCommunicator.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/profile/ScheduleTrace.h"

namespace braid {

// A settled record or wait (Executor.h): the plan's event and value, and the
// record's signal slot, which its waits share.
struct EventSignal {
  uint32_t event = 0;
  uint64_t value = 0;
  uint32_t slot = 0;
};

enum class CopyDirection { kToDevice, kToHost };

// A collective over this rank's group along `axis` (plan.proto Collective),
// on tensors in the arena: outputs[i] is written from tensors[i]; an
// all-reduce's outputs are its tensors. A shift sends tensors[i] to the
// rank `shiftOffset` places on and receives outputs[i] from the one as many
// places before.
struct CollectiveCall {
  plan::CollectiveKind kind = plan::COLLECTIVE_UNSPECIFIED;
  plan::MeshAxis axis = plan::AXIS_UNSPECIFIED;
  absl::Span<const TensorView> tensors;
  absl::Span<const TensorView> outputs;
  int32_t shiftOffset = 0;
};

// A send or receive along the pipeline axis (plan.proto PeerTransfer): the
// whole of `tensor`, to or from the rank `peerOffset` away from this one in
// its PP group (modulo the group's size), on `channel`.
struct TransferCall {
  bool send = true;
  TensorView tensor;
  int32_t peerOffset = 0;
  uint32_t channel = 0;
};

// Runs `call` on `comm`, tensor by tensor, from the host thread: the CPU's
// streams call it on their own threads.
absl::Status runCollective(Communicator &comm, const CollectiveCall &call);
// Enqueues `call` on a device communicator's `stream` (a GPU's streams):
// its tensors' calls in one group, launched together and watched as one.
absl::Status runCollective(DeviceCommunicator &comm,
                           const CollectiveCall &call, void *stream);

// Runs `call` on `pp`, the PP group's communicator, from the host thread:
// the peer is group rank (rank + peerOffset) mod size, the tag the channel,
// so each channel is matched in its own order. Blocks until done.
absl::Status runTransfer(Communicator &pp, const TransferCall &call);
// Enqueues `call` on `comm`, the device communicator of the call's channel
// over the PP group (which matches by order, without tags: each channel
// needs its own), on `stream`.
absl::Status runTransfer(DeviceCommunicator &comm, const TransferCall &call,
                         void *stream);

class StreamTarget {
public:
  virtual ~StreamTarget() = default;

  // The kernel context of launches on `stream` (a GPU's carries the
  // stream's handles); valid until the program has been issued.
  virtual const KernelContext &context(uint32_t stream) = 0;
  // `args.ctx` is context(stream).
  virtual absl::Status launch(uint32_t stream, const KernelDef &kernel,
                              const KernelArgs &args) = 0;
  // Stage (host staging block to arena) or readback (arena to staging).
  virtual absl::Status copy(uint32_t stream, CopyDirection direction,
                            uint8_t *to, const uint8_t *from,
                            uint64_t bytes) = 0;
  // Once `stream` gets here, `signal.event` reaches `signal.value`.
  virtual absl::Status record(uint32_t stream, const EventSignal &signal) = 0;
  // Nothing queued on `stream` after this starts before the record of
  // `signal` has run. That record was issued earlier.
  virtual absl::Status wait(uint32_t stream, const EventSignal &signal) = 0;
  // Queues `call` on `stream`. Its tensors stay valid.
  virtual absl::Status collective(uint32_t stream,
                                  const CollectiveCall &call) = 0;
  // Queues `call` on `stream`, which it holds until the transfer is done.
  // Its tensor stays valid.
  virtual absl::Status transfer(uint32_t stream, const TransferCall &call) = 0;
  // Once `stream` gets here, the attached schedule trace (if any) learns
  // of `call` (ScheduleTrace.h); nothing otherwise.
  virtual absl::Status mark(uint32_t stream, const MarkCall &call) = 0;
};

} // namespace braid
