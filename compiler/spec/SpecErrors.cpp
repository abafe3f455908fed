#include "compiler/spec/SpecErrors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace braid {

std::string printableToken(std::string_view text, size_t maxShown) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < maxShown; ++i) {
    unsigned char c = text[i];
    if (c < 0x20 || c >= 0x7f)
      absl::StrAppendFormat(&out, "\\x%02x", c);
    else
      out += static_cast<char>(c);
  }
  if (text.size() > maxShown)
    out += "...";
  return out;
}

void SpecErrors::add(TextPoint at, std::string path, std::string message) {
  errors_.push_back({at, std::move(path), std::move(message)});
}

std::string SpecErrors::format(const SpecError &error) const {
  return absl::StrCat(
      displayName_, ":", error.at.line, ":", error.at.column, ": ",
      error.path.empty() ? "(top level)" : printableToken(error.path, 100),
      ": ", error.message);
}

absl::Status SpecErrors::toStatus() const {
  if (errors_.empty())
    return absl::OkStatus();
  // Sort indices by (position, order added): a stable sort by position.
  std::vector<size_t> order(errors_.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TextPoint &pa = errors_[a].at, &pb = errors_[b].at;
    return pa == pb ? a < b : pa < pb;
  });
  std::string text;
  std::string previous;
  for (size_t i : order) {
    std::string line = format(errors_[i]);
    // Protobuf sometimes reports one mistake twice at the same place.
    if (line == previous)
      continue;
    if (!text.empty())
      text += "\n";
    text += line;
    previous = std::move(line);
  }
  return absl::InvalidArgumentError(text);
}

} // namespace braid
