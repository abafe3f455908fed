// The errors of one spec, printed the way compilers print them:
//   models/x.pbtxt:7:3: model.num_heads: 6 does not divide hidden_size 64; ...
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler/spec/TextPosition.h"

namespace braid {

// User-written text made safe to print: control and non-ASCII bytes
// escaped as \xNN, and text longer than `maxShown` characters cut there and
// followed by "...".
std::string printableToken(std::string_view text, size_t maxShown = 40);

struct SpecError {
  TextPoint at;
  // Dotted field path ("model.num_heads"); "" for the top level.
  std::string path;
  // What is wrong and what to change, as one sentence.
  std::string message;
};

// Collects every error found in one spec so that a user sees them all at
// once rather than one per run.
class SpecErrors {
public:
  explicit SpecErrors(std::string displayName)
      : displayName_(std::move(displayName)) {}

  void add(TextPoint at, std::string path, std::string message);

  bool empty() const { return errors_.empty(); }
  const std::vector<SpecError> &errors() const { return errors_; }

  // InvalidArgument with one line per error, ordered by position (errors at
  // the same position keep the order they were added in); OK when empty.
  absl::Status toStatus() const;

  // One error as printed: "name:line:column: path: message". The path
  // "(top level)" stands for the empty path; a path taken from hostile text
  // is made printable and cut to 100 characters.
  std::string format(const SpecError &error) const;

private:
  std::string displayName_;
  std::vector<SpecError> errors_;
};

} // namespace braid
