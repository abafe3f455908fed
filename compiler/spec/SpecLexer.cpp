#include "compiler/spec/SpecLexer.h"

namespace braid {
namespace {

bool isLetter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHexDigit(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool isSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' ||
         c == '\f';
}
bool isPunctuation(char c) { return c > ' ' && c < 0x7f; }

class Lexer {
public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<SpecToken> run() {
    std::vector<SpecToken> tokens;
    while (true) {
      skipSpaceAndComments();
      if (pos_ >= text_.size())
        return tokens;
      size_t start = pos_;
      SpecTokenKind kind = lexOne();
      tokens.push_back({kind, start, text_.substr(start, pos_ - start)});
    }
  }

private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool atEnd() const { return pos_ >= text_.size(); }

  void skipSpaceAndComments() {
    while (!atEnd()) {
      if (isSpace(peek())) {
        ++pos_;
      } else if (peek() == '#') {
        while (!atEnd() && peek() != '\n')
          ++pos_;
      } else {
        return;
      }
    }
  }

  SpecTokenKind lexOne() {
    char c = peek();
    if (isLetter(c)) {
      while (isLetter(peek()) || isDigit(peek()))
        ++pos_;
      return SpecTokenKind::kIdentifier;
    }
    if (isDigit(c) || (c == '.' && isDigit(peek(1)))) {
      lexNumber();
      return SpecTokenKind::kNumber;
    }
    if (c == '"' || c == '\'') {
      lexString(c);
      return SpecTokenKind::kString;
    }
    ++pos_;
    return isPunctuation(c) ? SpecTokenKind::kSymbol : SpecTokenKind::kOther;
  }

  void skipDigits() {
    while (isDigit(peek()))
      ++pos_;
  }

  // Protobuf's number syntax: hex (0x..), octal (0..), or decimal with an
  // optional fraction, exponent and 'f' suffix. A letter right after a number
  // is not part of it (protobuf asks for a space there).
  void lexNumber() {
    if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X')) {
      pos_ += 2;
      while (isHexDigit(peek()))
        ++pos_;
      return;
    }
    if (peek() == '0' && isDigit(peek(1))) {
      skipDigits();
      return;
    }
    skipDigits();
    if (peek() == '.') {
      ++pos_;
      skipDigits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-')
        ++pos_;
      skipDigits();
    }
    if (peek() == 'f' || peek() == 'F')
      ++pos_;
  }

  // A string ends at its closing quote (consumed), or unterminated at a
  // newline, a NUL byte or the end of the text (none consumed). A backslash
  // escapes the next character unless that is a newline or NUL.
  void lexString(char quote) {
    ++pos_;
    while (!atEnd()) {
      char c = peek();
      if (c == '\n' || c == '\0')
        return;
      if (c == '\\') {
        ++pos_;
        if (!atEnd() && peek() != '\n' && peek() != '\0')
          ++pos_;
        continue;
      }
      ++pos_;
      if (c == quote)
        return;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

} // namespace

std::vector<SpecToken> lexSpecText(std::string_view text) {
  return Lexer(text).run();
}

} // namespace braid
