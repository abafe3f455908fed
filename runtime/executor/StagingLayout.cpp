#include "runtime/executor/StagingLayout.h"

#include "absl/strings/str_cat.h"

namespace braid {
namespace {

// Every region starts on a cache line.
uint64_t alignUp(uint64_t v) { return (v + 63) / 64 * 64; }

} // namespace

StagingLayout::StagingLayout(const LoadedPlan &plan)
    : numMicroBatches_(plan.proto.train().num_micro_batches()),
      numReadbacks_(plan.proto.num_readbacks()) {
  // The loader bounds the tensors' sizes and the micro-batches of a step
  // (plan.train), so these sums cannot overflow.
  for (const plan::Tensor &t : plan.proto.tensors()) {
    if (t.kind() != plan::INPUT)
      continue;
    inputs_[t.id()] = Input{bytes_, t.size_bytes()};
    bytes_ += alignUp(t.size_bytes()) * static_cast<uint64_t>(numMicroBatches_);
  }
  readbackBase_ = bytes_;
  bytes_ += alignUp(uint64_t{numReadbacks_} * sizeof(float));
}

std::optional<uint64_t> StagingLayout::inputOffset(uint32_t tensor,
                                                   int64_t microBatch) const {
  auto it = inputs_.find(tensor);
  if (it == inputs_.end() || microBatch < 0 || microBatch >= numMicroBatches_)
    return std::nullopt;
  return it->second.base +
         alignUp(it->second.bytes) * static_cast<uint64_t>(microBatch);
}

absl::StatusOr<uint64_t>
StagingLayout::checkedInputOffset(uint32_t tensor, int64_t microBatch) const {
  std::optional<uint64_t> offset = inputOffset(tensor, microBatch);
  if (!offset)
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", tensor, " micro-batch ", microBatch,
                     " is not an INPUT of a step of the plan"));
  return *offset;
}

HostCopy StagingLayout::bind(const LoadedInstruction &inst, uint8_t *tensor,
                             uint8_t *staging) const {
  HostCopy copy;
  if (inst.kind == LoadedInstruction::Kind::kStage) {
    copy.from = staging + *inputOffset(inst.tensor, inst.microBatch);
    copy.to = tensor;
    copy.bytes = inputs_.at(inst.tensor).bytes;
    copy.fromStride = inputStride(inst.tensor);
  } else {
    copy.from = tensor;
    copy.to = staging + readbackOffset(inst.slot);
    copy.bytes = sizeof(float);
    copy.toStride = sizeof(float);
  }
  return copy;
}

uint64_t StagingLayout::inputStride(uint32_t tensor) const {
  auto it = inputs_.find(tensor);
  return it == inputs_.end() ? 0 : alignUp(it->second.bytes);
}

} // namespace braid
