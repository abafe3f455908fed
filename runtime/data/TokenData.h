// The token stream of a data file, validated once when loaded.
//
// Tokens stay in the file's own encoding (mapped, not copied) and are decoded
// on access; loading checks the whole stream, so every token handed out
// afterwards is known to be in [0, vocab_size).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "runtime/io/MappedFile.h"
#include "runtime/data/TokenFormat.h"

namespace braid {

class TokenData {
public:
  // Validates `bytes` as a token file of `format`: its length is a multiple
  // of the token width and every token is in [0, vocabSize). `origin` names
  // the data in messages (a path). InvalidArgument naming the first bad
  // token's index and value otherwise. Never fails on content otherwise:
  // any bytes are either accepted or refused.
  static absl::StatusOr<TokenData> fromBytes(std::string bytes,
                                             TokenFormat format,
                                             int64_t vocabSize,
                                             std::string_view origin);
  // Maps the file at `path` and validates it as fromBytes does.
  static absl::StatusOr<TokenData>
  fromFile(const std::string &path, TokenFormat format, int64_t vocabSize);

  int64_t size() const { return count_; }
  // Runs `reader`, which reads tokens; fails, naming the file, when the
  // file shrank under a read (MappedFile::read, whose rules `reader` must
  // follow). In-memory data just runs it.
  absl::Status read(absl::FunctionRef<void()> reader) const;
  // Fails, naming the file, when the data file was truncated or rewritten
  // since it was validated (MappedFile::checkUnchanged).
  absl::Status checkUnchanged() const;
  TokenFormat format() const { return format_; }
  const std::string &origin() const { return origin_; }

  // Token `i`, 0 <= i < size().
  int32_t operator[](int64_t i) const {
    switch (format_) {
    case TokenFormat::kText:
      return bytes_[i];
    case TokenFormat::kUint16:
      return static_cast<int32_t>(bytes_[2 * i] |
                                  (uint32_t{bytes_[2 * i + 1]} << 8));
    case TokenFormat::kInt32:
      break;
    }
    const uint8_t *p = bytes_ + 4 * i;
    return static_cast<int32_t>(p[0] | (uint32_t{p[1]} << 8) |
                                (uint32_t{p[2]} << 16) |
                                (uint32_t{p[3]} << 24));
  }

private:
  static absl::StatusOr<TokenData>
  validate(std::shared_ptr<const void> owner,
           std::shared_ptr<const MappedFile> file, const uint8_t *bytes,
           uint64_t size, TokenFormat format, int64_t vocabSize,
           std::string origin);
  // The first token outside [0, vocabSize), or -1.
  int64_t firstBadToken(int64_t vocabSize) const;

  // Keeps the mapping or buffer behind bytes_ alive; shared so that copies
  // of a TokenData are cheap.
  std::shared_ptr<const void> owner_;
  // The mapping of a file (null for in-memory data).
  std::shared_ptr<const MappedFile> file_;
  const uint8_t *bytes_ = nullptr;
  int64_t count_ = 0;
  TokenFormat format_ = TokenFormat::kText;
  std::string origin_;
};

} // namespace braid
