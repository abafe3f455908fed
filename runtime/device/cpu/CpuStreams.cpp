#include "runtime/device/cpu/CpuStreams.h"

#include <chrono>
#include <cstring>
#include <utility>

namespace braid {

CpuStreams::CpuStreams(uint32_t numStreams, uint32_t numEvents,
                       const Ranks *ranks)
    : ranks_(ranks), events_(numEvents),
      workers_(numStreams > 0 ? numStreams - 1 : 0) {}

void CpuStreams::begin(const KernelContext &ctx, KernelProfile *profile,
                       ScheduleTrace *trace, bool inlineStream0) {
  ctx_ = ctx;
  profile_ = profile;
  trace_ = trace;
  inline0_ = inlineStream0;
  events_.reset();
  error_ = absl::OkStatus();
}

absl::Status CpuStreams::finish() {
  if (worker0_)
    worker0_->drain();
  for (std::unique_ptr<StreamWorker> &w : workers_)
    if (w)
      w->drain();
  std::lock_guard<std::mutex> lock(errorMutex_);
  return error_;
}

void CpuStreams::fail(absl::Status status) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (error_.ok())
    error_ = std::move(status);
}

bool CpuStreams::failed() {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return !error_.ok();
}

template <typename Work> void CpuStreams::on(uint32_t stream, Work &&work) {
  if (stream == 0 && inline0_) {
    work();
    return;
  }
  std::unique_ptr<StreamWorker> &worker =
      stream == 0 ? worker0_ : workers_[stream - 1];
  if (!worker)
    worker = std::make_unique<StreamWorker>();
  worker->post(std::forward<Work>(work));
}

absl::Status CpuStreams::launch(uint32_t stream, const KernelDef &kernel,
                                const KernelArgs &args) {
  if (stream == 0 && profile_ != nullptr) {
    // One thread runs stream 0, whichever it is, so only it adds.
    on(0, [&kernel, args, profile = profile_] {
      using Clock = std::chrono::steady_clock;
      const auto start = Clock::now();
      kernel.run(args);
      profile->add(kernel.name, std::chrono::duration<double>(Clock::now() -
                                                              start)
                                    .count());
    });
    return absl::OkStatus();
  }
  on(stream, [&kernel, args] { kernel.run(args); });
  return absl::OkStatus();
}

absl::Status CpuStreams::copy(uint32_t stream, CopyDirection, uint8_t *to,
                              const uint8_t *from, uint64_t bytes) {
  on(stream, [to, from, bytes] { std::memcpy(to, from, bytes); });
  return absl::OkStatus();
}

absl::Status CpuStreams::record(uint32_t stream, const EventSignal &signal) {
  on(stream, [this, signal] { events_.record(signal.event, signal.value); });
  return absl::OkStatus();
}

absl::Status CpuStreams::wait(uint32_t stream, const EventSignal &signal) {
  on(stream, [this, signal] { events_.wait(signal.event, signal.value); });
  return absl::OkStatus();
}

absl::Status CpuStreams::collective(uint32_t stream,
                                    const CollectiveCall &call) {
  if (ranks_ == nullptr && call.axis != plan::AXIS_UNSPECIFIED)
    return absl::FailedPreconditionError(
        "the plan runs collectives, but this device was made without the "
        "run's ranks");
  on(stream, [this, call] {
    // After a failed collective the rank ends: each later one would wait
    // out the watchdog again for the same missing rank.
    if (failed())
      return;
    if (absl::Status s = runCollective(ranks_->group(call.axis), call);
        !s.ok())
      fail(std::move(s));
  });
  return absl::OkStatus();
}

absl::Status CpuStreams::transfer(uint32_t stream, const TransferCall &call) {
  if (ranks_ == nullptr)
    return absl::FailedPreconditionError(
        "the plan sends and receives along the pipeline, but this device was "
        "made without the run's ranks");
  on(stream, [this, call] {
    // As after a failed collective: the peer is gone or stuck, and each
    // later transfer would wait out the watchdog for it again.
    if (failed())
      return;
    if (absl::Status s = runTransfer(ranks_->axis(MeshAxis::kPP), call);
        !s.ok())
      fail(std::move(s));
  });
  return absl::OkStatus();
}

absl::Status CpuStreams::mark(uint32_t stream, const MarkCall &call) {
  if (trace_ == nullptr)
    return absl::OkStatus();
  on(stream, [trace = trace_, stream, call] {
    trace->mark(stream, call, ScheduleTrace::Clock::now(), threadCpuSeconds());
  });
  return absl::OkStatus();
}

} // namespace braid
