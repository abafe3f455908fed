// The CPU's streams as the executor's target (StreamTarget.h). Stream 0 is
// the calling thread: its work runs as it is issued, with no hand-off, so a
// one-stream plan costs a function call per instruction. Every other
// stream is a StreamWorker thread that runs its work in queue order. Events
// are an EventTimeline.
//
// Why this cannot hang: a wait names a record issued before it (the
// loader's timeline rules), so that record is already done on stream 0 or
// queued on its worker ahead of anything issued later. By induction over
// program order, every wait is eventually released.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/comm/Ranks.h"
#include "runtime/executor/StreamTarget.h"
#include "runtime/device/cpu/EventTimeline.h"
#include "runtime/device/cpu/StreamWorker.h"
#include "runtime/profile/KernelProfile.h"

namespace braid {

class CpuStreams final : public StreamTarget {
public:
  // `ranks` (null: a single-rank run) gives the collectives' groups.
  CpuStreams(uint32_t numStreams, uint32_t numEvents, const Ranks *ranks);

  // Before issuing a program: the context of its launches (on every
  // stream), and the profile that times stream 0's launches (null: none).
  // Resets the events.
  void begin(const KernelContext &ctx, KernelProfile *profile);
  // After issuing: returns once every stream has run all its work, with
  // the first error a collective met (later work still ran, except the
  // collectives, which are skipped after a failure).
  absl::Status finish();

  const KernelContext &context(uint32_t) override { return ctx_; }
  absl::Status launch(uint32_t stream, const KernelDef &kernel,
                      const KernelArgs &args) override;
  absl::Status copy(uint32_t stream, CopyDirection direction, uint8_t *to,
                    const uint8_t *from, uint64_t bytes) override;
  absl::Status record(uint32_t stream, const EventSignal &signal) override;
  absl::Status wait(uint32_t stream, const EventSignal &signal) override;
  absl::Status collective(uint32_t stream,
                          const CollectiveCall &call) override;

private:
  // Runs `work` now on stream 0, or queues it on its worker.
  template <typename Work> void on(uint32_t stream, Work &&work);

  // Keeps the first error of work that ran on a worker thread.
  void fail(absl::Status status);
  bool failed();

  const Ranks *ranks_;
  KernelContext ctx_;
  std::mutex errorMutex_;
  absl::Status error_;
  KernelProfile *profile_ = nullptr;
  EventTimeline events_;
  // workers_[s - 1] runs stream s; started when first used.
  std::vector<std::unique_ptr<StreamWorker>> workers_;
};

} // namespace braid
