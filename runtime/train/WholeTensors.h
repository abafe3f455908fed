// Checkpoints of a plan that shards its parameters and moments (ZeRO): the
// files hold whole tensors, as every layout's do, so that any layout can
// resume from any other. Saving gathers each rank's shards into a host
// image of the whole tensors; resuming reads the whole tensors and keeps
// this rank's rows.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/Communicator.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

class WholeTensors {
public:
  // Whether `plan` shards a checkpointed tensor: only then is a
  // WholeTensors needed.
  static bool needed(const LoadedPlan &plan);
  explicit WholeTensors(const LoadedPlan &plan);

  // `plan` with every checkpointed tensor whole, at its offset in an image
  // of imageBytes(): what the checkpoint files are written from and read
  // into.
  const LoadedPlan &plan() const { return whole_; }
  uint64_t imageBytes() const { return imageBytes_; }

  // Fills `image` from the device: each rank's shard, gathered over `group`
  // (every rank of the group calls it), or the tensor as it is.
  absl::Status gather(DeviceBackend &device, Communicator &group,
                      uint8_t *image) const;
  // Writes this rank's part (shard `index` of the group's) of each tensor of
  // `image` to the device.
  absl::Status scatter(const uint8_t *image, int64_t index,
                       DeviceBackend &device) const;

private:
  struct Entry {
    uint32_t id;          // in the run's plan
    uint64_t wholeOffset; // in the image
    bool sharded;
  };
  const LoadedPlan &local_;
  LoadedPlan whole_;
  std::vector<Entry> tensors_;
  uint64_t imageBytes_ = 0;
};

} // namespace braid
