// Field paths of positions in spec text ("model.init.std"), found by walking
// the tokens: `name {` opens a message, `}` closes it, `name:` starts a field.
//
// Used for syntax errors, where protobuf gives only a line and column and
// the parsed message is incomplete; valid specs are located through
// protobuf's ParseInfoTree instead (SpecLocator.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/spec/SpecLexer.h"

namespace braid {

// A message opened with `name {` or `name <` that is not yet closed.
struct OpenMessage {
  std::string name;
  // Offset of the name token.
  size_t offset;
};

// The syntactic context of one position in the text.
struct FieldContext {
  // Enclosing messages, outermost first.
  std::vector<OpenMessage> open;
  // The field whose name or value is at the position; empty between fields.
  std::string field;
  // Offset of that field's name token (meaningful when `field` is set).
  size_t fieldOffset = 0;

  // Dotted names of the enclosing messages; "" at the top level.
  std::string messagePath() const;
  // messagePath() plus `field`, when set.
  std::string path() const;
};

// The context of byte `offset`: tokens before it are walked, and a field
// name starting at `offset` counts as the field there.
FieldContext fieldContextAt(const std::vector<SpecToken> &tokens,
                            size_t offset);

// The context at the end of the text: what is still open there.
FieldContext fieldContextAtEnd(const std::vector<SpecToken> &tokens);

// The offset of the first field name token whose full path is `path`.
std::optional<size_t> firstFieldNamed(const std::vector<SpecToken> &tokens,
                                      std::string_view path);

// The offset of the first bracket ('{', '<' or '[') that opens nesting level
// maxDepth + 1, if any. Brackets are counted plainly, whether balanced or
// not, so this bounds the depth any parser of the text can reach.
std::optional<size_t>
firstBracketDeeperThan(const std::vector<SpecToken> &tokens, int maxDepth);

} // namespace braid
