// The plan's memory report, as braid-run prints it at start-up.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/plan/plan.pb.h"

namespace braid {

// One line: "memory per rank: parameters 1.06 MiB | gradients 1.06 MiB |
// optimizer state 2.12 MiB | inputs 4.00 KiB | activations peak 3.50 MiB
// (saved 1.20 MiB) | arena 7.75 MiB".
// A bf16 plan (`precision` "bf16", precisionName of its TrainConfig) says
// so and adds its weight copies:
// "memory per rank (bf16): parameters 1.06 MiB | weight copies 543 KiB |
// gradients ...".
// A plan that offloads activations ends with its host arena (pinned host
// memory on a GPU): "... | arena 7.75 MiB | host arena 1.50 MiB".
// A pipeline rank's report (`pipelineRank` its PP coordinate, -1 for none)
// is its own stage's: "memory per rank (pipeline rank 1): ...".
std::string formatMemoryReport(const plan::MemoryReport &memory,
                               const std::string &precision = "fp32",
                               int64_t pipelineRank = -1);

} // namespace braid
