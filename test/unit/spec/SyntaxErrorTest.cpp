// Syntax errors: each kind protobuf reports, rewritten, at the right
// line:column and field path.
#include <algorithm>

#include "test/unit/spec/SpecTestSupport.h"

namespace braid::test {
namespace {

TEST(SyntaxErrors, UnknownFieldSuggestsClosestName) {
  EXPECT_EQ(errorOf(edit(kLlama, "vocab_size", "vocab_sise")),
            "t.pbtxt:3:3: model.vocab_sise: no field named vocab_sise in "
            "model; did you mean vocab_size?");
}

TEST(SyntaxErrors, UnknownFieldMatchesCaseInsensitively) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_layers", "Num_Layers")),
            "t.pbtxt:5:3: model.Num_Layers: no field named Num_Layers in "
            "model; did you mean num_layers?");
}

TEST(SyntaxErrors, UnknownFieldInWrongMessageNamesItsHome) {
  EXPECT_EQ(errorOf(edit(kLlama, "  naming: HF_LLAMA\n",
                         "  naming: HF_LLAMA\n  seq_len: 16\n")),
            "t.pbtxt:13:3: model.seq_len: no field named seq_len in model; "
            "seq_len belongs in train, not in model");
}

TEST(SyntaxErrors, UnknownFieldListsTheKnownOnes) {
  EXPECT_EQ(errorOf(edit(kLlama, "adamw { lr: 1e-3 }",
                         "adamw { lr: 1e-3 momentum: 0.9 }")),
            "t.pbtxt:18:20: train.adamw.momentum: no field named momentum in "
            "train.adamw; the fields of train.adamw are lr, beta1, beta2, "
            "eps and weight_decay");
}

TEST(SyntaxErrors, UnknownTopLevelField) {
  EXPECT_EQ(errorOf(std::string("version: 2\n") + std::string(kLlama)),
            "t.pbtxt:1:1: version: no field named version in the top level; "
            "the fields of the top level are name, model, parallel, train "
            "and compile");
}

TEST(SyntaxErrors, AllUnknownFieldsAreReportedTogether) {
  std::string text = edit(kLlama, "vocab_size", "vocab_sise");
  text = edit(text, "steps", "step");
  text = edit(text, "adamw { lr", "adamw { learning_rate");
  EXPECT_EQ(errorOf(text),
            "t.pbtxt:3:3: model.vocab_sise: no field named vocab_sise in "
            "model; did you mean vocab_size?\n"
            "t.pbtxt:17:3: train.step: no field named step in train; did you "
            "mean steps?\n"
            "t.pbtxt:18:11: train.adamw.learning_rate: no field named "
            "learning_rate in train.adamw; the fields of train.adamw are lr, "
            "beta1, beta2, eps and weight_decay");
}

TEST(SyntaxErrors, UnknownEnumNameListsAllowedNames) {
  EXPECT_EQ(
      errorOf(edit(kLlama, "norm: RMS_NORM", "norm: RMSNORM")),
      "t.pbtxt:9:9: model.norm: RMSNORM is not a valid Norm; write LAYER_NORM "
      "or RMS_NORM (did you mean RMS_NORM?)");
}

TEST(SyntaxErrors, UnknownEnumNameWithoutCloseMatch) {
  EXPECT_EQ(errorOf(edit(kLlama, "activation: SWIGLU", "activation: TANH")),
            "t.pbtxt:10:15: model.activation: TANH is not a valid Activation; "
            "write GELU or SWIGLU");
}

TEST(SyntaxErrors, QuotedEnumName) {
  EXPECT_EQ(errorOf(edit(kLlama, "naming: HF_LLAMA", "naming: \"HF_LLAMA\"")),
            "t.pbtxt:12:11: model.naming: \"HF_LLAMA\" is not a valid "
            "CheckpointNaming; write HF_LLAMA, HF_GPT2, HF_MIXTRAL or "
            "HF_DEEPSEEK_V3 without quotes");
}

TEST(SyntaxErrors, EnumNumberOutOfRange) {
  EXPECT_EQ(errorOf(edit(kLlama, "norm: RMS_NORM", "norm: 9999999999")),
            "t.pbtxt:9:9: model.norm: 9999999999 is not a valid Norm; write "
            "LAYER_NORM or RMS_NORM");
}

