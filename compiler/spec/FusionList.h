// The fusions a compilation may apply, by the names braidc --fusion, the
// spec's compile.fusion and braid-opt's training pipeline use: one list and
// one parser for all three (docs/fusion.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace braid {

// Every fusion name, in the order the pipeline applies them. The pass of
// fusion NAME is braid-fuse-NAME.
const std::vector<std::string> &fusionNames();

// Parses a fusion list: "all", "none", or names separated by commas (spaces
// around them are ignored; "all" may stand among names, "none" may not).
// Returns the fusions chosen, in pipeline order; InvalidArgument with a
// sentence naming the problem and the valid names for an empty list, an
// empty or unknown name, or "none" beside names.
absl::StatusOr<std::vector<std::string>>
parseFusionNames(std::string_view text);

// Whether the list asks for every fusion ("all" in it).
bool namesEveryFusion(std::string_view text);

} // namespace braid
