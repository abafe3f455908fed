#include "runtime/device/cpu/CpuDevice.h"

#include <cstring>

namespace braid {

CpuDevice::CpuDevice(const LoadedPlan &plan, ThreadPool *pool)
    : plan_(plan), pool_(pool) {
  info_.kind = Device::kCPU;
  info_.name = "CPU";
  info_.threads = pool->size();
}

absl::StatusOr<std::unique_ptr<CpuDevice>>
CpuDevice::create(const LoadedPlan &plan, ThreadPool *pool) {
  absl::StatusOr<CpuArena> arena =
      CpuArena::create(plan.proto.memory().arena_bytes());
  if (!arena.ok())
    return arena.status();
  std::unique_ptr<CpuDevice> device(new CpuDevice(plan, pool));
  device->arena_ = std::move(*arena);
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::create(plan, device->arena_.data(), device->arena_.size());
  if (!executor.ok())
    return executor.status();
  device->executor_ = std::move(*executor);
  return device;
}

absl::Status CpuDevice::read(uint64_t offset, void *out, uint64_t bytes) {
  if (bytes > 0)
    std::memcpy(out, arena_.data() + offset, bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::write(uint64_t offset, const void *in, uint64_t bytes) {
  if (bytes > 0)
    std::memcpy(arena_.data() + offset, in, bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::zero(uint64_t offset, uint64_t bytes) {
  if (bytes > 0)
    std::memset(arena_.data() + offset, 0, bytes);
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<uint8_t>> CpuDevice::stageInput(uint32_t tensor) {
  const plan::Tensor &t = plan_.proto.tensors(tensor);
  return absl::Span<uint8_t>(arena_.data() + t.offset(), t.size_bytes());
}

absl::Status CpuDevice::run(std::string_view program,
                            const StepValues &values) {
  KernelContext ctx;
  ctx.step = values.step;
  ctx.update = values.update;
  ctx.microBatch = values.microBatch;
  ctx.lr = values.lr;
  ctx.seed = values.seed;
  ctx.pool = pool_;
  absl::Status s = executor_->run(program, ctx);
  if (s.ok())
    ++stats_.eagerRuns;
  return s;
}

absl::Status CpuDevice::requestScalar(uint32_t tensor) {
  float v;
  std::memcpy(&v, arena_.data() + plan_.proto.tensors(tensor).offset(),
              sizeof v);
  scalars_.push_back(v);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CpuDevice::collectScalars() {
  std::vector<float> out;
  out.swap(scalars_);
  return out;
}

} // namespace braid
