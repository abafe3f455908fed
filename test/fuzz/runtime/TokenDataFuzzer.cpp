// Arbitrary bytes as a token file in each format, then as training rows in
// both sample orders.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/data/DataLoader.h"
#include "runtime/data/TokenData.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace braid;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  for (TokenFormat format :
       {TokenFormat::kText, TokenFormat::kUint16, TokenFormat::kInt32}) {
    for (int64_t vocab : {int64_t{50}, int64_t{256}, int64_t{1} << 31}) {
      absl::StatusOr<TokenData> tokens =
          TokenData::fromBytes(bytes, format, vocab, "fuzz");
      if (!tokens.ok())
        continue;
      for (int64_t seqLen : {1, 3, 16}) {
        for (bool shuffle : {false, true}) {
          absl::StatusOr<DataLoader> loader =
              DataLoader::create(*tokens, seqLen, size, shuffle);
          if (!loader.ok())
            continue;
          constexpr int64_t kRows = 3;
          std::vector<int32_t> in(kRows * seqLen), labels(kRows * seqLen);
          // Rows far into the run wrap around the epochs. Whatever the
          // bytes, every id handed to a kernel is inside the vocabulary, and
          // labels are the tokens shifted by one.
          for (int64_t first : {int64_t{0}, int64_t{1} << 40}) {
            loader->fill(first, kRows, in.data(), labels.data());
            for (int64_t i = 0; i < kRows * seqLen; ++i) {
              if (in[i] < 0 || in[i] >= vocab || labels[i] < 0 ||
                  labels[i] >= vocab)
                std::abort();
              if (i % seqLen != seqLen - 1 && labels[i] != in[i + 1])
                std::abort();
            }
          }
        }
      }
    }
  }
  return 0;
}
