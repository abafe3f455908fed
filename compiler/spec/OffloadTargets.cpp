#include "compiler/spec/OffloadTargets.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "compiler/spec/SpecErrors.h"

namespace braid {

namespace {

constexpr const char *kAccepted =
    "write none, or optimizer, activations (every layer's) or activations: "
    "followed by items separated by commas, each a layer N, a range of "
    "layers N-M (N <= M) or a pipeline stage stage-S, and both separated by "
    "a semicolon, e.g. activations:0-3,stage-1; optimizer";

// User text as messages quote it: control bytes escaped (an error is one
// line), long text cut.
std::string quoted(absl::string_view text) {
  return absl::StrCat("'", printableToken({text.data(), text.size()}), "'");
}

absl::Status invalid(absl::string_view item, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(quoted(item), " ", what));
}

bool allDigits(absl::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
}

// A layer or stage number of `item`: decimal digits only (no sign, no
// spaces inside), 0 to kMaxOffloadIndex.
absl::StatusOr<int64_t> parseIndex(absl::string_view text,
                                   absl::string_view item) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() > 1 && text[0] == '-' && allDigits(text.substr(1)))
    return invalid(item, "is negative: layers and stages count from 0");
  if (!allDigits(text))
    return invalid(item, absl::StrCat("is not a layer N, a range of layers "
                                      "N-M or a stage stage-S; ",
                                      kAccepted));
  // Past 7 significant digits a number is beyond kMaxOffloadIndex, and
  // might overflow the conversion.
  const size_t nonZero = text.find_first_not_of('0');
  const absl::string_view significant =
      nonZero == absl::string_view::npos ? "0" : text.substr(nonZero);
  int64_t value = 0;
  if (significant.size() <= 7)
    for (char c : significant)
      value = value * 10 + (c - '0');
  if (significant.size() > 7 || value > kMaxOffloadIndex)
    return invalid(
        item, absl::StrCat("names ", printableToken({text.data(), text.size()}),
                           ", beyond the largest layer or stage "
                           "number an item may name, ",
                           kMaxOffloadIndex));
  return value;
}

// One item after "activations:": a stage, a layer or a range of layers.
// Ranges are kept as intervals and expanded once merged, so that the
// targets hold each layer once however the items overlap.
absl::Status parseItem(absl::string_view item,
                       std::vector<std::pair<int64_t, int64_t>> &ranges,
                       std::vector<int64_t> &stages) {
  constexpr absl::string_view kStage = "stage-";
  if (item.substr(0, kStage.size()) == kStage) {
    absl::StatusOr<int64_t> s = parseIndex(item.substr(kStage.size()), item);
    if (!s.ok())
      return s.status();
    stages.push_back(*s);
    return absl::OkStatus();
  }
  // A dash after the first character separates a range; a leading one is
  // a sign, which parseIndex refuses.
  const size_t dash = item.find('-', 1);
  absl::StatusOr<int64_t> first = parseIndex(item.substr(0, dash), item);
  if (!first.ok())
    return first.status();
  int64_t last = *first;
  if (dash != absl::string_view::npos) {
    absl::StatusOr<int64_t> end = parseIndex(item.substr(dash + 1), item);
    if (!end.ok())
      return end.status();
    if (*end < *first)
      return invalid(item, absl::StrCat("is not a range: its first layer is "
                                        "after its last; write ",
                                        *end, "-", *first));
    last = *end;
  }
  ranges.emplace_back(*first, last);
  return absl::OkStatus();
}

// The layers of `ranges`, sorted and unique: sorted by their first
// layers, each range adds only what lies above every earlier one, so the
// work is bounded by the layers written, however the items overlap.
std::vector<int64_t> expand(std::vector<std::pair<int64_t, int64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<int64_t> layers;
  for (auto [first, last] : ranges) {
    const int64_t from =
        layers.empty() ? first : std::max(first, layers.back() + 1);
    for (int64_t l = from; l <= last; ++l)
      layers.push_back(l);
  }
  return layers;
}

// "7", "2-7", "2-3 and 5": sorted unique numbers as runs.
std::string formatRuns(const std::vector<int64_t> &numbers) {
  std::vector<std::string> runs;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1)
      ++j;
    runs.push_back(i == j ? absl::StrCat(numbers[i])
                          : absl::StrCat(numbers[i], "-", numbers[j]));
    i = j + 1;
  }
  if (runs.size() <= 1)
    return absl::StrJoin(runs, "");
  const std::string last = runs.back();
  runs.pop_back();
  return absl::StrCat(absl::StrJoin(runs, ", "), " and ", last);
}

