#include "runtime/data/TokenData.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/data/MappedFile.h"

namespace braid {

absl::StatusOr<TokenData> TokenData::validate(std::shared_ptr<const void> owner,
                                              const uint8_t *bytes,
                                              uint64_t size, TokenFormat format,
                                              int64_t vocabSize,
                                              std::string origin) {
  const int width = tokenWidth(format);
  if (size % width != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the data file '", origin, "' has ", size,
        " bytes, which is not a multiple of ", width, " (",
        tokenFormatName(format), " tokens): is --data-format right?"));
  TokenData data;
  data.owner_ = std::move(owner);
  data.bytes_ = bytes;
  data.count_ = static_cast<int64_t>(size / width);
  data.format_ = format;
  data.origin_ = std::move(origin);
  for (int64_t i = 0; i < data.count_; ++i) {
    int32_t t = data[i];
    if (t < 0 || t >= vocabSize)
      return absl::InvalidArgumentError(
          absl::StrCat("the data file '", data.origin_, "' holds token ", t,
                       " at index ", i, " (byte offset ", i * width,
                       "), outside the model's vocabulary "
                       "[0, ",
                       vocabSize,
                       "): is --data-format right, and was the data "
                       "tokenized for this model?"));
  }
  return data;
}

absl::StatusOr<TokenData> TokenData::fromBytes(std::string bytes,
                                               TokenFormat format,
                                               int64_t vocabSize,
                                               std::string_view origin) {
  auto owner = std::make_shared<const std::string>(std::move(bytes));
  const auto *data = reinterpret_cast<const uint8_t *>(owner->data());
  uint64_t size = owner->size();
  return validate(std::move(owner), data, size, format, vocabSize,
                  std::string(origin));
}

absl::StatusOr<TokenData> TokenData::fromFile(const std::string &path,
                                              TokenFormat format,
                                              int64_t vocabSize) {
  absl::StatusOr<MappedFile> file = MappedFile::open(path, "data");
  if (!file.ok())
    return file.status();
  auto owner = std::make_shared<const MappedFile>(std::move(*file));
  const uint8_t *data = owner->data();
  uint64_t size = owner->size();
  return validate(std::move(owner), data, size, format, vocabSize, path);
}

} // namespace braid
