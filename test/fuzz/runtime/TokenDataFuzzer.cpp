// Arbitrary bytes as a token file in each format, then as training rows in
// both sample orders.
#include <cstddef>
#include <cstdint>
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
          // Rows far into the run wrap around the epochs.
          for (int64_t first : {int64_t{0}, int64_t{1} << 40})
            loader->fill(first, kRows, in.data(), labels.data());
        }
      }
    }
  }
  return 0;
}
