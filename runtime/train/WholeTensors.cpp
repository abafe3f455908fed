#include "runtime/train/WholeTensors.h"

#include <vector>

#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/PlanFormat.h"

namespace braid {
namespace {

uint64_t alignUp(uint64_t v) {
  return (v + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
}

// The checkpointed tensors of `plan`: each parameter and its moments.
template <typename F> void forEachStored(const LoadedPlan &plan, F f) {
  for (uint32_t param : plan.parameters) {
    const plan::ParameterInfo &info = plan.proto.tensors(param).param();
    for (uint32_t id : {param, info.exp_avg(), info.exp_avg_sq()})
      f(id);
  }
}

} // namespace

bool WholeTensors::needed(const LoadedPlan &plan) {
  bool sharded = false;
  forEachStored(plan, [&](uint32_t id) {
    sharded = sharded || plan.proto.tensors(id).has_shard();
  });
  return sharded;
}

WholeTensors::WholeTensors(const LoadedPlan &plan)
    : local_(plan), whole_(plan) {
  forEachStored(plan, [&](uint32_t id) {
    plan::Tensor &t = *whole_.proto.mutable_tensors(id);
    const bool sharded = t.has_shard();
    if (sharded) {
      t.mutable_shape()->CopyFrom(t.shard().global_shape());
      t.set_size_bytes(t.size_bytes() *
                       static_cast<uint64_t>(plan_checks::meshAxisSize(
                           plan.proto.mesh(), t.shard().axis())));
      t.clear_shard();
      whole_.descs[id].shape.assign(t.shape().begin(), t.shape().end());
    }
    tensors_.push_back({id, imageBytes_, sharded});
    t.set_offset(imageBytes_);
    imageBytes_ = alignUp(imageBytes_ + t.size_bytes());
  });
}

absl::Status WholeTensors::gather(DeviceBackend &device, Communicator &group,
                                  uint8_t *image) const {
  std::vector<uint8_t> part;
  for (const Entry &e : tensors_) {
    const plan::Tensor &t = local_.proto.tensors(e.id);
    uint8_t *out = image + e.wholeOffset;
    if (!e.sharded) {
      if (absl::Status s = device.read(t.offset(), out, t.size_bytes());
          !s.ok())
        return s;
      continue;
    }
    part.resize(t.size_bytes());
    if (absl::Status s = device.read(t.offset(), part.data(), part.size());
        !s.ok())
      return s;
    if (absl::Status s = group.allGather(part.data(), out,
                                         local_.descs[e.id].numel(),
                                         local_.descs[e.id].dtype);
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

absl::Status WholeTensors::scatter(const uint8_t *image, int64_t index,
                                   DeviceBackend &device) const {
  for (const Entry &e : tensors_) {
    const plan::Tensor &t = local_.proto.tensors(e.id);
    const uint8_t *in = image + e.wholeOffset +
                        (e.sharded ? static_cast<uint64_t>(index) *
                                         t.size_bytes()
                                   : 0);
    if (absl::Status s = device.write(t.offset(), in, t.size_bytes());
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

} // namespace braid
