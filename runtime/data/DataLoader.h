// Turns a token stream into training rows: window w holds tokens
// [w * S, w * S + S], its first S tokens are the inputs and its last S the
// labels (docs/numerics.md).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/SampleOrder.h"
#include "runtime/data/TokenData.h"

namespace braid {

class DataLoader {
public:
  // InvalidArgument, saying how many tokens are needed, when `data` holds
  // fewer than seqLen + 1 tokens. seqLen > 0.
  static absl::StatusOr<DataLoader> create(TokenData data, int64_t seqLen,
                                           uint64_t seed, bool shuffle);

  // W = (T - 1) / S: the number of windows.
  int64_t numWindows() const { return numWindows_; }
  int64_t seqLen() const { return seqLen_; }
  bool shuffled() const { return shuffle_; }
  const TokenData &data() const { return data_; }

  // Fills `rows` rows of S tokens and S labels with samples firstSample,
  // firstSample + 1, ...; `tokens` and `labels` hold rows * S values each.
  // InvalidArgument when a sample index is negative or beyond 2^63 - 1;
  // DataLoss, naming the file, when the data file was truncated or
  // rewritten since it was validated (the rows are then not to be used).
  absl::Status fill(int64_t firstSample, int64_t rows, int32_t *tokens,
                    int32_t *labels);

private:
  DataLoader(TokenData data, int64_t seqLen, int64_t numWindows, bool shuffle,
             SampleOrder order);

  TokenData data_;
  int64_t seqLen_;
  int64_t numWindows_;
  bool shuffle_;
  SampleOrder order_;
  // fill's scratch: the first token of each row.
  std::vector<int64_t> starts_;
};

} // namespace braid
