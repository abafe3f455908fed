#include "runtime/device/cpu/CpuDevice.h"

#include <cstring>

namespace braid {

CpuDevice::CpuDevice(const LoadedPlan &plan, int numThreads,
                     const Ranks *ranks)
    : plan_(plan), pool_(numThreads), layout_(plan),
      staging_(layout_.bytes()),
      streams_(plan.proto.num_streams(), plan.proto.num_events(), ranks) {
  info_.kind = Device::kCPU;
  info_.name = "CPU";
  info_.threads = pool_.size();
}

absl::StatusOr<std::unique_ptr<CpuDevice>>
CpuDevice::create(const LoadedPlan &plan, int numThreads,
                  const Ranks *ranks) {
  absl::StatusOr<CpuArena> arena =
      CpuArena::create(plan.proto.memory().arena_bytes());
  if (!arena.ok())
    return arena.status();
  absl::StatusOr<CpuArena> hostArena =
      CpuArena::create(plan.proto.memory().host_bytes(), "the host arena");
  if (!hostArena.ok())
    return hostArena.status();
  std::unique_ptr<CpuDevice> device(new CpuDevice(plan, numThreads, ranks));
  device->arena_ = std::move(*arena);
  device->hostArena_ = std::move(*hostArena);
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::create(plan, device->arena_.data(), device->arena_.size(),
                       device->hostArena_.data(), device->hostArena_.size(),
                       device->staging_.data(), device->layout_,
                       ranks ? MicroBatchMap{ranks->dpSize(), ranks->dpRank()}
                             : MicroBatchMap{});
  if (!executor.ok())
    return executor.status();
  device->executor_ = std::move(*executor);
  return device;
}

namespace {

// Both arenas are ordinary memory that every call finds idle (a run's work
// has finished when it returns): copies and clears are plain memory ops.
absl::Status readFrom(CpuArena &arena, uint64_t offset, void *out,
                      uint64_t bytes) {
  if (bytes > 0)
    std::memcpy(out, arena.data() + offset, bytes);
  return absl::OkStatus();
}

absl::Status writeTo(CpuArena &arena, uint64_t offset, const void *in,
                     uint64_t bytes) {
  if (bytes > 0)
    std::memcpy(arena.data() + offset, in, bytes);
  return absl::OkStatus();
}

absl::Status zeroIn(CpuArena &arena, uint64_t offset, uint64_t bytes) {
  if (bytes > 0)
    std::memset(arena.data() + offset, 0, bytes);
  return absl::OkStatus();
}

} // namespace

absl::Status CpuDevice::read(uint64_t offset, void *out, uint64_t bytes) {
  return readFrom(arena_, offset, out, bytes);
}

absl::Status CpuDevice::write(uint64_t offset, const void *in, uint64_t bytes) {
  return writeTo(arena_, offset, in, bytes);
}

absl::Status CpuDevice::zero(uint64_t offset, uint64_t bytes) {
  return zeroIn(arena_, offset, bytes);
}

absl::Status CpuDevice::readHost(uint64_t offset, void *out, uint64_t bytes) {
  return readFrom(hostArena_, offset, out, bytes);
}

absl::Status CpuDevice::writeHost(uint64_t offset, const void *in,
                                  uint64_t bytes) {
  return writeTo(hostArena_, offset, in, bytes);
}

absl::Status CpuDevice::zeroHost(uint64_t offset, uint64_t bytes) {
  return zeroIn(hostArena_, offset, bytes);
}

absl::StatusOr<absl::Span<uint8_t>>
CpuDevice::stageInput(uint32_t tensor, int64_t microBatch) {
  absl::StatusOr<uint64_t> offset =
      layout_.checkedInputOffset(tensor, microBatch);
  if (!offset.ok())
    return offset.status();
  return absl::Span<uint8_t>(staging_.data() + *offset,
                             plan_.proto.tensors(tensor).size_bytes());
}

absl::Status CpuDevice::run(plan::ProgramKind kind, const StepValues &values) {
  KernelContext ctx;
  ctx.step = values.step;
  ctx.update = values.update;
  ctx.lr = values.lr;
  ctx.seed = values.seed;
  ctx.tpRank = values.tpRank;
  ctx.tpSize = values.tpSize;
  ctx.cpRank = values.cpRank;
  ctx.cpSize = values.cpSize;
  ctx.epRank = values.epRank;
  ctx.pool = &pool_;
  if (kind == plan::STEP) {
    counters_.activationsKept = 0;
    counters_.activationsRecomputed = 0;
    counters_.replicationOn = 0;
    counters_.replicationOff = 0;
    ctx.counters = &counters_;
  }
  absl::StatusOr<const Executor::Program *> program =
      executor_->program(kind);
  if (!program.ok())
    return program.status();
  // CpuStreams.h: a transfer on stream 0 must not hold the issue of the
  // other streams' work.
  bool inlineStream0 = true;
  for (const Executor::Op &op : (*program)->ops)
    if (op.stream == 0 && (op.kind == LoadedInstruction::Kind::kSend ||
                           op.kind == LoadedInstruction::Kind::kRecv))
      inlineStream0 = false;
  streams_.begin(ctx, profile_, kind == plan::STEP ? trace_ : nullptr,
                 inlineStream0);
  absl::Status s = executor_->issue(**program, streams_);
  absl::Status ran = streams_.finish();
  if (s.ok())
    s = ran;
  if (s.ok())
    ++stats_.eagerRuns;
  return s;
}

absl::StatusOr<std::vector<float>> CpuDevice::readbacks() {
  std::vector<float> out(layout_.numReadbacks());
  if (!out.empty())
    std::memcpy(out.data(), staging_.data() + layout_.readbackOffset(0),
                out.size() * sizeof(float));
  return out;
}

} // namespace braid