TEST(SyntaxErrors, NotAnInteger) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_layers: 2", "num_layers: 2.5")),
            "t.pbtxt:5:15: model.num_layers: expected a whole number, got "
            "2.5");
}

TEST(SyntaxErrors, IntegerOutOfRange) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "steps: 99999999999999999999")),
            "t.pbtxt:17:10: train.steps: 99999999999999999999 does not fit a "
            "64-bit integer; steps takes a whole number of at most "
            "9223372036854775807 in magnitude");
}

TEST(SyntaxErrors, NegativeUnsignedSeed) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "steps: 10\n  seed: -1")),
            "t.pbtxt:18:9: train.seed: seed is unsigned; write a whole number "
            "from 0 to 18446744073709551615");
}

TEST(SyntaxErrors, UnsignedSeedOutOfRange) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10",
                         "steps: 10 seed: 18446744073709551616")),
            "t.pbtxt:17:19: train.seed: 18446744073709551616 is out of range; "
            "seed takes a whole number from 0 to 18446744073709551615");
}

TEST(SyntaxErrors, NotANumber) {
  EXPECT_EQ(errorOf(edit(kLlama, "lr: 1e-3", "lr: fast")),
            "t.pbtxt:18:15: train.adamw.lr: expected a decimal number, got "
            "fast");
}

TEST(SyntaxErrors, QuotedNumber) {
  EXPECT_EQ(errorOf(edit(kLlama, "lr: 1e-3", "lr: \"1e-3\"")),
            "t.pbtxt:18:15: train.adamw.lr: expected a decimal number, got "
            "\"1e-3\"; write the number without quotes");
}

TEST(SyntaxErrors, HexFloat) {
  EXPECT_EQ(errorOf(edit(kLlama, "lr: 1e-3", "lr: 0x10")),
            "t.pbtxt:18:15: train.adamw.lr: expected a decimal number, got "
            "0x10");
}

// A hexadecimal floating-point literal is named as such, with its value in
// decimal, whichever way the tokenizer splits it.
TEST(SyntaxErrors, HexFloatLiteral) {
  EXPECT_EQ(errorOf(edit(kLlama, "lr: 1e-3", "lr: 0x1p-10")),
            "t.pbtxt:18:15: train.adamw.lr: '0x1p-10' is a hexadecimal "
            "floating-point number, which specs do not take; write it in "
            "decimal: 0.0009765625");
  EXPECT_EQ(errorOf(edit(kLlama, "lr: 1e-3", "lr: 0x1.8p3")),
            "t.pbtxt:18:15: train.adamw.lr: '0x1.8p3' is a hexadecimal "
            "floating-point number, which specs do not take; write it in "
            "decimal: 12");
}

TEST(SyntaxErrors, ByteOrderMark) {
  EXPECT_EQ(errorOf("\xEF\xBB\xBF" + std::string(kLlama)),
            "t.pbtxt:1:1: (top level): the file starts with a UTF-8 "
            "byte-order mark (bytes EF BB BF); save it as UTF-8 without a "
            "BOM, or remove those three bytes");
}

TEST(SyntaxErrors, NotABoolean) {
  EXPECT_EQ(errorOf(edit(kLlama, "  naming: HF_LLAMA\n",
                         "  naming: HF_LLAMA\n  linear_bias: maybe\n")),
            "t.pbtxt:13:16: model.linear_bias: expected true or false, got "
            "maybe");
}

TEST(SyntaxErrors, BooleanOutOfRange) {
  EXPECT_EQ(errorOf(edit(kLlama, "  naming: HF_LLAMA\n",
                         "  naming: HF_LLAMA\n  tie_embeddings: 2\n")),
            "t.pbtxt:13:19: model.tie_embeddings: expected true or false, "
            "got 2");
}

TEST(SyntaxErrors, UnquotedString) {
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"", "name: t")),
            "t.pbtxt:1:7: name: expected a quoted string, got t; write name: "
            "\"t\"");
}

