#include "compiler/spec/FusionList.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/spec/SpecErrors.h"

namespace braid {
namespace {

std::string validNames() {
  return absl::StrCat("write \"all\", \"none\" or names separated by commas "
                      "from: ",
                      absl::StrJoin(fusionNames(), ", "));
}

} // namespace

const std::vector<std::string> &fusionNames() {
  // Attention first: the GQA rewrite feeds flash attention, and RoPE in the
  // QKV epilogue must see the projections before the norm and activation
  // fusions rename their neighbours. AdamW works on the sched programs.
  static const std::vector<std::string> kNames = {"gqa",
                                                  "flash-attention",
                                                  "rope-qkv",
                                                  "add-norm",
                                                  "bias-gelu",
                                                  "bias-swiglu",
                                                  "bias-dropout-add",
                                                  "linear-cross-entropy",
                                                  "moe",
                                                  "adamw"};
  return kNames;
}

absl::StatusOr<std::vector<std::string>>
parseFusionNames(std::string_view text) {
  absl::string_view list =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (list.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("the fusion list is empty; ", validNames()));
  if (list == "none")
    return std::vector<std::string>();
  std::vector<bool> chosen(fusionNames().size(), false);
  for (absl::string_view raw : absl::StrSplit(list, ',')) {
    absl::string_view name = absl::StripAsciiWhitespace(raw);
    if (name == "all") {
      std::fill(chosen.begin(), chosen.end(), true);
      continue;
    }
    if (name == "none")
      return absl::InvalidArgumentError(
          "\"none\" cannot stand beside fusions; write \"none\" alone for no "
          "fusion");
    auto it = std::find(fusionNames().begin(), fusionNames().end(), name);
    if (it == fusionNames().end())
      return absl::InvalidArgumentError(absl::StrCat(
          name.empty()
              ? std::string("an empty name")
              : absl::StrCat("\"", printableToken(std::string(name)), "\""),
          " is not a fusion; ", validNames()));
    chosen[it - fusionNames().begin()] = true;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i])
      out.push_back(fusionNames()[i]);
  return out;
}

bool namesEveryFusion(std::string_view text) {
  for (absl::string_view raw :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ','))
    if (absl::StripAsciiWhitespace(raw) == "all")
      return true;
  return false;
}

} // namespace braid
