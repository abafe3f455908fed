// Token files, their validation, and the sample order of docs/numerics.md.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/data/DataLoader.h"
#include "runtime/data/SampleOrder.h"
#include "runtime/data/TokenData.h"
#include "runtime/data/TokenFormat.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

std::string messageOf(const absl::Status &s) {
  return std::string(s.message());
}

#define EXPECT_MESSAGE(status, fragment)                                       \
  do {                                                                         \
    absl::Status s_ = (status);                                                \
    EXPECT_FALSE(s_.ok());                                                     \
    EXPECT_NE(messageOf(s_).find(fragment), std::string::npos)                 \
        << "message: " << s_.message();                                        \
  } while (false)

std::string le16(std::vector<uint16_t> v) {
  std::string s;
  for (uint16_t x : v) {
    s += static_cast<char>(x & 0xFF);
    s += static_cast<char>(x >> 8);
  }
  return s;
}

std::string le32(std::vector<int32_t> v) {
  std::string s;
  for (int32_t x : v)
    for (int i = 0; i < 4; ++i)
      s += static_cast<char>((static_cast<uint32_t>(x) >> (8 * i)) & 0xFF);
  return s;
}

TEST(TokenFormat, ParsesAndChoosesFormats) {
  EXPECT_EQ(*parseTokenFormat("uint16"), TokenFormat::kUint16);
  EXPECT_MESSAGE(parseTokenFormat("u16").status(),
                 "unknown data format \"u16\": use text, uint16 or int32");
  EXPECT_EQ(*chooseTokenFormat("corpus.txt", std::nullopt), TokenFormat::kText);
  EXPECT_EQ(*chooseTokenFormat("corpus.txt", std::string("int32")),
            TokenFormat::kInt32);
  EXPECT_MESSAGE(chooseTokenFormat("corpus.bin", std::nullopt).status(),
                 "cannot tell the format of the data file 'corpus.bin' from "
                 "its name: pass --data-format=text");
}

TEST(TokenData, DecodesEachFormat) {
  absl::StatusOr<TokenData> text =
      TokenData::fromBytes("Hi\xff", TokenFormat::kText, 256, "mem");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(text->size(), 3);
  EXPECT_EQ((*text)[0], 'H');
  EXPECT_EQ((*text)[2], 255);

  absl::StatusOr<TokenData> u16 = TokenData::fromBytes(
      le16({1, 300, 65535}), TokenFormat::kUint16, 65536, "mem");
  ASSERT_TRUE(u16.ok()) << u16.status();
  EXPECT_EQ((*u16)[1], 300);
  EXPECT_EQ((*u16)[2], 65535);

  absl::StatusOr<TokenData> i32 = TokenData::fromBytes(
      le32({7, 100000, 0}), TokenFormat::kInt32, 200000, "mem");
  ASSERT_TRUE(i32.ok()) << i32.status();
  EXPECT_EQ((*i32)[1], 100000);
}

TEST(TokenData, RefusesMalformedData) {
  EXPECT_MESSAGE(
      TokenData::fromBytes("abc", TokenFormat::kUint16, 256, "d.bin").status(),
      "the data file 'd.bin' has 3 bytes, which is not a multiple of 2 "
      "(uint16 tokens)");
  EXPECT_MESSAGE(
      TokenData::fromBytes("abcdef", TokenFormat::kInt32, 256, "d.bin")
          .status(),
      "which is not a multiple of 4 (int32 tokens)");
  EXPECT_MESSAGE(TokenData::fromBytes(le16({1, 2, 50000, 3}),
                                      TokenFormat::kUint16, 50000, "d.bin")
                     .status(),
                 "the data file 'd.bin' holds token 50000 at index 2 (byte "
                 "offset 4), outside the model's vocabulary [0, 50000)");
  EXPECT_MESSAGE(
      TokenData::fromBytes(le32({5, -1}), TokenFormat::kInt32, 10, "d.bin")
          .status(),
      "holds token -1 at index 1");
  // A byte-level file for a model with a vocabulary below 256.
  EXPECT_MESSAGE(
      TokenData::fromBytes("aa\x80", TokenFormat::kText, 128, "t.txt").status(),
      "holds token 128 at index 2");
}

