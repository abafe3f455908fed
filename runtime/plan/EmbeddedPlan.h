// Self-contained training binaries: braid-run with a plan appended.
//
// Layout of such a binary: the runtime executable's bytes unchanged, then the
// plan's bytes, then the plan length as 8 bytes little-endian, then the 8-byte
// magic "BRAIDPL1". The ELF loader ignores bytes past the last segment, so the
// result runs like the runtime itself, and braid-run finds its plan by
// reading its own trailer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace braid {

// Writes `outPath` (mode 0755): a copy of `runtimeExe` with `planBytes`
// embedded. If `runtimeExe` already carries a plan, that plan is replaced.
// The file appears atomically (written beside `outPath`, then renamed).
absl::Status writeBinaryWithPlan(const std::string &runtimeExe,
                                 std::string_view planBytes,
                                 const std::string &outPath);

// The plan embedded in the executable at `exePath` (braid-run passes
// "/proc/self/exe"), or nullopt when it carries none. A trailer whose length
// does not fit the file is an error naming both sizes.
absl::StatusOr<std::optional<std::string>>
readEmbeddedPlan(const std::string &exePath);

} // namespace braid
