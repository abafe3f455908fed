// The recompute policies of braid-recompute, by the text braidc
// --recompute and the spec's compile.recompute use: one parser for both
// (docs/memory.md, "Recompute").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace braid {

struct RecomputePolicy {
  enum class Kind {
    // Every activation the backward reads is kept.
    kNone,
    // Each transformer layer's forward runs again in its backward, from
    // the layer's input (Megatron's full recompute, uniform with 1 layer).
    kFull,
    // The layers in groups of `layers`, each group's forward again from
    // the group's input (Megatron's uniform method).
    kUniform,
    // The first `layers` layers recomputed whole, the others not
    // (Megatron's block method).
    kBlock,
    // The ops of the kinds in `ops` recomputed wherever a backward op
    // reads them (selective: the attention core; granular: norms,
    // activation functions, any op kinds).
    kOps,
    // For each pipeline rank, the policy of least recompute FLOPs whose
    // plan fits the memory budget (braid-recompute chooses).
    kAuto,
  };
  Kind kind = Kind::kNone;
  int64_t layers = 0;
  // Braid op names without the dialect ("rms_norm", "flash_attention");
  // "moe:NAME" counts only inside a mixture-of-experts block, "moe:*" is
  // every op of one (the MoE levels).
  std::vector<std::string> ops;
};

// Parses a policy: "none" (or nothing), "auto", "full", "uniform-N",
// "block-N" (N >= 1), "selective", or op kinds separated by commas: the groups
// "norm", "activation" and "attention", the MoE levels "moe-light",
// "moe-medium" and "moe-full", or the names of forward ops ("rms_norm",
// "rope"). InvalidArgument with a sentence naming what is
// wrong and what is accepted.
absl::StatusOr<RecomputePolicy> parseRecomputePolicy(std::string_view text);

// Parses policies separated by '|', one per pipeline stage in model order
// (as pipeline_layout's sections), or one for every stage: "full|none".
// "auto" chooses for every rank, so it stands alone.
absl::StatusOr<std::vector<RecomputePolicy>>
parseRecomputeStages(std::string_view text);

// The forward op kinds a policy may name, by op name.
const std::vector<std::string> &recomputableOps();

} // namespace braid
