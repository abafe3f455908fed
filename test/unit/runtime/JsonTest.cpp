#include <string>

#include "runtime/ckpt/Json.h"
#include "gtest/gtest.h"

namespace braid {
namespace {

std::string errorOf(const std::string &text) {
  absl::StatusOr<JsonValue> v = parseJson(text);
  EXPECT_FALSE(v.ok()) << "accepted: " << text;
  return v.ok() ? "" : std::string(v.status().message());
}

TEST(Json, ParsesDocuments) {
  absl::StatusOr<JsonValue> v = parseJson(
      " {\"a\": [1, -2.5e3, true, false, null], \"b\": {\"c\": \"x\\n\\u00e9"
      "\\ud83d\\ude00\\\"\"}, \"d\": 18446744073709551615} ");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->type, JsonValue::Type::kObject);
  const JsonValue *a = v->find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 5u);
  EXPECT_EQ(a->array[1].text, "-2.5e3");
  EXPECT_TRUE(a->array[2].boolean);
  EXPECT_FALSE(a->array[3].boolean);
  EXPECT_EQ(a->array[4].type, JsonValue::Type::kNull);
  EXPECT_EQ(v->find("b")->find("c")->text, "x\n\xc3\xa9\xf0\x9f\x98\x80\"");
  uint64_t d = 0;
  EXPECT_TRUE(v->find("d")->asUint64(&d));
  EXPECT_EQ(d, 18446744073709551615ull);
  EXPECT_EQ(v->find("zz"), nullptr);
  uint64_t x;
  EXPECT_FALSE(a->array[1].asUint64(&x)); // negative, not an integer
  EXPECT_FALSE(parseJson("18446744073709551616")->asUint64(&x));
  EXPECT_TRUE(parseJson("\"\xe2\x82\xac\"").ok()); // raw UTF-8 is fine
}

TEST(Json, RefusesWhatRfc8259Refuses) {
  EXPECT_EQ(errorOf("{\"a\": 1,}"),
            "invalid JSON at byte 8: expected a string key, found byte 0x7d");
  EXPECT_EQ(errorOf("{\"a\": 1, \"a\": 2}"),
            "invalid JSON at byte 9: expected a key not used before in this "
            "object, found byte 0x22");
  EXPECT_EQ(errorOf("[1 2]"),
            "invalid JSON at byte 3: expected ',' or ']', found byte 0x32");
  EXPECT_EQ(errorOf("\"abc"),
            "invalid JSON at byte 4: expected a closing '\"', found the end "
            "of the text");
  EXPECT_NE(errorOf("\"a\x01\"").find("no control characters"),
            std::string::npos);
  EXPECT_NE(errorOf("\"\xc3\x28\"").find("valid UTF-8"), std::string::npos);
  EXPECT_NE(errorOf("\"\xed\xa0\x80\"").find("valid UTF-8"),
            std::string::npos); // an encoded surrogate
  EXPECT_NE(errorOf("\"\\ud800\"").find("low surrogate"), std::string::npos);
  EXPECT_NE(errorOf("\"\\udc00\"").find("high surrogate"), std::string::npos);
  EXPECT_NE(errorOf("\"\\x\"").find("after '\\'"), std::string::npos);
  EXPECT_NE(errorOf("01").find("end of input"), std::string::npos);
  EXPECT_NE(errorOf("1.").find("a digit after '.'"), std::string::npos);
  EXPECT_NE(errorOf("1e").find("exponent"), std::string::npos);
  EXPECT_NE(errorOf("-").find("a digit"), std::string::npos);
  EXPECT_NE(errorOf("tru").find("expected a value"), std::string::npos);
  EXPECT_NE(errorOf("").find("expected a value"), std::string::npos);
  EXPECT_NE(errorOf("{} x").find("end of input after the value"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"a\" 1}").find("':'"), std::string::npos);
  // Nesting is bounded so that hostile input cannot exhaust the stack.
  EXPECT_TRUE(parseJson(std::string(64, '[') + std::string(64, ']')).ok());
  EXPECT_NE(errorOf(std::string(65, '[') + std::string(65, ']'))
                .find("at most 64 nested levels"),
            std::string::npos);
  EXPECT_NE(errorOf(std::string(100000, '[')).find("nested"),
            std::string::npos);
}

TEST(Json, QuoteRoundTrips) {
  const std::string s = "a\"b\\c\n\t\x01\xc3\xa9";
  EXPECT_EQ(jsonQuote(s), "\"a\\\"b\\\\c\\n\\t\\u0001\xc3\xa9\"");
  absl::StatusOr<JsonValue> v = parseJson(jsonQuote(s));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->text, s);
}

} // namespace
} // namespace braid
