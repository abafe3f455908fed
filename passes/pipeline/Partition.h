// The partition: which layers each pipeline stage holds. Stages are in
// model order (stage 0 has the embedding, the last the loss); where each
// sits (rank, chunk) is the schedule family's Placement.
//
// Empty layers (padding) bring every stage to the same number of layer
// slots, the shape the schedules are drawn for: 61 layers over 16 stages
// take 4 slots each, 64 in all, 3 of them empty. An empty layer is
// metadata only: it runs nothing and holds no memory. Real layers keep
// their model indices (and so their checkpoint names) wherever padding
// goes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pipeline/Schedule.h"

namespace braid::pipeline {

struct StageLayers {
  int64_t first = 0;   // the model index of its first layer
  int64_t layers = 0;  // real layers: first .. first + layers - 1
  int64_t padding = 0; // empty layers
  bool embedding = false;
  bool loss = false;
};

struct Partition {
  Placement placement;
  std::vector<StageLayers> stages; // model order

  int64_t padding() const; // empty layers over all stages
  // "stage 3 (rank 1, chunk 1): layers 12-15, 1 empty layer", one line
  // per stage.
  std::vector<std::string> describe() const;
};

// Relative forward costs that balance the automatic partition: one
// transformer layer, the embedding and the loss (LM head and
// cross-entropy), in any unit (FLOPs per token, say).
struct PartitionCosts {
  double layer = 1;
  double embedding = 0;
  double loss = 0;
};

// The automatic partition of `layers` over `placement`'s stages, balanced
// by cost: every stage has the same number of slots, ceil(layers /
// stages) or more where the embedding's or the loss's cost is worth a
// layer or more; the empty ones go, one at a time, to the rank that costs
// most (the sum of its stages, the embedding and the loss counted), to its
// dearest stage, the later stage on a tie, and every stage keeps a layer.
// More stages than layers is an error.
absl::StatusOr<Partition> partitionLayers(int64_t layers,
                                          const Placement &placement,
                                          const PartitionCosts &costs);

// An explicit layout, `pipeline_layout` in the spec: stages in model order
// separated by '|', each a sequence of E (the embedding), t (a layer), p (an
// empty layer) and L (the loss), any of them followed by *N for N of them;
// spaces are ignored. For example, 14 layers over 4 stages:
//   "E t*3 p | t*4 | t*4 | t*3 p L"
// E opens the first stage and L closes the last; the t's sum to `layers`;
// there is one stage per placement stage.
absl::StatusOr<Partition> parseLayout(const std::string &layout, int64_t layers,
                                      const Placement &placement);

// The partition the spec asks for: its `layout` (pipeline_layout) where
// it gives one, otherwise the automatic one balanced by `costs`.
absl::StatusOr<Partition> makePartition(int64_t layers,
                                        const Placement &placement,
                                        const std::string &layout,
                                        const PartitionCosts &costs);

} // namespace braid::pipeline
