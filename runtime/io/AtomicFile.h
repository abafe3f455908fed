// Writing an output file so that a failure never costs the previous one.
#pragma once

#include <string>
#include <string_view>

#include <sys/types.h>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace braid {

// Writes the concatenation of `pieces` to `path`: into a temporary file
// beside it, flushed to disk, then renamed over `path`. A full disk, a
// write error or a crash leaves whatever `path` held before intact (and no
// temporary file behind, unless the process died). The error names `path`
// and the system's reason. `mode` is the new file's permissions (before
// the umask).
//
// A `path` that exists and is not a regular file (a terminal, /dev/null, a
// pipe) is written directly: it has no previous contents to keep.
absl::Status writeFileAtomically(const std::string &path,
                                 absl::Span<const std::string_view> pieces,
                                 mode_t mode = 0644);

// The same for one piece.
inline absl::Status writeFileAtomically(const std::string &path,
                                        std::string_view bytes,
                                        mode_t mode = 0644) {
  return writeFileAtomically(path, absl::MakeConstSpan(&bytes, 1), mode);
}

// fsync of the directory `dir`, which makes a rename inside it durable.
void syncDirectory(const std::string &dir);

// ".NAME.tmp-PID" beside `path`: the temporary name writeFileAtomically
// uses, so that directory listings can tell leftovers of a dead process.
std::string temporaryPathFor(const std::string &path);

} // namespace braid
