// The safetensors reader and writer, and every way a header can be bad.
#include <cstring>
#include <string>
#include <vector>

#include "runtime/ckpt/Safetensors.h"
#include "runtime/io/WholeFile.h"
#include "test/unit/runtime/TinyTrainer.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

// A file from a header and data section, with a correct length prefix.
std::string file(const std::string &header, const std::string &data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string errorOf(const std::string &bytes) {
  absl::StatusOr<SafetensorsFile> f = SafetensorsFile::parse(bytes, "t.st");
  EXPECT_FALSE(f.ok());
  return f.ok() ? "" : std::string(f.status().message());
}

#define EXPECT_ERROR(bytes, fragment)                                          \
  do {                                                                         \
    std::string m_ = errorOf(bytes);                                           \
    EXPECT_NE(m_.find(fragment), std::string::npos) << "message: " << m_;      \
  } while (false)

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::vector<int32_t> b = {42};
  std::string path = test::scratchDir() + "/round.safetensors";
  std::vector<SafetensorsTensor> tensors = {
      {"layer.weight",
       "F32",
       {2, 3},
       std::string_view(reinterpret_cast<const char *>(a.data()), 24)},
      {"count",
       "I32",
       {},
       std::string_view(reinterpret_cast<const char *>(b.data()), 4)},
      {"empty", "F32", {0, 5}, std::string_view()},
  };
  ASSERT_TRUE(
      writeSafetensors(path, tensors, {{"format", "pt"}, {"note", "a \"q\""}})
          .ok());
  absl::StatusOr<std::string> bytes = readWholeFile(path, "test");
  ASSERT_TRUE(bytes.ok());
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, bytes->data(), 8);
  EXPECT_EQ(headerLen % 8, 0u); // data starts 8-byte aligned

  absl::StatusOr<SafetensorsFile> f = SafetensorsFile::read(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors().size(), 3u);
  const SafetensorsTensor *w = f->find("layer.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, "F32");
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(w->data.size(), 24u);
  EXPECT_EQ(std::memcmp(w->data.data(), a.data(), 24), 0);
  EXPECT_EQ(f->find("count")->shape, std::vector<int64_t>{});
  EXPECT_EQ(f->find("empty")->data.size(), 0u);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_EQ(f->metadata().at("note"), "a \"q\"");
  EXPECT_EQ(f->metadata().at("format"), "pt");

  // The views stay valid when the file object moves.
  SafetensorsFile moved = std::move(*f);
  EXPECT_EQ(std::memcmp(moved.find("layer.weight")->data.data(), a.data(), 24),
            0);
}

TEST(Safetensors, ParsesAHandWrittenFile) {
  // Tensors listed out of data order; shapes of any rank.
  std::string data(4 + 8, '\x01');
  absl::StatusOr<SafetensorsFile> f = SafetensorsFile::parse(
      file("{\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]},"
           "\"a\":{\"dtype\":\"BF16\",\"shape\":[1,2],"
           "\"data_offsets\":[0,4]}}",
           data),
      "t.st");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->tensors()[0].name, "a");
  EXPECT_EQ(f->tensors()[1].name, "b");
  EXPECT_TRUE(f->metadata().empty());
}

TEST(Safetensors, WriterRefusesInconsistentTensors) {
  std::string path = test::scratchDir() + "/bad.safetensors";
  float x = 1;
  std::string_view one(reinterpret_cast<const char *>(&x), 4);
  absl::Status s =
      writeSafetensors(path, {{"t", "F32", {2}, one}}, {}).status();
  EXPECT_NE(std::string(s.message()).find("do not match its 4 bytes"),
            std::string::npos)
      << s;
  s = writeSafetensors(path, {{"t", "F32", {1}, one}, {"t", "F32", {1}, one}},
                       {})
          .status();
  EXPECT_NE(std::string(s.message()).find("two tensors are called \"t\""),
            std::string::npos)
      << s;
  s = writeSafetensors(path, {{"t", "Q8", {1}, one}}, {}).status();
  EXPECT_FALSE(s.ok());
  s = writeSafetensors("/nonexistent/dir/x.safetensors", {}, {}).status();
  EXPECT_NE(std::string(s.message()).find("cannot create"), std::string::npos);
}

