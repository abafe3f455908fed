#include "runtime/data/TokenFormat.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace braid {

const char *tokenFormatName(TokenFormat format) {
  switch (format) {
  case TokenFormat::kText:
    return "text";
  case TokenFormat::kUint16:
    return "uint16";
  case TokenFormat::kInt32:
    return "int32";
  }
  return "?";
}

int tokenWidth(TokenFormat format) {
  switch (format) {
  case TokenFormat::kText:
    return 1;
  case TokenFormat::kUint16:
    return 2;
  case TokenFormat::kInt32:
    return 4;
  }
  return 1;
}

absl::StatusOr<TokenFormat> parseTokenFormat(std::string_view name) {
  for (TokenFormat f :
       {TokenFormat::kText, TokenFormat::kUint16, TokenFormat::kInt32})
    if (name == tokenFormatName(f))
      return f;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data format \"",
                   absl::CEscape(absl::string_view(name.data(), name.size())),
                   "\": use text, uint16 or int32"));
}

absl::StatusOr<TokenFormat>
chooseTokenFormat(const std::string &path,
                  const std::optional<std::string> &flag) {
  if (flag)
    return parseTokenFormat(*flag);
  if (absl::EndsWith(path, ".txt"))
    return TokenFormat::kText;
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot tell the format of the data file '", path,
      "' from its name: pass --data-format=text (one token per byte), "
      "--data-format=uint16 or --data-format=int32 (raw little-endian "
      "tokens)"));
}

} // namespace braid
