// The offload targets of compile.offload and braidc --offload: which saved
// activations go to host memory between their forward and their backward,
// and whether the optimizer (fp32 masters, Adam moments, AdamW) lives on
// the host (docs/memory.md, "Offload: the spec"). One parser for the
// spec's rules, braidc and the compiler passes.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace braid {

struct OffloadTargets {
  bool allLayers = false;      // "activations"
  std::vector<int64_t> layers; // sorted, unique, from N and N-M items
  std::vector<int64_t> stages; // sorted, unique, from stage-S items
  bool optimizer = false;      // "optimizer"
  // Whether no activation is offloaded (the optimizer may be).
  bool noActivations() const {
    return !allLayers && layers.empty() && stages.empty();
  }
  bool empty() const { return noActivations() && !optimizer; }
};

// The largest layer or stage number an item may name. It bounds what a
// range expands to (2^20 layers at most, whatever the text), and no model
// has that many layers.
inline constexpr int64_t kMaxOffloadIndex = (int64_t{1} << 20) - 1;

// Parses compile.offload: "" or "none" (nothing), or one or two targets
// separated by ";", each at most once: "optimizer" (masters, moments and
// AdamW on the host), "activations" (every transformer layer's), or
// "activations:" followed by items separated by commas, each a layer "N",
// a range of layers "N-M" (inclusive, N <= M) or a pipeline stage
// "stage-S", in global 0-based numbers; spaces around items are ignored. InvalidArgument with a sentence naming what is wrong
// and what is accepted. Whether the layers and stages exist is the
// caller's question (checkOffloadTargetsExist).
absl::StatusOr<OffloadTargets> parseOffloadTargets(std::string_view text);

// Whether every layer and stage `targets` names exists in a model of
// `layers` layers laid out over `stages` pipeline stages (`ranks` pipeline
// ranks of stages / ranks chunks each). InvalidArgument naming the missing
// ones and what exists, e.g. "layer 7 does not exist: the model has 2
// layers (0-1)".
absl::Status checkOffloadTargetsExist(const OffloadTargets &targets,
                                      int64_t layers, int64_t stages,
                                      int64_t ranks);

} // namespace braid
