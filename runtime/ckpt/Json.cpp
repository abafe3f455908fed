#include "runtime/ckpt/Json.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace braid {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> document() {
    JsonValue value;
    skipSpace();
    if (absl::Status s = parseValue(value, 0); !s.ok())
      return s;
    skipSpace();
    if (pos_ != text_.size())
      return error("end of input after the value");
    return value;
  }

private:
  absl::Status error(absl::string_view expected) const {
    std::string found =
        pos_ < text_.size()
            ? absl::StrCat("byte 0x",
                           absl::Hex(static_cast<unsigned char>(text_[pos_]),
                                     absl::kZeroPad2))
            : std::string("the end of the text");
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON at byte ", pos_, ": expected ", expected,
                     ", found ", found));
  }

  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool consumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) !=
        std::string_view(word.data(), word.size()))
      return false;
    pos_ += word.size();
    return true;
  }

  absl::Status parseValue(JsonValue &out, int depth) {
    if (pos_ >= text_.size())
      return error("a value");
    char c = text_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth)
        return error(absl::StrCat("at most ", kMaxDepth, " nested levels"));
      return c == '{' ? parseObject(out, depth + 1)
                      : parseArray(out, depth + 1);
    }
    if (c == '"') {
      out.type = JsonValue::Type::kString;
      return parseString(out.text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      out.type = JsonValue::Type::kNumber;
      return parseNumber(out.text);
    }
    if (consumeWord("true")) {
      out.type = JsonValue::Type::kBool;
      out.boolean = true;
      return absl::OkStatus();
    }
    if (consumeWord("false")) {
      out.type = JsonValue::Type::kBool;
      return absl::OkStatus();
    }
    if (consumeWord("null")) {
      out.type = JsonValue::Type::kNull;
      return absl::OkStatus();
    }
    return error("a value");
  }

  absl::Status parseObject(JsonValue &out, int depth) {
    out.type = JsonValue::Type::kObject;
    ++pos_; // '{'
    skipSpace();
    if (consume('}'))
      return absl::OkStatus();
    absl::flat_hash_set<std::string> keys;
    while (true) {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        return error("a string key");
      size_t keyPos = pos_;
      std::string key;
      if (absl::Status s = parseString(key); !s.ok())
        return s;
      if (!keys.insert(key).second) {
        pos_ = keyPos;
        return error("a key not used before in this object");
      }
      skipSpace();
      if (!consume(':'))
        return error("':'");
      skipSpace();
      JsonValue value;
      if (absl::Status s = parseValue(value, depth); !s.ok())
        return s;
      out.object.emplace_back(std::move(key), std::move(value));
      skipSpace();
      if (consume('}'))
        return absl::OkStatus();
      if (!consume(','))
        return error("',' or '}'");
    }
  }

  absl::Status parseArray(JsonValue &out, int depth) {
    out.type = JsonValue::Type::kArray;
    ++pos_; // '['
    skipSpace();
    if (consume(']'))
      return absl::OkStatus();
    while (true) {
      skipSpace();
      JsonValue value;
      if (absl::Status s = parseValue(value, depth); !s.ok())
        return s;
      out.array.push_back(std::move(value));
      skipSpace();
      if (consume(']'))
        return absl::OkStatus();
      if (!consume(','))
        return error("',' or ']'");
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  absl::Status parseNumber(std::string &out) {
    size_t start = pos_;
    consume('-');
    if (consume('0')) {
      // A leading zero stands alone.
    } else if (pos_ < text_.size() && isDigit(text_[pos_]) &&
               text_[pos_] != '0') {
      while (pos_ < text_.size() && isDigit(text_[pos_]))
        ++pos_;
    } else {
      return error("a digit");
    }
    if (consume('.')) {
      if (pos_ >= text_.size() || !isDigit(text_[pos_]))
        return error("a digit after '.'");
      while (pos_ < text_.size() && isDigit(text_[pos_]))
        ++pos_;
    }
    if (consume('e') || consume('E')) {
      if (!consume('+'))
        consume('-');
      if (pos_ >= text_.size() || !isDigit(text_[pos_]))
        return error("a digit in the exponent");
      while (pos_ < text_.size() && isDigit(text_[pos_]))
        ++pos_;
    }
    out.assign(text_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::Status parseHex4(uint32_t &out) {
    out = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      if (pos_ >= text_.size())
        return error("four hex digits after \\u");
      char c = text_[pos_];
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return error("four hex digits after \\u");
      out = out * 16 + d;
    }
    return absl::OkStatus();
  }

  static void appendUtf8(uint32_t cp, std::string &out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  absl::Status parseEscape(std::string &out) {
    if (pos_ >= text_.size())
      return error("an escape character");
    char c = text_[pos_++];
    switch (c) {
    case '"':
    case '\\':
    case '/':
      out += c;
      return absl::OkStatus();
    case 'b':
      out += '\b';
      return absl::OkStatus();
    case 'f':
      out += '\f';
      return absl::OkStatus();
    case 'n':
      out += '\n';
      return absl::OkStatus();
    case 'r':
      out += '\r';
      return absl::OkStatus();
    case 't':
      out += '\t';
      return absl::OkStatus();
    case 'u':
      break;
    default:
      --pos_;
      return error("one of \" \\ / b f n r t u after '\\'");
    }
    uint32_t cp;
    if (absl::Status s = parseHex4(cp); !s.ok())
      return s;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
      return error("a high surrogate before a low one");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (!consumeWord("\\u"))
        return error("a low surrogate \\uDC00..\\uDFFF");
      uint32_t low;
      if (absl::Status s = parseHex4(low); !s.ok())
        return s;
      if (low < 0xDC00 || low > 0xDFFF)
        return error("a low surrogate \\uDC00..\\uDFFF");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    appendUtf8(cp, out);
    return absl::OkStatus();
  }

  // Length of the valid UTF-8 sequence at pos_ (non-ASCII lead byte), or 0.
  size_t utf8Length() const {
    auto byte = [&](size_t i) {
      return static_cast<unsigned char>(text_[pos_ + i]);
    };
    unsigned char b0 = byte(0);
    size_t n;
    uint32_t min;
    uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      n = 2, min = 0x80, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      n = 3, min = 0x800, cp = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      n = 4, min = 0x10000, cp = b0 & 0x07;
    } else {
      return 0;
    }
    if (pos_ + n > text_.size())
      return 0;
    for (size_t i = 1; i < n; ++i) {
      if ((byte(i) & 0xC0) != 0x80)
        return 0;
      cp = (cp << 6) | (byte(i) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    return n;
  }

  absl::Status parseString(std::string &out) {
    ++pos_; // '"'
    while (true) {
      if (pos_ >= text_.size())
        return error("a closing '\"'");
      unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c == '\\') {
        ++pos_;
        if (absl::Status s = parseEscape(out); !s.ok())
          return s;
        continue;
      }
      if (c < 0x20)
        return error("no control characters inside a string");
      if (c < 0x80) {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      size_t n = utf8Length();
      if (n == 0)
        return error("valid UTF-8");
      out.append(text_.substr(pos_, n));
      pos_ += n;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

} // namespace

const JsonValue *JsonValue::find(std::string_view key) const {
  for (const auto &[k, v] : object)
    if (k == key)
      return &v;
  return nullptr;
}

bool JsonValue::asUint64(uint64_t *out) const {
  if (type != Type::kNumber || text.empty() || text.size() > 20)
    return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

absl::StatusOr<JsonValue> parseJson(std::string_view text) {
  return Parser(text).document();
}

std::string jsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20)
        absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
      else
        out += ch;
    }
  }
  return out + "\"";
}

} // namespace braid
