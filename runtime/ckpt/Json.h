// A small strict JSON reader for safetensors headers, plus string quoting
// for the writer. Strict means RFC 8259 exactly: no comments, no trailing
// commas, no duplicate object keys, valid UTF-8, and nesting at most 64
// deep, so hostile headers are refused rather than guessed at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace braid {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  // kNumber: the literal as written, so integers stay exact; kString: the
  // decoded text.
  std::string text;
  std::vector<JsonValue> array;
  // Members in document order; keys are unique.
  std::vector<std::pair<std::string, JsonValue>> object;

  // The member called `key` of an object; null when absent.
  const JsonValue *find(std::string_view key) const;
  // A number that is a non-negative integer below 2^64; nullopt-like false
  // return otherwise.
  bool asUint64(uint64_t *out) const;
};

// Parses one JSON document. InvalidArgument with the byte offset and what
// was expected when `text` is not valid JSON.
absl::StatusOr<JsonValue> parseJson(std::string_view text);

// `s` as a JSON string literal, quotes included.
std::string jsonQuote(std::string_view s);

} // namespace braid
