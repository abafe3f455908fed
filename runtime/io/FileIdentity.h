// Telling whether an output path names one of a run's input files, so that
// writing it can never destroy an input, however the paths are spelt
// (relative, through a link, a hard link).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace braid {

// A file a command reads, and how the user named it.
struct NamedInput {
  std::string what; // "the data file (--data)"
  std::string path;
};

// True when `a` and `b` exist and are the same file (device and inode).
bool sameFile(const std::string &a, const std::string &b);

// InvalidArgument when `output` (named by `flag` in the message, e.g.
// "--log") is the same file as one of `inputs`. An output that does not
// exist yet is never an input.
absl::Status refuseInputAsOutput(const std::string &flag,
                                 const std::string &output,
                                 const std::vector<NamedInput> &inputs);

} // namespace braid
