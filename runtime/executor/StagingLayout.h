// Where the host keeps what a step program stages in and reads back: the
// values of each INPUT tensor for every micro-batch of the step, then the
// readback slots (one f32 each). One block of host memory, laid out once
// from the plan; the CPU device keeps it in ordinary memory, the CUDA
// device in pinned memory that the program's copies read and write.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

// A Stage or Readback instruction bound to memory: in iteration i of a
// Repeat body it copies `bytes` bytes from from + i * fromStride to
// to + i * toStride (host to device for a stage, device to host for a
// readback).
struct HostCopy {
  const uint8_t *from = nullptr;
  uint8_t *to = nullptr;
  uint64_t bytes = 0;
  uint64_t fromStride = 0, toStride = 0;

  const uint8_t *source(int64_t iteration) const {
    return from + iteration * fromStride;
  }
  uint8_t *destination(int64_t iteration) const {
    return to + iteration * toStride;
  }
};

class StagingLayout {
public:
  explicit StagingLayout(const LoadedPlan &plan);

  uint64_t bytes() const { return bytes_; }
  // Offset of micro-batch `microBatch`'s values of INPUT tensor `tensor`
  // (tensor-sized); nullopt when `tensor` is not an INPUT or `microBatch`
  // is not one of the step's.
  std::optional<uint64_t> inputOffset(uint32_t tensor,
                                      int64_t microBatch) const;
  // Bytes from one micro-batch's values of an INPUT tensor to the next's.
  uint64_t inputStride(uint32_t tensor) const;
  // Offset of readback slot `slot` (< numReadbacks()).
  uint64_t readbackOffset(uint32_t slot) const {
    return readbackBase_ + uint64_t{slot} * sizeof(float);
  }
  uint32_t numReadbacks() const { return numReadbacks_; }

  // The offset inputOffset gives, or InvalidArgument naming the tensor and
  // micro-batch: what a device's stageInput answers a bad request with.
  absl::StatusOr<uint64_t> checkedInputOffset(uint32_t tensor,
                                              int64_t microBatch) const;

  // Binds Stage or Readback `inst` of a loaded plan (which checked its
  // tensor, micro-batch and slot): `tensor` is where its tensor lives,
  // `staging` the host block laid out by this layout.
  HostCopy bind(const LoadedInstruction &inst, uint8_t *tensor,
                uint8_t *staging) const;

private:
  struct Input {
    uint64_t base = 0;  // offset of micro-batch 0
    uint64_t bytes = 0; // one micro-batch's values
  };
  absl::flat_hash_map<uint32_t, Input> inputs_;
  int64_t numMicroBatches_ = 0;
  uint64_t readbackBase_ = 0;
  uint32_t numReadbacks_ = 0;
  uint64_t bytes_ = 0;
};

} // namespace braid