TEST(SyntaxErrors, MessageWrittenAsValue) {
  EXPECT_EQ(errorOf(edit(kLlama, "adamw { lr: 1e-3 }", "adamw: 3")),
            "t.pbtxt:18:10: train.adamw: adamw is a message, not a value; "
            "write adamw { ... }");
}

TEST(SyntaxErrors, MissingColon) {
  EXPECT_EQ(errorOf(edit(kLlama, "seq_len: 16", "seq_len 16")),
            "t.pbtxt:16:11: train.seq_len: expected ':' after seq_len, found "
            "16; write seq_len: 16");
}

TEST(SyntaxErrors, UnclosedMessageAtEndOfFile) {
  std::string text(kLlama);
  text.resize(text.rfind('}'));
  EXPECT_EQ(errorOf(text),
            "t.pbtxt:19:1: train: the file ends inside train, opened at "
            "14:1; add the missing '}'");
}

TEST(SyntaxErrors, UnclosedNestedMessageAtEndOfFile) {
  EXPECT_EQ(errorOf("train {\n  adamw { lr: 1\n"),
            "t.pbtxt:3:1: train.adamw: the file ends inside train.adamw, "
            "opened at 2:3; add the missing '}'");
}

TEST(SyntaxErrors, UnmatchedClosingBrace) {
  EXPECT_EQ(errorOf(std::string(kLlama) + "}\n"),
            "t.pbtxt:20:1: (top level): unmatched '}': no message is open "
            "here; remove it");
}

TEST(SyntaxErrors, StrayValueWhereAFieldBelongs) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_layers: 2", "num_layers: 2 3")),
            "t.pbtxt:5:17: model: expected a field name, got 3");
}

TEST(SyntaxErrors, FieldSetTwice) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "steps: 10\n  steps: 20")),
            "t.pbtxt:18:3: train.steps: steps is set twice (first at 17:3); "
            "keep one of the two lines");
}

TEST(SyntaxErrors, MessageWrittenTwice) {
  EXPECT_EQ(errorOf(std::string(kLlama) + "model { vocab_size: 3 }\n"),
            "t.pbtxt:20:1: model: model is written twice (first at 2:1); "
            "merge the two blocks into one");
}

TEST(SyntaxErrors, Extension) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "[braid.x]: 1")),
            "t.pbtxt:17:3: train: [braid.x] is an extension name; specs use "
            "no extensions, remove it");
}

TEST(SyntaxErrors, ControlCharacter) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "steps: 10 \x01")),
            "t.pbtxt:17:13: train: byte 0x01 is a control character; a spec "
            "is plain text, remove it");
}

TEST(SyntaxErrors, NonAsciiOutsideString) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "st\xc3\xa9ps: 10")),
            "t.pbtxt:17:5: train.st: byte 0xc3 is not ASCII; outside quoted "
            "strings a spec uses ASCII only");
}

TEST(SyntaxErrors, UnterminatedString) {
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"", "name: \"t")),
            "t.pbtxt:1:9: name: this string is not closed; add the closing "
            "quote on the same line");
}

TEST(SyntaxErrors, InvalidEscape) {
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"", "name: \"a\\qb\"")),
            "t.pbtxt:1:10: name: invalid escape sequence in a string; write "
            "\\\\ for a backslash");
}

TEST(SyntaxErrors, InvalidUnicodeEscape) {
  EXPECT_EQ(errorOf(edit(kLlama, "name: \"t\"", "name: \"\\u12\"")),
            "t.pbtxt:1:12: name: invalid escape sequence in a string; write "
            "\\\\ for a backslash");
}

TEST(SyntaxErrors, HexPrefixWithoutDigits) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_layers: 2", "num_layers: 0xg")),
            "t.pbtxt:5:17: model.num_layers: 0x must be followed by "
            "hexadecimal digits\n"
            "t.pbtxt:5:17: model.num_layers: a number runs into a name here; "
            "put a space between them");
}

TEST(SyntaxErrors, NumberRunsIntoName) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_layers: 2", "num_layers: 2x")),
            "t.pbtxt:5:16: model.num_layers: a number runs into a name here; "
            "put a space between them");
}

TEST(SyntaxErrors, NameRunsIntoDecimalPoint) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "steps: 10 seed.5: 1")),
            "t.pbtxt:17:17: train.seed: a name runs into a decimal point "
            "here; put a space between them");
}

