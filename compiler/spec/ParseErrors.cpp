#include "compiler/spec/ParseErrors.h"

#include <cctype>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/spec/FieldPath.h"
#include "compiler/spec/NameSuggestion.h"
#include "compiler/spec/SpecSchema.h"

namespace braid {
namespace {

using google::protobuf::FieldDescriptor;

// If `message` is `prefix` + X + `suffix`, returns X.
std::optional<std::string> between(const std::string &message,
                                   const std::string &prefix,
                                   const std::string &suffix) {
  if (message.size() < prefix.size() + suffix.size() ||
      !absl::StartsWith(message, prefix) || !absl::EndsWith(message, suffix))
    return std::nullopt;
  return message.substr(prefix.size(),
                        message.size() - prefix.size() - suffix.size());
}

// If `message` is `prefix` + X + `middle` + Y + `suffix`, returns X and Y.
// X ends at the first `middle`, so only Y may contain it.
std::optional<std::pair<std::string, std::string>>
twoParts(const std::string &message, const std::string &prefix,
         const std::string &middle, const std::string &suffix) {
  std::optional<std::string> body = between(message, prefix, suffix);
  if (!body)
    return std::nullopt;
  size_t mid = body->find(middle);
  if (mid == std::string::npos)
    return std::nullopt;
  return std::make_pair(body->substr(0, mid),
                        body->substr(mid + middle.size()));
}

bool isNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

std::string describeToken(const std::string &text) {
  return text.empty() ? "the end of the file" : printableToken(text);
}

bool isQuoted(const std::string &text) {
  return !text.empty() && (text[0] == '"' || text[0] == '\'');
}

std::string messageName(const std::string &messagePath) {
  return messagePath.empty() ? "the top level" : messagePath;
}

// Where a report came from, which decides what it makes redundant.
enum class Source {
  kParser,
  // Protobuf's tokenizer: the parser's reports after it on the same or later
  // lines come from its recovery and are dropped.
  kTokenizer,
  // A value where a field name belongs, which protobuf (skipping unknown
  // fields) takes for a field name; everything after it is noise.
  kStrayValue,
};

struct Described {
  SpecError error;
  Source source = Source::kParser;
};

class Describer {
public:
  Describer(const TextPositions &positions,
            const std::vector<SpecToken> &tokens)
      : positions_(positions), tokens_(tokens) {}

  Described describe(const RawParseError &report) {
    offset_ = positions_.offsetOfProtobuf(report.line, report.column);
    const std::string &m = report.message;
    if (std::optional<SpecError> e = tokenizerError(m))
      return {*e, Source::kTokenizer};
    if (auto parts =
            twoParts(m, "Message type \"", "\" has no field named \"", "\".")) {
      const std::string &name = parts->second;
      if (!name.empty() && !isNameStart(name[0]))
        return {strayValue(name), Source::kStrayValue};
      return {unknownField(name), Source::kParser};
    }
    return {parserError(m), Source::kParser};
  }

private:
  SpecError parserError(const std::string &m) {
    std::optional<std::string> a;
    if (auto parts = twoParts(m, "Unknown enumeration value of \"",
                              "\" for field \"", "\"."))
      return badEnumName(parts->first);
    if ((a = between(m, "Expected integer or identifier, got: ", "")))
      return badEnumName(*a);
    if ((a = between(m, "Expected integer, got: ", "")))
      return notInteger(*a);
    if ((a = between(m, "Integer out of range (", ")")))
      return integerOutOfRange(*a);
    if ((a = between(m, "Expected double, got: ", "")) ||
        (a = between(m, "Expect a decimal number, got: ", "")))
      return notNumber(*a);
    if (auto parts = twoParts(m, "Invalid value for boolean field \"",
                              "\". Value: \"", "\"."))
      return notBoolean(parts->second);
    if ((a = between(m, "Expected string, got: ", "")))
      return notString(*a);
    if ((a = between(m, "Expected identifier, got: ", "")))
      return notFieldName(*a);
    if ((a = between(m, "Non-repeated field \"",
                     "\" is specified multiple times.")))
      return setTwice(*a);
    if (auto parts = twoParts(m, "Extension \"", "\" is not defined", ""))
      return extension(parts->first);
    if (auto parts =
            twoParts(m, "Ignoring extension \"", "\" which is not defined", ""))
      return extension(parts->first);
    if ((a = between(m, "Cannot skip field value, unexpected token: ", "")))
      return notValue(*a);
    if ((a = between(m, "Invalid float number: ", "")))
      return notNumber(*a);
    if (auto parts = twoParts(m, "Expected \"", "\", found \"", "\"."))
      return expected(parts->first, parts->second);
    std::string said = printableToken(m, 200);
    if (absl::EndsWith(said, "."))
      said.pop_back();
    return at(context().path(), absl::StrCat("syntax error: ", said));
  }

