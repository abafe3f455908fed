#include "runtime/data/DataLoader.h"

#include <limits>
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

absl::Status DataLoader::fill(int64_t firstSample, int64_t rows,
                              int32_t *tokens, int32_t *labels) {
  if (firstSample < 0 || rows < 0 ||
      firstSample > std::numeric_limits<int64_t>::max() - rows)
    return absl::InvalidArgumentError(
        absl::StrCat("samples ", firstSample, " + ", rows,
                     " are outside [0, 2^63): the data position is corrupt"));
  // Window starts are computed before the guarded read: the shuffled order
  // allocates its permutation, which a jump out of the read must not skip.
  starts_.resize(static_cast<size_t>(rows));
  for (int64_t b = 0; b < rows; ++b)
    starts_[b] = order_.window(firstSample + b) * seqLen_;
  if (absl::Status s = data_.read([&] {
        for (int64_t b = 0; b < rows; ++b) {
          const int64_t start = starts_[b];
          int32_t *t = tokens + b * seqLen_;
          int32_t *l = labels + b * seqLen_;
          for (int64_t k = 0; k < seqLen_; ++k) {
            t[k] = data_[start + k];
            l[k] = data_[start + k + 1];
          }
        }
      });
      !s.ok())
    return s;
  return data_.checkUnchanged();
}

} // namespace braid
