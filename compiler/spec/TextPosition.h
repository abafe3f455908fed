// Positions in spec text: byte offsets, protobuf's line/column pairs and the
// 1-based line:column that error messages print.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace braid {

// A 1-based line and 1-based byte column, as editors and compilers print
// them. A tab counts as one column.
struct TextPoint {
  int line = 1;
  int column = 1;

  bool operator<(const TextPoint &other) const {
    return line != other.line ? line < other.line : column < other.column;
  }
  bool operator==(const TextPoint &other) const {
    return line == other.line && column == other.column;
  }
};

// Protobuf's column after byte `c` at `column` of a line (0-based columns,
// as protobuf's tokenizer counts them): a tab advances to the next multiple
// of 8, any other byte by one. A newline starts the next line instead.
inline int protobufColumnAfter(int column, char c) {
  return c == '\t' ? column + 8 - column % 8 : column + 1;
}

// Converts between byte offsets and line/column pairs of one text. The text
// must outlive this object.
class TextPositions {
public:
  explicit TextPositions(std::string_view text);

  // The byte offset of a position protobuf reported: `line` and `column` are
  // 0-based, and protobuf's column advances a tab to the next multiple of 8.
  // Positions past the end of a line or of the text are clamped to them.
  size_t offsetOfProtobuf(int line, int column) const;

  // The printable position of a byte offset (clamped to the text's end).
  TextPoint pointAt(size_t offset) const;

  // The printable position of a protobuf position.
  TextPoint pointOfProtobuf(int line, int column) const {
    return pointAt(offsetOfProtobuf(line, column));
  }

  std::string_view text() const { return text_; }

private:
  std::string_view text_;
  // Byte offset where each line starts; lineStarts_[0] == 0.
  std::vector<size_t> lineStarts_;
};

} // namespace braid
