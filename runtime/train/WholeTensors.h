// Checkpoints of a plan that shards its parameters and moments (ZeRO along
// DP, tensor parallelism along TP) or is one rank of a pipeline: the files
// hold the whole model's tensors, whole, as every layout's do, so that any
// layout can resume from any other. Saving assembles them in a host image:
// each rank's shards gathered over its group along the shard's axis and
// laid out as the whole tensor (runtime/plan/ShardLayout.h), and every
// pipeline rank's tensors sent to PP rank 0 (the writer, world rank 0, is
// at coordinate 0 on every axis). Resuming reads the whole tensors and
// keeps this rank's: its stage's, and of those its part.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Mesh.h"
#include "runtime/device/DeviceBackend.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

class WholeTensors {
public:
  // Whether `plan` shards a checkpointed tensor: only then does a plan that
  // is no pipeline stage need a WholeTensors.
  static bool needed(const LoadedPlan &plan);
  // The checkpointed tensors (parameters and their moments, and the
  // buffers: untrained state such as expert biases) of `local`, the
  // plan this rank runs, which must outlive this. A pipeline rank also
  // passes its PP coordinate `stage` and every stage's plan (`stages`, whose
  // entry `stage` is not read: `local` stands for it); the image then holds
  // every stage's tensors, stage after stage.
  explicit WholeTensors(const LoadedPlan &local,
                        const std::vector<LoadedPlan> &stages = {},
                        int64_t stage = 0);

  // The checkpointed tensors of the whole model, each whole, at its offset
  // in an image of imageBytes(), with the run's header: what the
  // checkpoint files are written from and read into. Holds nothing else
  // (no programs, inputs or gradients).
  const LoadedPlan &plan() const { return whole_; }
  uint64_t imageBytes() const { return imageBytes_; }
  // The ids in plan() of this rank's stage's tensors: the only ones a
  // resume needs in its image (scatter reads no others).
  const absl::flat_hash_set<uint32_t> &mine() const { return mine_; }

  // The communicator of this rank's group a plan's axis names
  // (Ranks::group): gather assembles a tensor sharded along an axis over
  // that group.
  using AxisGroups = std::function<Communicator &(plan::MeshAxis)>;

  // Fills `image` with this rank's tensors from the device, each sharded
  // one gathered over `groups(its shard's axis)` and rearranged into the
  // whole tensor's layout (every rank of each group calls it, in the same
  // order). With `pp`, the PP group's communicator, every rank of the group
  // then calls it too: PP rank 0 receives every other stage's tensors into
  // its image, and the others send theirs. Without it only this rank's are
  // filled.
  absl::Status gather(DeviceBackend &device, const AxisGroups &groups,
                      Communicator *pp, uint8_t *image) const;
  // Writes this rank's tensors of `image` to the device: of a sharded one,
  // the part the rank at mesh coordinates `coords` holds (Ranks::coords).
  absl::Status scatter(const uint8_t *image, const MeshCoords &coords,
                       DeviceBackend &device) const;

private:
  struct Entry {
    int64_t stage;        // the PP coordinate whose plan holds it
    uint32_t id;          // in that stage's plan
    uint64_t wholeOffset; // in the image
    uint64_t wholeBytes;
    bool sharded;
  };
  const LoadedPlan &local_;
  int64_t stage_;
  int64_t numStages_;
  LoadedPlan whole_;
  std::vector<Entry> tensors_;
  absl::flat_hash_set<uint32_t> mine_;
  uint64_t imageBytes_ = 0;
};

} // namespace braid