  // Moves the error to the last token at or before it whose text is `text`:
  // protobuf often reports the position after the token it complains about.
  void moveToToken(const std::string &text) {
    for (auto it = tokens_.rbegin(); it != tokens_.rend(); ++it) {
      if (it->offset <= offset_ && it->text == text) {
        offset_ = it->offset;
        return;
      }
    }
  }

  SpecError at(std::string path, std::string message) const {
    return SpecError{positions_.pointAt(offset_), std::move(path),
                     std::move(message)};
  }

  FieldContext context() const { return fieldContextAt(tokens_, offset_); }

  // The field name of `ctx`, safe to print.
  static std::string fieldOf(const FieldContext &ctx) {
    return printableToken(ctx.field);
  }

  SpecError unknownField(const std::string &name) {
    moveToToken(name);
    FieldContext ctx = context();
    std::string where = messageName(ctx.messagePath());
    std::string said = printableToken(name);
    std::string head = absl::StrCat("no field named ", said, " in ", where);
    const google::protobuf::Descriptor *message =
        messageAtPath(ctx.messagePath());
    if (!message)
      return at(ctx.path(), head);
    // A field written in the wrong message is a likelier mistake than a
    // misspelling, so an exact name elsewhere wins over a close one here.
    std::vector<std::string> owners;
    for (const std::string &path : pathsOfFieldNamed(name)) {
      size_t dot = path.rfind('.');
      owners.push_back(
          messageName(dot == std::string::npos ? "" : path.substr(0, dot)));
    }
    if (!owners.empty())
      return at(ctx.path(),
                absl::StrCat(head, "; ", said, " belongs in ",
                             joinWithOr(owners), ", not in ", where));
    std::vector<std::string> known = fieldNames(message);
    if (std::optional<std::string> close = closestName(name, known))
      return at(ctx.path(), absl::StrCat(head, "; did you mean ", *close, "?"));
    return at(ctx.path(), absl::StrCat(head, "; the fields of ", where, " are ",
                                       joinWithAnd(known)));
  }

  SpecError badEnumName(const std::string &value) {
    moveToToken(value);
    FieldContext ctx = context();
    const FieldDescriptor *field = fieldAtPath(ctx.path());
    if (!field || !field->enum_type())
      return at(ctx.path(),
                absl::StrCat("expected a name, got ", describeToken(value)));
    std::vector<std::string> allowed = allowedEnumNames(field->enum_type());
    std::string message = absl::StrCat(describeToken(value), " is not a valid ",
                                       field->enum_type()->name(), "; write ",
                                       joinWithOr(allowed));
    if (isQuoted(value))
      absl::StrAppend(&message, " without quotes");
    else if (std::optional<std::string> close = closestName(value, allowed))
      absl::StrAppend(&message, " (did you mean ", *close, "?)");
    return at(ctx.path(), message);
  }

