// How tokens are stored in a data file.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace braid {

enum class TokenFormat {
  // Any file, one token per byte (the byte tokenizer: vocabulary 256).
  kText,
  // Raw tokens, 2 bytes each, little-endian unsigned.
  kUint16,
  // Raw tokens, 4 bytes each, little-endian signed.
  kInt32,
};

const char *tokenFormatName(TokenFormat format);
// Bytes per token.
int tokenWidth(TokenFormat format);

// Parses "text", "uint16" or "int32"; anything else is InvalidArgument
// listing the choices.
absl::StatusOr<TokenFormat> parseTokenFormat(std::string_view name);

// The format of the data file at `path`: `flag` (the --data-format value)
// when given, else text for a name ending in ".txt"; otherwise
// InvalidArgument asking for --data-format.
absl::StatusOr<TokenFormat>
chooseTokenFormat(const std::string &path,
                  const std::optional<std::string> &flag);

} // namespace braid
