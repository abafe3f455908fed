// The pieces behind the loader: tokens, positions, field paths, name
// suggestions, error ordering and default names.
#include <gtest/gtest.h>

#include "compiler/spec/FieldPath.h"
#include "compiler/spec/NameSuggestion.h"
#include "compiler/spec/ParseErrors.h"
#include "compiler/spec/RuleChecks.h"
#include "compiler/spec/SpecDefaults.h"
#include "compiler/spec/SpecErrors.h"
#include "compiler/spec/SpecLexer.h"
#include "compiler/spec/TextPosition.h"

namespace braid {
namespace {

std::vector<std::string> texts(const std::vector<SpecToken> &tokens) {
  std::vector<std::string> out;
  for (const SpecToken &t : tokens)
    out.emplace_back(t.text);
  return out;
}

TEST(SpecLexer, SplitsLikeProtobuf) {
  std::vector<SpecToken> tokens =
      lexSpecText("a_1: -1.5e-3f # c { \n b <\"s\\\"{\" 0x1F 07 .5 2x>");
  EXPECT_EQ(texts(tokens),
            (std::vector<std::string>{"a_1", ":", "-", "1.5e-3f", "b", "<",
                                      "\"s\\\"{\"", "0x1F", "07", ".5", "2",
                                      "x", ">"}));
  EXPECT_EQ(tokens[0].kind, SpecTokenKind::kIdentifier);
  EXPECT_EQ(tokens[3].kind, SpecTokenKind::kNumber);
  EXPECT_EQ(tokens[6].kind, SpecTokenKind::kString);
  EXPECT_TRUE(tokens[5].is('<'));
  EXPECT_EQ(tokens[4].offset, 22u);
}

TEST(SpecLexer, UnterminatedStringEndsAtNewline) {
  std::vector<SpecToken> tokens = lexSpecText("'ab\\\n{");
  EXPECT_EQ(texts(tokens), (std::vector<std::string>{"'ab\\", "{"}));
}

TEST(SpecLexer, StrayBytesAreOwnTokens) {
  std::vector<SpecToken> tokens = lexSpecText(std::string("a\x01\xc3", 3));
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[1].kind, SpecTokenKind::kOther);
  EXPECT_EQ(tokens[2].kind, SpecTokenKind::kOther);
}

TEST(SpecLexer, OffsetsCountBytesWhateverTheTabs) {
  std::string text = "\ta:\t\t1 # \t{\n \t'x\ty'\tb\x01\t\x02;";
  std::vector<SpecToken> tokens = lexSpecText(text);
  EXPECT_EQ(texts(tokens),
            (std::vector<std::string>{"a", ":", "1", "'x\ty'", "b", "\x01",
                                      "\x02", ";"}));
  std::vector<size_t> offsets;
  for (const SpecToken &t : tokens)
    offsets.push_back(t.offset);
  EXPECT_EQ(offsets, (std::vector<size_t>{1, 2, 5, 14, 20, 21, 23, 24}));
}

TEST(SpecLexer, CommentEndsAtNulLikeProtobuf) {
  std::vector<SpecToken> tokens = lexSpecText(std::string("# a \0{ b", 8));
  EXPECT_EQ(texts(tokens),
            (std::vector<std::string>{std::string(1, '\0'), "{", "b"}));
  EXPECT_EQ(tokens[0].kind, SpecTokenKind::kOther);
  EXPECT_EQ(tokens[1].offset, 5u);
}

TEST(TextPositions, ConvertsProtobufColumnsWithTabs) {
  TextPositions positions("ab\n\tx\n");
  // Protobuf puts `x` at column 8 of line 1 (0-based): the tab fills 0-7.
  size_t x = positions.offsetOfProtobuf(1, 8);
  EXPECT_EQ(x, 4u);
  EXPECT_EQ(positions.pointAt(x), (TextPoint{2, 2}));
  EXPECT_EQ(positions.pointAt(0), (TextPoint{1, 1}));
  // Past the end of a line or the text is clamped.
  EXPECT_EQ(positions.offsetOfProtobuf(0, 99), 2u);
  EXPECT_EQ(positions.offsetOfProtobuf(9, 0), 6u);
  EXPECT_EQ(positions.pointAt(99), (TextPoint{3, 1}));
}

TEST(FieldPath, FollowsMessagesAndFields) {
  std::string text = "train { adamw { lr: 1 } steps: 3 } model < init {";
  std::vector<SpecToken> tokens = lexSpecText(text);
  auto pathAt = [&](std::string_view what) {
    return fieldContextAt(tokens, text.find(what)).path();
  };
  EXPECT_EQ(pathAt("lr"), "train.adamw.lr");
  EXPECT_EQ(pathAt("1 }"), "train.adamw.lr");
  EXPECT_EQ(pathAt("steps"), "train.steps");
  EXPECT_EQ(pathAt("3"), "train.steps");
  EXPECT_EQ(pathAt("model"), "model");
  FieldContext end = fieldContextAtEnd(tokens);
  EXPECT_EQ(end.messagePath(), "model.init");
  EXPECT_EQ(end.open.back().offset, text.find("init"));
}

TEST(FieldPath, ListsAndExtensionNames) {
  std::string text = "a: [1, { b: 2 }, 3] [x.y]: 4 c: 5";
  std::vector<SpecToken> tokens = lexSpecText(text);
  EXPECT_EQ(fieldContextAt(tokens, text.find("b:")).path(), "a.b");
  EXPECT_EQ(fieldContextAt(tokens, text.find("3")).path(), "a");
  EXPECT_EQ(fieldContextAt(tokens, text.find("4")).path(), "[x.y]");
  EXPECT_EQ(fieldContextAt(tokens, text.find("c:")).path(), "c");
}

TEST(FieldPath, FirstFieldNamed) {
  std::string text = "train { steps: 1 } model { steps: 2 } train { steps: 3 }";
  std::vector<SpecToken> tokens = lexSpecText(text);
  EXPECT_EQ(firstFieldNamed(tokens, "model.steps"), text.find("steps: 2"));
  EXPECT_EQ(firstFieldNamed(tokens, "train.steps"), text.find("steps: 1"));
  EXPECT_EQ(firstFieldNamed(tokens, "train.seed"), std::nullopt);
}

TEST(FieldPath, NestingDepth) {
  std::vector<SpecToken> tokens = lexSpecText("a { b [ c < > ] } { [ {");
  EXPECT_EQ(firstBracketDeeperThan(tokens, 3), std::nullopt);
  EXPECT_EQ(firstBracketDeeperThan(tokens, 2), 10u);
  // Unbalanced closers do not lower the count below zero.
  EXPECT_EQ(firstBracketDeeperThan(lexSpecText("} } { {"), 1), 6u);
}

TEST(NameSuggestion, EditDistance) {
  EXPECT_EQ(editDistance("vocab_sise", "vocab_size"), 1);
  EXPECT_EQ(editDistance("Vocab_Size", "vocab_size"), 0);
  EXPECT_EQ(editDistance("", "abc"), 3);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3);
}