TEST(SyntaxErrors, UnknownFieldWithBadNegativeValue) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "stepz: -inn")),
            "t.pbtxt:17:3: train.stepz: no field named stepz in train; did "
            "you mean steps?\n"
            "t.pbtxt:17:11: train.stepz: expected a decimal number, got inn");
}

TEST(SyntaxErrors, ExponentWithoutDigits) {
  EXPECT_EQ(errorOf(edit(kLlama, "lr: 1e-3", "lr: 1e")),
            "t.pbtxt:18:17: train.adamw.lr: the exponent of this number has "
            "no digits; write it like 1e-5");
}

TEST(SyntaxErrors, LeadingZeroIsOctal) {
  EXPECT_EQ(errorOf(edit(kLlama, "num_layers: 2", "num_layers: 09")),
            "t.pbtxt:5:16: model.num_layers: a number with a leading zero is "
            "octal and takes only the digits 0-7; remove the leading zero");
}

TEST(SyntaxErrors, UnskippableUnknownValue) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "stepz: }")),
            "t.pbtxt:17:3: train.stepz: no field named stepz in train; did "
            "you mean steps?\n"
            "t.pbtxt:17:10: train.stepz: expected a value, got }");
}

TEST(SyntaxErrors, OtherExpectedToken) {
  EXPECT_EQ(errorOf(edit(kLlama, "steps: 10", "stepz: [1, 2")),
            "t.pbtxt:17:3: train.stepz: no field named stepz in train; did "
            "you mean steps?\n"
            "t.pbtxt:18:3: train.stepz: expected ',', found adamw");
}

TEST(SyntaxErrors, NestingTooDeep) {
  std::string deep = "model { x " + std::string(20, '{') + "\n";
  EXPECT_EQ(errorOf(deep),
            "t.pbtxt:1:26: model.x: brackets nest more than 16 levels deep "
            "here; a spec nests at most two (train { adamw { ... } }), so "
            "close the brackets left open");
}

// Protobuf's tokenizer ends a '#' comment at a NUL byte, so brackets after
// one on the same line are real and count.
TEST(SyntaxErrors, NestingTooDeepAfterNulInComment) {
  std::string deep =
      std::string("model { # \0 ", 12) + std::string(20, '{') + "\n";
  EXPECT_EQ(errorOf(deep),
            "t.pbtxt:1:28: model: brackets nest more than 16 levels deep "
            "here; a spec nests at most two (train { adamw { ... } }), so "
            "close the brackets left open");
}

TEST(SyntaxErrors, ManyErrorsAreCappedWithACount) {
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += "x" + std::to_string(i) + ": 1\n";
  std::string message = errorOf(text);
  size_t lines = std::count(message.begin(), message.end(), '\n') + 1;
  EXPECT_EQ(lines, 51u);
  EXPECT_EQ(message.substr(message.rfind('\n') + 1),
            "t.pbtxt:51:1: x50: 10 more syntax errors follow from here; fix "
            "the ones above first");
}

TEST(SyntaxErrors, HugeTextOfErrorsStaysFast) {
  std::string text;
  while (text.size() + 4 <= kMaxSpecBytes)
    text += "a:1\n";
  std::string message = errorOf(text);
  EXPECT_EQ(message.substr(message.rfind('\n') + 1),
            "t.pbtxt:51:1: a: 262094 more syntax errors follow from here; fix "
            "the ones above first");
}

TEST(SyntaxErrors, TabsCountAsOneColumn) {
  EXPECT_EQ(errorOf(edit(kLlama, "  vocab_size", "\t\tvocab_sise")),
            "t.pbtxt:3:3: model.vocab_sise: no field named vocab_sise in "
            "model; did you mean vocab_size?");
}

TEST(SyntaxErrors, LongTokensAreShortenedAndEscaped) {
  EXPECT_EQ(
      errorOf(edit(kLlama, "name: \"t\"", "name: " + std::string(50, 'a'))),
      "t.pbtxt:1:7: name: expected a quoted string, got "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...; write name: "
      "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"");
}

} // namespace
} // namespace braid::test
