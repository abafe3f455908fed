// Syntax errors: protobuf's text-format messages, rewritten for spec users.
//
// Protobuf says `Message type "braid.spec.Architecture" has no field named
// "vocab_sise".` at the column after the name; a spec user should read
// `model.vocab_sise: no field named vocab_sise in model; did you mean
// vocab_size?` at the name itself. docs/spec-reference.md lists every
// rewritten message.
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/io/tokenizer.h>

#include "compiler/spec/SpecErrors.h"
#include "compiler/spec/SpecLexer.h"
#include "compiler/spec/TextPosition.h"

namespace braid {

// One error or warning as protobuf reported it: 0-based line, protobuf's
// tab-expanded 0-based column, and its message.
struct RawParseError {
  int line;
  int column;
  std::string message;
};

// Records what protobuf's parser and tokenizer report. Warnings are kept
// too: the loader lets protobuf skip unknown fields so that it can report
// all of them, and protobuf reports each one as a warning. Only the first
// kMaxReports are kept: a user fixes the first few anyway, and describing
// each one costs a pass over the text.
class ParseErrorCollector : public google::protobuf::io::ErrorCollector {
public:
  static constexpr size_t kMaxReports = 50;

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string &message) override;
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string &message) override;

  const std::vector<RawParseError> &reports() const { return reports_; }
  // How many reports came after the first kMaxReports, and the first of
  // them.
  size_t dropped() const { return dropped_; }
  const RawParseError &firstDropped() const { return firstDropped_; }

private:
  void add(int line, int column, const std::string &message);

  std::vector<RawParseError> reports_;
  size_t dropped_ = 0;
  RawParseError firstDropped_{0, 0, ""};
};

// Turns protobuf's reports of one parse into spec errors: each moved to
// the token it is about, given the field path there, and reworded to say
// what to change. Reports that merely follow from an earlier one (protobuf
// re-reading the text after a tokenizer error, or taking a stray value for
// a field name) are dropped. Messages it does not recognise keep protobuf's
// wording after "syntax error: ". `tokens` are lexSpecText of the text that
// `positions` indexes.
// When the collector dropped reports, a last error says how many, at the
// first dropped one.
std::vector<SpecError>
describeParseErrors(const ParseErrorCollector &collector,
                    const TextPositions &positions,
                    const std::vector<SpecToken> &tokens);

} // namespace braid