  SpecError notInteger(const std::string &value) {
    moveToToken(value);
    FieldContext ctx = context();
    const FieldDescriptor *field = fieldAtPath(ctx.path());
    if (value == "-" && field &&
        field->cpp_type() == FieldDescriptor::CPPTYPE_UINT64)
      return at(ctx.path(),
                absl::StrCat(fieldOf(ctx), " is unsigned; write a whole number "
                                           "from 0 to 18446744073709551615"));
    return at(ctx.path(), absl::StrCat("expected a whole number, got ",
                                       describeToken(value)));
  }

  SpecError integerOutOfRange(const std::string &value) {
    moveToToken(value);
    FieldContext ctx = context();
    const FieldDescriptor *field = fieldAtPath(ctx.path());
    std::string said = printableToken(value);
    if (field && field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL)
      return at(ctx.path(), absl::StrCat("expected true or false, got ", said));
    if (field && field->enum_type())
      return at(ctx.path(),
                absl::StrCat(said, " is not a valid ",
                             field->enum_type()->name(), "; write ",
                             joinWithOr(allowedEnumNames(field->enum_type()))));
    if (field && field->cpp_type() == FieldDescriptor::CPPTYPE_UINT64)
      return at(ctx.path(),
                absl::StrCat(said, " is out of range; ", fieldOf(ctx),
                             " takes a whole number from 0 to "
                             "18446744073709551615"));
    return at(ctx.path(), absl::StrCat(said, " does not fit a 64-bit integer; ",
                                       fieldOf(ctx),
                                       " takes a whole number of at most "
                                       "9223372036854775807 in magnitude"));
  }

  SpecError notNumber(const std::string &value) {
    moveToToken(value);
    FieldContext ctx = context();
    std::string message =
        absl::StrCat("expected a decimal number, got ", describeToken(value));
    if (isQuoted(value))
      absl::StrAppend(&message, "; write the number without quotes");
    return at(ctx.path(), message);
  }

  SpecError notBoolean(const std::string &value) {
    moveToToken(value);
    return at(context().path(), absl::StrCat("expected true or false, got ",
                                             describeToken(value)));
  }

  SpecError notString(const std::string &value) {
    moveToToken(value);
    FieldContext ctx = context();
    std::string message =
        absl::StrCat("expected a quoted string, got ", describeToken(value));
    if (!value.empty())
      absl::StrAppend(&message, "; write ", fieldOf(ctx), ": \"",
                      printableToken(value), "\"");
    return at(ctx.path(), message);
  }

  SpecError strayValue(const std::string &value) {
    moveToToken(value);
    return at(
        context().messagePath(),
        absl::StrCat("expected a field name, got ", describeToken(value)));
  }

  // A value of an unknown field that protobuf could not skip over.
  SpecError notValue(const std::string &got) {
    moveToToken(got);
    return at(context().path(),
              absl::StrCat("expected a value, got ", describeToken(got)));
  }

  SpecError notFieldName(const std::string &got) {
    if (got.empty()) {
      FieldContext end = fieldContextAtEnd(tokens_);
      if (!end.open.empty()) {
        const OpenMessage &inner = end.open.back();
        TextPoint opened = positions_.pointAt(inner.offset);
        return at(end.messagePath(),
                  absl::StrFormat("the file ends inside %s, opened at %d:%d; "
                                  "add the missing '}'",
                                  end.messagePath(), opened.line,
                                  opened.column));
      }
    }
    FieldContext ctx = context();
    if ((got == "}" || got == ">") && ctx.open.empty())
      return at("", absl::StrCat("unmatched '", got,
                                 "': no message is open here; remove it"));
    return at(ctx.path(),
              absl::StrCat("expected a field name, got ", describeToken(got)));
  }