TEST(TokenData, ReadsFilesAndNamesMissingOnes) {
  absl::StatusOr<TokenData> missing =
      TokenData::fromFile("/nonexistent/data.bin", TokenFormat::kText, 256);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_MESSAGE(missing.status(),
                 "cannot open the data file '/nonexistent/data.bin'");
  EXPECT_MESSAGE(
      TokenData::fromFile(test::scratchDir(), TokenFormat::kText, 256).status(),
      "is not a regular file");

  std::string path = std::string(BRAID_DATA_DIR) + "/tinyshakespeare.txt";
  absl::StatusOr<TokenData> data =
      TokenData::fromFile(path, TokenFormat::kText, 256);
  ASSERT_TRUE(data.ok()) << data.status();
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EXPECT_EQ(data->size(), static_cast<int64_t>(in.tellg()));
  EXPECT_EQ((*data)[0], 'F'); // "First Citizen:"

  std::string empty = test::scratchDir() + "/empty.bin";
  std::ofstream(empty).close();
  absl::StatusOr<TokenData> none =
      TokenData::fromFile(empty, TokenFormat::kUint16, 256);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), 0);
}

TEST(SampleOrder, SequentialWrapsAround) {
  SampleOrder order(5, 1234, false);
  for (int64_t j = 0; j < 12; ++j)
    EXPECT_EQ(order.window(j), j % 5);
}

TEST(SampleOrder, ShuffleMatchesTheDocumentedFisherYates) {
  // Goldens computed from docs/numerics.md by an independent Python
  // implementation of splitmix64 and the shuffle.
  EXPECT_EQ(SampleOrder::permutation(10, 1234, 0),
            (std::vector<int64_t>{9, 5, 3, 0, 7, 4, 8, 6, 2, 1}));
  EXPECT_EQ(SampleOrder::permutation(10, 1234, 1),
            (std::vector<int64_t>{4, 0, 9, 7, 5, 1, 3, 8, 6, 2}));
  EXPECT_EQ(SampleOrder::permutation(10, 99, 0),
            (std::vector<int64_t>{5, 1, 4, 7, 2, 0, 9, 3, 8, 6}));
  SampleOrder order(10, 1234, true);
  EXPECT_EQ(order.window(0), 9);
  EXPECT_EQ(order.window(3), 0);
  EXPECT_EQ(order.window(10), 4); // epoch 1 starts
  EXPECT_EQ(order.window(2), 3);  // back in epoch 0
  EXPECT_EQ(SampleOrder::permutation(1, 1, 0), (std::vector<int64_t>{0}));
}

TEST(SampleOrder, EveryEpochVisitsEveryWindowOnce) {
  SampleOrder order(97, 7, true);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    for (int64_t j = 0; j < 97; ++j)
      seen.insert(order.window(epoch * 97 + j));
    EXPECT_EQ(seen.size(), 97u);
    EXPECT_EQ(*seen.rbegin(), 96);
  }
}

TEST(DataLoader, WindowsGiveTokensAndShiftedLabels) {
  std::string bytes;
  for (int i = 0; i < 20; ++i)
    bytes += static_cast<char>('a' + i);
  absl::StatusOr<TokenData> data =
      TokenData::fromBytes(bytes, TokenFormat::kText, 256, "mem");
  ASSERT_TRUE(data.ok());
  absl::StatusOr<DataLoader> loader = DataLoader::create(*data, 4, 1, false);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->numWindows(), 4); // (20 - 1) / 4
  std::vector<int32_t> tokens(3 * 4), labels(3 * 4);
  ASSERT_TRUE(loader->fill(3, 3, tokens.data(), labels.data()).ok());
  // Samples 3, 4, 5.
  // Sample 3 is window 3 (tokens 12..15), 4 wraps to window 0, 5 is 1.
  EXPECT_EQ(tokens, (std::vector<int32_t>{'m', 'n', 'o', 'p', 'a', 'b', 'c',
                                          'd', 'e', 'f', 'g', 'h'}));
  EXPECT_EQ(labels, (std::vector<int32_t>{'n', 'o', 'p', 'q', 'b', 'c', 'd',
                                          'e', 'f', 'g', 'h', 'i'}));
}

