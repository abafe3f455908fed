// Reading a small user-named file (a plan, a checkpoint) into memory.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace braid {

// The bytes of the regular file at `path`. `what` names the file's role in
// messages ("plan", "checkpoint"): NotFound when it does not exist,
// InvalidArgument when it is a directory or cannot be read, with the path
// and the system's reason.
absl::StatusOr<std::string> readWholeFile(const std::string &path,
                                          absl::string_view what);

} // namespace braid