  SpecError setTwice(const std::string &name) {
    moveToToken(name);
    FieldContext ctx = context();
    std::string path = ctx.path();
    std::string first;
    if (std::optional<size_t> firstOffset = firstFieldNamed(tokens_, path)) {
      if (*firstOffset != offset_) {
        TextPoint p = positions_.pointAt(*firstOffset);
        first = absl::StrFormat(" (first at %d:%d)", p.line, p.column);
      }
    }
    const FieldDescriptor *field = fieldAtPath(path);
    if (field && field->message_type())
      return at(path, absl::StrCat(name, " is written twice", first,
                                   "; merge the two blocks into one"));
    return at(path, absl::StrCat(name, " is set twice", first,
                                 "; keep one of the two lines"));
  }

  SpecError extension(const std::string &name) {
    moveToToken("[");
    FieldContext ctx = context();
    return at(ctx.messagePath(),
              absl::StrCat("[", printableToken(name),
                           "] is an extension name; specs use no extensions, "
                           "remove it"));
  }

  SpecError expected(const std::string &wanted, const std::string &found) {
    FieldContext ctx = context();
    const FieldDescriptor *field = fieldAtPath(ctx.path());
    if (wanted == "{" && field && field->message_type())
      return at(ctx.path(),
                absl::StrCat(fieldOf(ctx), " is a message, not a value; write ",
                             fieldOf(ctx), " { ... }"));
    if (wanted == ":")
      return at(ctx.path(),
                absl::StrCat("expected ':' after ", fieldOf(ctx), ", found ",
                             describeToken(found), "; write ", fieldOf(ctx),
                             ": ", printableToken(found)));
    return at(ctx.path(), absl::StrCat("expected '", printableToken(wanted),
                                       "', found ", describeToken(found)));
  }

  // Errors of protobuf's tokenizer, which knows no fields. A stray byte is
  // described where it is; a malformed string or number belongs to the
  // field whose value it is, which starts before the reported position.
  std::optional<SpecError> tokenizerError(const std::string &m) {
    std::string_view text = positions_.text();
    unsigned char byte = offset_ < text.size() ? text[offset_] : 0;
    if (m == "Invalid control characters encountered in text.")
      return at(context().path(),
                absl::StrFormat("byte 0x%02x is a control character; a spec "
                                "is plain text, remove it",
                                byte));
    if (absl::StartsWith(m, "Interpreting non ascii codepoint"))
      return at(context().path(),
                absl::StrFormat("byte 0x%02x is not ASCII; outside quoted "
                                "strings a spec uses ASCII only",
                                byte));
    if (std::optional<std::pair<size_t, std::string>> hex = hexFloatAdvice())
      return SpecError{positions_.pointAt(hex->first),
                       contextOfTokenBefore().path(), hex->second};
    std::string advice;
    if (m == "Unexpected end of string." ||
        m == "String literals cannot cross line boundaries.")
      advice = "this string is not closed; add the closing quote on the same "
               "line";
    else if (m == "Need space between number and identifier.")
      advice = "a number runs into a name here; put a space between them";
    else if (m == "Need space between identifier and decimal point.")
      advice = "a name runs into a decimal point here; put a space between "
               "them";
    else if (m == "\"e\" must be followed by exponent.")
      advice = "the exponent of this number has no digits; write it like 1e-5";
    else if (absl::StrContains(m, "escape sequence"))
      advice = "invalid escape sequence in a string; write \\\\ for a "
               "backslash";
    else if (m == "Numbers starting with leading zero must be in octal.")
      advice = "a number with a leading zero is octal and takes only the "
               "digits 0-7; remove the leading zero";
    else if (m == "\"0x\" must be followed by hex digits.")
      advice = "0x must be followed by hexadecimal digits";
    else
      return std::nullopt;
    return at(contextOfTokenBefore().path(), advice);
  }