TEST(DataLoader, ShuffledRowsFollowThePermutation) {
  std::string bytes(41, '\0');
  for (int i = 0; i < 41; ++i)
    bytes[i] = static_cast<char>(i);
  absl::StatusOr<DataLoader> loader = DataLoader::create(
      *TokenData::fromBytes(bytes, TokenFormat::kText, 256, "mem"), 4, 1234,
      true);
  ASSERT_TRUE(loader.ok());
  ASSERT_EQ(loader->numWindows(), 10);
  std::vector<int32_t> tokens(10 * 4), labels(10 * 4);
  ASSERT_TRUE(loader->fill(0, 10, tokens.data(), labels.data()).ok());
  const std::vector<int64_t> perm = {9, 5, 3, 0, 7, 4, 8, 6, 2, 1};
  for (int b = 0; b < 10; ++b) {
    EXPECT_EQ(tokens[b * 4], perm[b] * 4) << "row " << b;
    EXPECT_EQ(labels[b * 4 + 3], perm[b] * 4 + 4) << "row " << b;
  }
}

TEST(DataLoader, RefusesDataShorterThanOneWindow) {
  absl::StatusOr<TokenData> data =
      TokenData::fromBytes("abcde", TokenFormat::kText, 256, "short.txt");
  ASSERT_TRUE(data.ok());
  EXPECT_MESSAGE(DataLoader::create(*data, 8, 1, false).status(),
                 "the data file 'short.txt' holds 5 tokens, but one training "
                 "window needs seq_len + 1 = 9");
  EXPECT_MESSAGE(
      DataLoader::create(
          *TokenData::fromBytes("", TokenFormat::kText, 256, "e"), 1, 1, false)
          .status(),
      "holds 0 tokens");
  // Exactly seq_len + 1 tokens make one window.
  EXPECT_EQ(DataLoader::create(*TokenData::fromBytes(
                                   "abcdefghi", TokenFormat::kText, 256, "e"),
                               8, 1, false)
                ->numWindows(),
            1);
}

// Sample arithmetic is checked: a data position near 2^63 (a corrupt
// checkpoint's) is refused instead of wrapping to a negative index.
TEST(DataLoader, RefusesSamplesOutsideTheRange) {
  absl::StatusOr<DataLoader> loader = DataLoader::create(
      *TokenData::fromBytes("abcdefghij", TokenFormat::kText, 256, "mem"), 4,
      1, false);
  ASSERT_TRUE(loader.ok());
  std::vector<int32_t> tokens(8), labels(8);
  EXPECT_MESSAGE(loader->fill(INT64_MAX - 1, 2, tokens.data(), labels.data()),
                 "are outside [0, 2^63): the data position is corrupt");
  EXPECT_MESSAGE(loader->fill(-3, 2, tokens.data(), labels.data()),
                 "samples -3 + 2 are outside");
}

// A data file truncated or rewritten in place while a run reads it stops
// the run with a message naming the file, never with SIGBUS.
TEST(DataLoader, SurvivesAFileChangedUnderIt) {
  const std::string path = test::scratchDir() + "/changing.txt";
  const std::string text(20000, 'x');
  std::ofstream(path, std::ios::binary) << text;
  // Backdate the file, so that a rewrite within the same clock tick still
  // changes its modification time.
  struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), old, 0), 0);
  absl::StatusOr<TokenData> data =
      TokenData::fromFile(path, TokenFormat::kText, 256);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<DataLoader> loader = DataLoader::create(*data, 8, 1, false);
  ASSERT_TRUE(loader.ok());
  std::vector<int32_t> tokens(2 * 8), labels(2 * 8);
  ASSERT_TRUE(loader->fill(0, 2, tokens.data(), labels.data()).ok());

  // Rewritten in place, same size: the bytes mapped are no longer the
  // ones validated.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f << "yyyy";
  }
  EXPECT_MESSAGE(loader->fill(0, 2, tokens.data(), labels.data()),
                 "the data file '" + path +
                     "' was rewritten while in use (its modification time "
                     "changed)");

  // Truncated: reading past the new end raises SIGBUS, caught in the read.
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  absl::Status s = loader->fill(2000, 2, tokens.data(), labels.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_MESSAGE(s, "the data file '" + path +
                        "' was truncated while in use (reading it failed "
                        "with SIGBUS)");
  EXPECT_MESSAGE(data->checkUnchanged(), "it had 20000 bytes and now has 100");
}

} // namespace
} // namespace braid
