// Spec text as tokens, split by protobuf's own tokenizer.
//
// Protobuf reports a syntax error as a line and column only, often just past
// the offending token. The loader re-reads the text with these tokens to find
// the token an error is about and the field it belongs to, and to measure
// bracket nesting before protobuf recurses into it. The tokens come from
// google::protobuf::io::Tokenizer, set up as protobuf's text parser sets it
// up, so that both agree on which brackets are real.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace braid {

enum class SpecTokenKind {
  kIdentifier, // [A-Za-z_][A-Za-z0-9_]*
  kNumber,     // 12, 0x1f, 1.5e-3, .5, 2f (protobuf's number syntax)
  kString,     // "..." or '...', possibly unterminated
  kSymbol,     // one printable ASCII punctuation character
  kOther,      // one byte that starts no token: control, DEL or non-ASCII
};

struct SpecToken {
  SpecTokenKind kind;
  // Byte offset of the first character in the text.
  size_t offset;
  // The token's characters; a view into the lexed text.
  std::string_view text;

  bool is(char symbol) const {
    return kind == SpecTokenKind::kSymbol && text.size() == 1 &&
           text[0] == symbol;
  }
};

// Splits `text` into tokens, skipping whitespace and '#' comments. Never
// fails: bytes that start no token become kOther tokens. Linear time. The
// text must be shorter than 2 GiB (protobuf's streams count in int).
std::vector<SpecToken> lexSpecText(std::string_view text);

} // namespace braid
