#include "runtime/data/DataLoader.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace braid {

DataLoader::DataLoader(TokenData data, int64_t seqLen, int64_t numWindows,
                       bool shuffle, SampleOrder order)
    : data_(std::move(data)), seqLen_(seqLen), numWindows_(numWindows),
      shuffle_(shuffle), order_(std::move(order)) {}

absl::StatusOr<DataLoader> DataLoader::create(TokenData data, int64_t seqLen,
                                              uint64_t seed, bool shuffle) {
  if (seqLen <= 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the sequence length is ", seqLen, ": it must be positive"));
  if (data.size() - 1 < seqLen)
    return absl::InvalidArgumentError(absl::StrCat(
        "the data file '", data.origin(), "' holds ", data.size(),
        " tokens, but one training window needs seq_len + 1 = ", seqLen + 1,
        ": use a larger file"));
  const int64_t windows = (data.size() - 1) / seqLen;
  SampleOrder order(windows, seed, shuffle);
  return DataLoader(std::move(data), seqLen, windows, shuffle,
                    std::move(order));
}

void DataLoader::fill(int64_t firstSample, int64_t rows, int32_t *tokens,
                      int32_t *labels) {
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t start = order_.window(firstSample + b) * seqLen_;
    int32_t *t = tokens + b * seqLen_;
    int32_t *l = labels + b * seqLen_;
    for (int64_t s = 0; s < seqLen_; ++s) {
      t[s] = data_[start + s];
      l[s] = data_[start + s + 1];
    }
  }
}

} // namespace braid
