#include "compiler/spec/TextPosition.h"

#include <algorithm>

namespace braid {

TextPositions::TextPositions(std::string_view text) : text_(text) {
  lineStarts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n')
      lineStarts_.push_back(i + 1);
}

size_t TextPositions::offsetOfProtobuf(int line, int column) const {
  if (line < 0)
    return 0;
  if (static_cast<size_t>(line) >= lineStarts_.size())
    return text_.size();
  size_t offset = lineStarts_[line];
  // Walk the line the way protobuf's tokenizer counts columns.
  int expanded = 0;
  while (offset < text_.size() && text_[offset] != '\n' && expanded < column)
    expanded = protobufColumnAfter(expanded, text_[offset++]);
  return offset;
}

TextPoint TextPositions::pointAt(size_t offset) const {
  offset = std::min(offset, text_.size());
  // The last line start at or before `offset`.
  auto next = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  size_t lineIndex = static_cast<size_t>(next - lineStarts_.begin()) - 1;
  return TextPoint{static_cast<int>(lineIndex) + 1,
                   static_cast<int>(offset - lineStarts_[lineIndex]) + 1};
}

} // namespace braid
