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
//
// A send or receive waits for another rank, which may first need what this
// rank issues later in program order on another stream: run on the calling
// thread, it would hold that back. A program that transfers on stream 0
// therefore runs stream 0 on a worker too (begin's `inlineStream0`), and
// every stream then moves on its own, as a GPU's do.
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
  // stream), the profile that times stream 0's launches (null: none), the
  // trace that times its marks on every stream (null: none), and whether
  // stream 0 runs on the calling thread (false: on a worker, for programs
  // that transfer on it). Resets the events.
  void begin(const KernelContext &ctx, KernelProfile *profile,
             ScheduleTrace *trace = nullptr, bool inlineStream0 = true);
  // After issuing: returns once every stream has run all its work, with
  // the first error a collective or a transfer met (later work still ran,
  // except the collectives and transfers, which are skipped after a
  // failure).
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
  absl::Status transfer(uint32_t stream, const TransferCall &call) override;
  absl::Status mark(uint32_t stream, const MarkCall &call) override;

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
  ScheduleTrace *trace_ = nullptr;
  EventTimeline events_;
  // workers_[s - 1] runs stream s; started when first used.
  std::vector<std::unique_ptr<StreamWorker>> workers_;
  // Stream 0 when it does not run on the calling thread.
  bool inline0_ = true;
  std::unique_ptr<StreamWorker> worker0_;
};

} // namespace braid
