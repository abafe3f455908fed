// The CUDA device's pinned staging (CudaDeviceImpl.h): the step's inputs and
// readback slots, and the ring of step values copied in before each run.
#include <cstring>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/CudaDeviceImpl.h"
#include "runtime/device/cuda/CudaStatus.h"

namespace braid::cuda_device {

absl::StatusOr<absl::Span<uint8_t>>
CudaDevice::stageInput(uint32_t tensor, int64_t microBatch) {
  absl::StatusOr<uint64_t> offset =
      layout_.checkedInputOffset(tensor, microBatch);
  if (!offset.ok())
    return offset.status();
  // The previous step's copies must have read the block before it is
  // refilled.
  if (stagingPending_) {
    if (absl::Status s = hostWait(stagingDone_.get(), "cudaEventSynchronize");
        !s.ok())
      return s;
    stagingPending_ = false;
  }
  return absl::Span<uint8_t>(static_cast<uint8_t *>(staging_.get()) + *offset,
                             plan_.proto.tensors(tensor).size_bytes());
}

// Stream 0, before the program: this run's step values, from pinned memory.
absl::Status CudaDevice::copyIn(const StepValues &values) {
  const int slot = nextStepSlot_;
  nextStepSlot_ = (nextStepSlot_ + 1) % kStepSlots;
  if (stepPending_[slot]) {
    if (absl::Status s =
            hostWait(stepCopied_[slot].get(), "cudaEventSynchronize");
        !s.ok())
      return s;
  }
  StepValues *host = static_cast<StepValues *>(stepHost_.get()) + slot;
  *host = values;
  BRAID_CUDA_TRY(cudaMemcpyAsync(at(stepValuesOffset_), host,
                                 sizeof(StepValues), cudaMemcpyHostToDevice,
                                 stream(0)));
  // Host-stream launches read the values from hostContext_, which this
  // sets on stream 0 before the run forks (outside any graph, like the
  // copy): before the slot's event, so that the slot is reused only after
  // it was read.
  if (hostStreams_) {
    hostValueArgs_[slot] = HostValues{this, host};
    BRAID_CUDA_TRY(
        cudaLaunchHostFunc(stream(0), setHostValues, &hostValueArgs_[slot]));
  }
  BRAID_CUDA_TRY(cudaEventRecord(stepCopied_[slot].get(), stream(0)));
  stepPending_[slot] = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CudaDevice::readbacks() {
  if (absl::Status s = hostWaitStream(0); !s.ok())
    return s;
  stagingPending_ = false;
  std::vector<float> out(layout_.numReadbacks());
  if (!out.empty())
    std::memcpy(out.data(),
                static_cast<const uint8_t *>(staging_.get()) +
                    layout_.readbackOffset(0),
                out.size() * sizeof(float));
  return out;
}

} // namespace braid::cuda_device
