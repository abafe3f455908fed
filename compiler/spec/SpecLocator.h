// Where a field of a parsed spec was written, by field path.
#pragma once

#include <string_view>

#include <google/protobuf/text_format.h>

#include "compiler/spec/TextPosition.h"

namespace braid {

// Answers "where is model.num_heads?" for a spec parsed with a
// ParseInfoTree. Both arguments must outlive the locator.
class SpecLocator {
public:
  SpecLocator(const google::protobuf::TextFormat::ParseInfoTree &tree,
              const TextPositions &positions)
      : tree_(tree), positions_(positions) {}

  // The position of the field's name where the field was written. For a
  // field that was not written, the position of the innermost enclosing
  // message that was (its name), or 1:1 when none was: that is where the
  // missing line belongs.
  TextPoint locate(std::string_view path) const;

  // Whether the field at `path` was written in the text.
  bool written(std::string_view path) const;

private:
  const google::protobuf::TextFormat::ParseInfoTree &tree_;
  const TextPositions &positions_;
};

} // namespace braid
