#include "runtime/data/TokenData.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/io/MappedFile.h"

namespace braid {

int64_t TokenData::firstBadToken(int64_t vocabSize) const {
  for (int64_t i = 0; i < count_; ++i) {
    int32_t t = (*this)[i];
    if (t < 0 || t >= vocabSize)
      return i;
  }
  return -1;
}

absl::StatusOr<TokenData>
TokenData::validate(std::shared_ptr<const void> owner,
                    std::shared_ptr<const MappedFile> file,
                    const uint8_t *bytes, uint64_t size, TokenFormat format,
                    int64_t vocabSize, std::string origin) {
  const int width = tokenWidth(format);
  if (size % width != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the data file '", origin, "' has ", size,
        " bytes, which is not a multiple of ", width, " (",
        tokenFormatName(format), " tokens): is --data-format right?"));
  TokenData data;
  data.owner_ = std::move(owner);
  data.file_ = std::move(file);
  data.bytes_ = bytes;
  data.count_ = static_cast<int64_t>(size / width);
  data.format_ = format;
  data.origin_ = std::move(origin);
  int64_t bad = -1;
  int32_t badValue = 0;
  if (absl::Status s = data.read([&] {
        bad = data.firstBadToken(vocabSize);
        if (bad >= 0)
          badValue = data[bad];
      });
      !s.ok())
    return s;
  if (bad >= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("the data file '", data.origin_, "' holds token ",
                     badValue, " at index ", bad, " (byte offset ",
                     bad * width,
                     "), outside the model's vocabulary "
                     "[0, ",
                     vocabSize,
                     "): is --data-format right, and was the data "
                     "tokenized for this model?"));
  return data;
}

absl::Status TokenData::read(absl::FunctionRef<void()> reader) const {
  return readMapped(file_.get(), reader);
}

absl::Status TokenData::checkUnchanged() const {
  return file_ == nullptr ? absl::OkStatus() : file_->checkUnchanged();
}

absl::StatusOr<TokenData> TokenData::fromBytes(std::string bytes,
                                               TokenFormat format,
                                               int64_t vocabSize,
                                               std::string_view origin) {
  auto owner = std::make_shared<const std::string>(std::move(bytes));
  const auto *data = reinterpret_cast<const uint8_t *>(owner->data());
  uint64_t size = owner->size();
  return validate(std::move(owner), nullptr, data, size, format, vocabSize,
                  std::string(origin));
}

absl::StatusOr<TokenData> TokenData::fromFile(const std::string &path,
                                              TokenFormat format,
                                              int64_t vocabSize) {
  absl::StatusOr<MappedFile> file = MappedFile::open(path, "data");
  if (!file.ok())
    return file.status();
  auto mapping = std::make_shared<const MappedFile>(std::move(*file));
  const uint8_t *data = mapping->data();
  uint64_t size = mapping->size();
  return validate(mapping, mapping, data, size, format, vocabSize, path);
}

} // namespace braid