// "layer 7 does not exist" or "layers 2-3 and 7 do not exist".
std::string missing(const char *what, const std::vector<int64_t> &numbers) {
  const bool one = numbers.size() == 1;
  return absl::StrCat(what, one ? " " : "s ", formatRuns(numbers),
                      one ? " does" : " do", " not exist");
}

// "2 layers (0-1)", "1 layer (0)".
std::string countOf(int64_t n, const char *what) {
  return absl::StrCat(n, " ", what, n == 1 ? "" : "s", " (",
                      n == 1 ? "0" : absl::StrCat("0-", n - 1), ")");
}

// One activations target, "activations" or "activations:<items>", into
// `targets`.
absl::Status parseActivations(absl::string_view term, size_t colon,
                              OffloadTargets &targets) {
  if (colon == absl::string_view::npos) {
    targets.allLayers = true;
    return absl::OkStatus();
  }
  const absl::string_view list = term.substr(colon + 1);
  if (absl::StripAsciiWhitespace(list).empty())
    return invalid(term,
                   absl::StrCat("names nothing after the colon; ", kAccepted));
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(part);
    if (item.empty())
      return invalid(term, absl::StrCat("has an empty item; ", kAccepted));
    if (absl::Status s = parseItem(item, ranges, targets.stages); !s.ok())
      return s;
  }
  targets.layers = expand(std::move(ranges));
  std::sort(targets.stages.begin(), targets.stages.end());
  targets.stages.erase(
      std::unique(targets.stages.begin(), targets.stages.end()),
      targets.stages.end());
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<OffloadTargets> parseOffloadTargets(std::string_view text) {
  // absl::string_view is not std::string_view in this build.
  const absl::string_view whole =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  OffloadTargets targets;
  if (whole.empty() || whole == "none")
    return targets;
  bool activations = false;
  for (absl::string_view part : absl::StrSplit(whole, ';')) {
    const absl::string_view term = absl::StripAsciiWhitespace(part);
    if (term.empty())
      return invalid(whole, absl::StrCat("has an empty target between "
                                         "semicolons; ",
                                         kAccepted));
    const size_t colon = term.find(':');
    const absl::string_view kind =
        absl::StripAsciiWhitespace(term.substr(0, colon));
    if (kind == "none")
      return absl::InvalidArgumentError(absl::StrCat(
          quoted(whole), ": none offloads nothing and takes no list nor "
                         "other target; ",
          kAccepted));
    if (kind == "optimizer") {
      if (colon != absl::string_view::npos)
        return invalid(term, absl::StrCat("takes no list: the optimizer of "
                                          "every parameter the rank holds "
                                          "goes to the host; ",
                                          kAccepted));
      if (targets.optimizer)
        return invalid(whole, absl::StrCat("names optimizer twice; ",
                                           kAccepted));
      targets.optimizer = true;
      continue;
    }
    if (kind != "activations")
      return invalid(kind, absl::StrCat("is not an offload target kind: the "
                                        "known kinds are none, activations "
                                        "(what each transformer layer saves "
                                        "for its backward) and optimizer "
                                        "(fp32 masters, Adam moments and "
                                        "AdamW); ",
                                        kAccepted));
    if (activations)
      return invalid(whole,
                     absl::StrCat("names activations twice: list every layer "
                                  "and stage after one activations:; ",
                                  kAccepted));
    activations = true;
    if (absl::Status s = parseActivations(term, colon, targets); !s.ok())
      return s;
  }
  return targets;
}

absl::Status checkOffloadTargetsExist(const OffloadTargets &targets,
                                      int64_t layers, int64_t stages,
                                      int64_t ranks) {
  std::vector<std::string> problems;
  // Both lists are sorted: what does not exist is a suffix of each.
  const std::vector<int64_t> missingLayers(
      std::lower_bound(targets.layers.begin(), targets.layers.end(), layers),
      targets.layers.end());
  if (!missingLayers.empty())
    problems.push_back(absl::StrCat(missing("layer", missingLayers),
                                    ": the model has ",
                                    countOf(layers, "layer")));
  const std::vector<int64_t> missingStages(
      std::lower_bound(targets.stages.begin(), targets.stages.end(), stages),
      targets.stages.end());
  if (!missingStages.empty()) {
    // With chunks, a rank holds several stages: say so, since stage
    // numbers then run past the pipeline ranks.
    const std::string chunks =
        ranks > 0 && stages > ranks
            ? absl::StrCat(", ", stages / ranks, " on each of ", ranks,
                           " pipeline ranks")
            : "";
    problems.push_back(absl::StrCat(missing("stage", missingStages),
                                    ": the layout has ",
                                    countOf(stages, "pipeline stage"), chunks));
  }
  if (problems.empty())
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

} // namespace braid