  // A hexadecimal floating-point literal (0x1p-8, 0x1.8p3), which the
  // tokenizer reads as an integer running into a name or a point: advice
  // with the value in decimal, which specs take.
  // Returns where the literal starts and the advice.
  std::optional<std::pair<size_t, std::string>> hexFloatAdvice() const {
    std::string_view text = positions_.text();
    size_t start = offset_;
    for (auto it = tokens_.rbegin(); it != tokens_.rend(); ++it)
      if (it->offset < offset_) {
        start = it->offset;
        break;
      }
    if (start >= text.size())
      return std::nullopt;
    std::string_view rest = text.substr(start);
    size_t digits = rest[0] == '-' ? 1 : 0;
    if (rest.substr(digits, 2) != "0x" && rest.substr(digits, 2) != "0X")
      return std::nullopt;
    size_t end = digits + 2;
    while (end < rest.size() &&
           (std::isxdigit(static_cast<unsigned char>(rest[end])) ||
            rest[end] == '.' || rest[end] == 'p' || rest[end] == 'P' ||
            ((rest[end] == '-' || rest[end] == '+') &&
             (rest[end - 1] == 'p' || rest[end - 1] == 'P'))))
      ++end;
    std::string literal(rest.substr(0, end));
    if (literal.find_first_of(".pP") == std::string::npos)
      return std::nullopt;
    char *parsed = nullptr;
    const double value = std::strtod(literal.c_str(), &parsed);
    if (parsed != literal.c_str() + literal.size())
      return std::make_pair(
          start, absl::StrCat("'", literal,
                              "' is not a number a spec takes: hexadecimal "
                              "floating-point numbers are not accepted; "
                              "write the value in decimal"));
    return std::make_pair(
        start, absl::StrCat("'", literal,
                            "' is a hexadecimal floating-point number, "
                            "which specs do not take; write it in decimal: ",
                            absl::StrFormat("%.17g", value)));
  }

  FieldContext contextOfTokenBefore() const {
    size_t start = offset_;
    for (auto it = tokens_.rbegin(); it != tokens_.rend(); ++it) {
      if (it->offset < offset_) {
        start = it->offset;
        break;
      }
    }
    return fieldContextAt(tokens_, start);
  }

  const TextPositions &positions_;
  const std::vector<SpecToken> &tokens_;
  size_t offset_ = 0;
};

} // namespace

void ParseErrorCollector::add(int line, int column,
                              const std::string &message) {
  if (reports_.size() < kMaxReports) {
    reports_.push_back({line, column, message});
    return;
  }
  if (dropped_++ == 0)
    firstDropped_ = {line, column, message};
}

void ParseErrorCollector::AddError(int line,
                                   google::protobuf::io::ColumnNumber column,
                                   const std::string &message) {
  add(line, column, message);
}

void ParseErrorCollector::AddWarning(int line,
                                     google::protobuf::io::ColumnNumber column,
                                     const std::string &message) {
  add(line, column, message);
}

std::vector<SpecError>
describeParseErrors(const ParseErrorCollector &collector,
                    const TextPositions &positions,
                    const std::vector<SpecToken> &tokens) {
  const std::vector<RawParseError> &reports = collector.reports();
  Describer describer(positions, tokens);
  std::vector<Described> described;
  int firstTokenizerLine = -1;
  for (const RawParseError &report : reports) {
    described.push_back(describer.describe(report));
    const Described &d = described.back();
    if (d.source == Source::kTokenizer &&
        (firstTokenizerLine < 0 || d.error.at.line < firstTokenizerLine))
      firstTokenizerLine = d.error.at.line;
  }
  std::vector<SpecError> errors;
  bool restIsNoise = false;
  for (Described &d : described) {
    if (d.source != Source::kTokenizer && firstTokenizerLine >= 0 &&
        d.error.at.line >= firstTokenizerLine)
      continue;
    errors.push_back(std::move(d.error));
    if (d.source == Source::kStrayValue) {
      restIsNoise = true;
      break;
    }
  }
  if (collector.dropped() > 0 && !restIsNoise) {
    // Placed and named like the first dropped error itself.
    SpecError next = describer.describe(collector.firstDropped()).error;
    errors.push_back({next.at, next.path,
                      absl::StrCat(collector.dropped(),
                                   " more syntax errors follow from here; fix "
                                   "the ones above first")});
  }
  return errors;
}

} // namespace braid
