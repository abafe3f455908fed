#include "compiler/spec/SpecLexer.h"

#include <cassert>
#include <climits>
#include <string>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "compiler/spec/TextPosition.h"

namespace braid {
namespace {

namespace io = google::protobuf::io;

// The tokenizer's errors are protobuf's parser's errors too, and the parser
// reports them when it reads the same text; here they are not needed.
class IgnoreErrors : public io::ErrorCollector {
public:
  void AddError(int, io::ColumnNumber, const std::string &) override {}
};

// The control bytes other than whitespace: the tokenizer skips them, with
// an error, where a token could start.
bool isControl(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u < 0x20 && !(u >= '\t' && u <= '\r');
}

SpecTokenKind kindOf(const io::Tokenizer::Token &token) {
  switch (token.type) {
  case io::Tokenizer::TYPE_IDENTIFIER:
    return SpecTokenKind::kIdentifier;
  case io::Tokenizer::TYPE_INTEGER:
  case io::Tokenizer::TYPE_FLOAT:
    return SpecTokenKind::kNumber;
  case io::Tokenizer::TYPE_STRING:
    return SpecTokenKind::kString;
  default: {
    // A symbol: any one byte that starts no other token.
    unsigned char c = static_cast<unsigned char>(token.text[0]);
    return c > ' ' && c < 0x7f ? SpecTokenKind::kSymbol : SpecTokenKind::kOther;
  }
  }
}

// The tokenizer places a token by 0-based line and column, where a tab
// advances the column to the next multiple of 8. This walks the text in
// step with it, counting the same way, to find each token's byte offset.
// Tokens come in text order, so the walk only moves forward and passes
// each byte once.
//
// Between tokens lie the bytes the tokenizer skipped: whitespace, '#'
// comments and runs of control bytes. The walk gives each control byte
// outside a comment a kOther token, so that a stray byte separates the
// tokens around it here as it does for a reader.
class Walker {
public:
  Walker(std::string_view text, std::vector<SpecToken> &tokens)
      : text_(text), tokens_(tokens) {}

  void add(const io::Tokenizer::Token &token) {
    skipTo(token.line, token.column);
    assert(text_.substr(pos_, token.text.size()) == token.text);
    tokens_.push_back(
        {kindOf(token), pos_, text_.substr(pos_, token.text.size())});
    for (size_t i = 0; i < token.text.size() && pos_ < text_.size(); ++i)
      step();
  }

  void finish() { skipTo(INT_MAX, INT_MAX); }

private:
  // Walks skipped bytes up to (line, column) or the end of the text.
  void skipTo(int line, int column) {
    bool inComment = false;
    while (pos_ < text_.size() &&
           (line_ < line || (line_ == line && column_ < column))) {
      char c = text_[pos_];
      // Protobuf ends a comment at a NUL byte as well as at a newline.
      if (c == '\n' || c == '\0')
        inComment = false;
      if (c == '#')
        inComment = true;
      else if (!inComment && isControl(c))
        tokens_.push_back({SpecTokenKind::kOther, pos_, text_.substr(pos_, 1)});
      step();
    }
  }

  void step() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 0;
    } else {
      column_ = protobufColumnAfter(column_, text_[pos_]);
    }
    ++pos_;
  }

  std::string_view text_;
  std::vector<SpecToken> &tokens_;
  size_t pos_ = 0;
  int line_ = 0;
  int column_ = 0;
};

} // namespace

std::vector<SpecToken> lexSpecText(std::string_view text) {
  assert(text.size() <= INT_MAX);
  io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  IgnoreErrors errors;
  io::Tokenizer tokenizer(&input, &errors);
  // As protobuf's text parser sets it up for the loader, which leaves
  // relaxed whitespace off (text_format.cc).
  tokenizer.set_allow_f_after_float(true);
  tokenizer.set_comment_style(io::Tokenizer::SH_COMMENT_STYLE);
  tokenizer.set_require_space_after_number(true);
  tokenizer.set_allow_multiline_strings(false);

  std::vector<SpecToken> tokens;
  Walker walker(text, tokens);
  while (tokenizer.Next())
    walker.add(tokenizer.current());
  walker.finish();
  return tokens;
}

} // namespace braid