TEST(Safetensors, RefusesBadLengthsAndHeaders) {
  EXPECT_ERROR(std::string(5, '\0'),
               "the safetensors file 't.st' is 5 bytes long, too short to "
               "hold the 8-byte header length");
  std::string huge(8, '\0');
  huge[4] = 1; // 2^32
  EXPECT_ERROR(huge, "announces a header of 4294967296 bytes, more than the "
                     "limit of 100000000");
  std::string longer = file("{}");
  longer[0] = 9;
  EXPECT_ERROR(longer, "announces a header of 9 bytes but only 2 bytes follow "
                       "the length");
  EXPECT_ERROR(file("{\"a\":"),
               "has a header that is not valid JSON: invalid JSON at byte 5");
  EXPECT_ERROR(file("[]"), "has a header that is not a JSON object");
}

TEST(Safetensors, RefusesBadEntries) {
  EXPECT_ERROR(file("{\"t\":1}"), "has tensor \"t\" described by a non-object");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":"
                    "[0,4],\"x\":1}}",
                    "abcd"),
               "has tensor \"t\" with unknown field \"x\"");
  EXPECT_ERROR(file("{\"t\":{\"shape\":[],\"data_offsets\":[0,4]}}", "abcd"),
               "has tensor \"t\" without dtype, shape and data_offsets");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F31\",\"shape\":[],"
                    "\"data_offsets\":[0,4]}}",
                    "abcd"),
               "has tensor \"t\" with unknown dtype F31");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":7,\"shape\":[],"
                    "\"data_offsets\":[0,4]}}",
                    "abcd"),
               "with unknown dtype (not a string)");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F32\",\"shape\":{},"
                    "\"data_offsets\":[0,4]}}",
                    "abcd"),
               "whose shape is not an array");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],"
                    "\"data_offsets\":[0,4]}}",
                    "abcd"),
               "whose shape holds something other than a non-negative "
               "integer");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],"
                    "\"data_offsets\":[0,4]}}",
                    "abcd"),
               "non-negative integer");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],"
                    "\"data_offsets\":[0]}}",
                    "abcd"),
               "whose data_offsets is not a pair of non-negative integers");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],"
                    "\"data_offsets\":[4,0]}}",
                    "abcd"),
               "whose data_offsets [4, 0] end before they begin");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
                    "\"data_offsets\":[0,4]}}",
                    "abcd"),
               "has tensor \"t\" of dtype F32 and shape [2] but data_offsets "
               "[0, 4] span 4 bytes");
  EXPECT_ERROR(file("{\"t\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,"
                    "4],\"data_offsets\":[0,0]}}"),
               "span 0 bytes");
}

TEST(Safetensors, RefusesOffsetsThatDoNotTileTheData) {
  const std::string t4 = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":";
  EXPECT_ERROR(file("{\"t\":" + t4 + "[4,8]}}", "abcd"),
               "has tensor \"t\" with data_offsets [4, 8] past the end of the "
               "data section (4 bytes)");
  EXPECT_ERROR(file("{\"a\":" + t4 + "[0,4]},\"b\":" + t4 + "[0,4]}}", "abcd"),
               "whose bytes [0, 4) overlap those of another tensor");
  EXPECT_ERROR(file("{\"a\":" + t4 + "[4,8]}}", "abcdefgh"),
               "has a gap: no tensor covers data bytes [0, 4)");
  EXPECT_ERROR(file("{\"a\":" + t4 + "[0,4]}}", "abcdefgh"),
               "has 4 trailing data bytes that belong to no tensor");
  EXPECT_ERROR(file("{}", "x"), "has 1 trailing data bytes");
}

TEST(Safetensors, RefusesBadMetadata) {
  EXPECT_ERROR(file("{\"__metadata__\":[]}"),
               "has a __metadata__ that is not an object");
  EXPECT_ERROR(file("{\"__metadata__\":{\"step\":3}}"),
               "has __metadata__ entry \"step\" whose value is not a string");
}

} // namespace
} // namespace braid