TEST(NameSuggestion, ClosestOnlyWhenClose) {
  std::vector<std::string> names = {"lr", "beta1", "beta2", "eps"};
  EXPECT_EQ(closestName("beta_1", names), "beta1");
  EXPECT_EQ(closestName("ep", names), "eps");
  EXPECT_EQ(closestName("momentum", names), std::nullopt);
}

TEST(RuleChecks, NearbyChoices) {
  auto divides64 = [](int64_t d) { return 64 % d == 0; };
  EXPECT_EQ(nearbyChoices(6, 64, divides64), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(nearbyChoices(100, 64, divides64), (std::vector<int64_t>{64}));
  EXPECT_EQ(nearbyChoices(1, 64, divides64), (std::vector<int64_t>{2}));
  EXPECT_EQ(formatChoices({4, 8}), "4 or 8");
  // Far beyond the search window nothing is suggested, and quickly.
  EXPECT_TRUE(nearbyChoices(INT64_MAX, INT64_MAX, [](int64_t) {
                return false;
              }).empty());
}

TEST(SpecErrors, OrderedByPositionWithoutDuplicates) {
  SpecErrors errors("x.pbtxt");
  errors.add({3, 1}, "b", "second");
  errors.add({1, 5}, "a", "first");
  errors.add({3, 1}, "c", "third");
  errors.add({3, 1}, "c", "third");
  errors.add({1, 5}, "", "top");
  EXPECT_EQ(errors.toStatus().message(), "x.pbtxt:1:5: a: first\n"
                                         "x.pbtxt:1:5: (top level): top\n"
                                         "x.pbtxt:3:1: b: second\n"
                                         "x.pbtxt:3:1: c: third");
  EXPECT_TRUE(SpecErrors("y").toStatus().ok());
}

TEST(ParseErrors, UnrecognisedMessagesKeepProtobufWording) {
  std::string text = "model { x: 1 }";
  ParseErrorCollector collector;
  collector.AddError(0, 11, "Something new went wrong.");
  std::vector<SpecError> errors =
      describeParseErrors(collector, TextPositions(text), lexSpecText(text));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].at, (TextPoint{1, 12}));
  EXPECT_EQ(errors[0].path, "model.x");
  EXPECT_EQ(errors[0].message, "syntax error: Something new went wrong");
}

TEST(ParseErrors, PrintableToken) {
  EXPECT_EQ(printableToken("ab\x01\xff"), "ab\\x01\\xff");
  EXPECT_EQ(printableToken("abcdef", 3), "abc...");
}

TEST(SpecDefaults, NameFromDisplayName) {
  EXPECT_EQ(defaultSpecName("models/llama3-8b.pbtxt"), "llama3-8b");
  EXPECT_EQ(defaultSpecName("C:\\specs\\gpt.v2.pbtxt"), "gpt.v2");
  EXPECT_EQ(defaultSpecName("..."), "model");
  EXPECT_EQ(defaultSpecName(std::string(100, 'a')), std::string(64, 'a'));
}

} // namespace
} // namespace braid
