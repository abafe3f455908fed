// Self-contained training binaries: braid-run with a plan appended.
//
// Layout of such a binary: the runtime executable's bytes unchanged, then the
// plan's bytes, then the plan length as 8 bytes little-endian, then the 8-byte
// magic "BRAIDPL1". The ELF loader ignores bytes past the last segment, so the
// result runs like the runtime itself, and braid-run finds its plan by
// reading its own trailer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace braid {

// What marks an executable as a Braid runtime: braid-run defines one in the
// ELF section kRuntimeSection, and writeBinaryWithPlan refuses an
// executable without it (a script or another program would otherwise
// become a "training binary"), or one that reads another plan format.
struct RuntimeMarker {
  char tag[16]; // "braid-run"
  uint32_t planFormatVersion;
};
inline constexpr char kRuntimeSection[] = ".braid_runtime";
inline constexpr char kRuntimeTag[] = "braid-run";

// Writes `outPath` (mode 0755): a copy of `runtimeExe` with `planBytes` (a
// plan file's bytes, PlanFile.h) embedded. If `runtimeExe` already carries
// a plan, that plan is replaced. Refuses a `runtimeExe` that is not a
// braid-run of this plan format (RuntimeMarker). The file appears
// atomically (written beside `outPath`, then renamed), so a failed write
// leaves any previous `outPath` intact.
absl::Status writeBinaryWithPlan(const std::string &runtimeExe,
                                 std::string_view planBytes,
                                 const std::string &outPath);

// The plan embedded in the executable at `exePath` (braid-run passes
// "/proc/self/exe"), or nullopt when it carries none. A trailer whose length
// does not fit the file is an error naming both sizes.
absl::StatusOr<std::optional<std::string>>
readEmbeddedPlan(const std::string &exePath);

} // namespace braid
