// Rules of the `compile` block: the fusion list.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "compiler/spec/SpecErrors.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {

const std::vector<std::string> &knownFusionNames() {
  static const std::vector<std::string> kNames = {
      "gqa",          "flash-attention",      "rope-qkv",
      "add-norm",     "bias-gelu",            "bias-swiglu",
      "bias-dropout-add", "linear-cross-entropy", "adamw"};
  return kNames;
}

void validateCompile(const spec::Compile &compile, RuleSink &sink) {
  absl::string_view text = absl::StripAsciiWhitespace(compile.fusion());
  if (text.empty() || text == "all" || text == "none")
    return;
  const std::vector<std::string> &known = knownFusionNames();
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    absl::string_view name = absl::StripAsciiWhitespace(raw);
    // As braidc --fusion: "all" may stand beside names, "none" may not.
    if (name == "all")
      continue;
    if (name == "none") {
      sink.report("compile.fusion",
                  "\"none\" cannot stand beside fusions; write \"none\" "
                  "alone for no fusion");
      return;
    }
    bool found = false;
    for (const std::string &k : known)
      found |= k == name;
    if (found)
      continue;
    std::string shown(name);
    sink.report("compile.fusion",
                absl::StrCat(name.empty() ? std::string("an empty name")
                                          : absl::StrCat("\"",
                                                         printableToken(shown),
                                                         "\""),
                             " is not a fusion; write \"all\", \"none\" or "
                             "names separated by commas from: ",
                             absl::StrJoin(known, ", ")));
    return;
  }
}

} // namespace braid
