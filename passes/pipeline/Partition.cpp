#include "passes/pipeline/Partition.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace braid::pipeline {
namespace {

std::string plural(int64_t n, const char *word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

absl::Status tooFewLayers(int64_t layers, int64_t stages) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the pipeline has ", stages, " stages but the model only ",
      plural(layers, "layer"),
      ": every stage needs a layer at least; lower pipeline_parallel or "
      "virtual_stages"));
}

// Numbers the stages' layers in model order.
void numberLayers(std::vector<StageLayers> &stages) {
  int64_t next = 0;
  for (StageLayers &s : stages) {
    s.first = next;
    next += s.layers;
  }
}

} // namespace

int64_t Partition::padding() const {
  int64_t n = 0;
  for (const StageLayers &s : stages)
    n += s.padding;
  return n;
}

std::vector<std::string> Partition::describe() const {
  std::vector<std::string> lines;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageLayers &s = stages[i];
    const int64_t stage = static_cast<int64_t>(i);
    std::string line =
        absl::StrCat("stage ", stage, " (rank ", placement.rankOf(stage),
                     ", chunk ", placement.chunkOf(stage), "): ");
    std::vector<std::string> parts;
    if (s.embedding)
      parts.push_back("embedding");
    if (s.layers == 1)
      parts.push_back(absl::StrCat("layer ", s.first));
    else if (s.layers > 1)
      parts.push_back(
          absl::StrCat("layers ", s.first, "-", s.first + s.layers - 1));
    else
      parts.push_back("no layers");
    if (s.padding > 0)
      parts.push_back(plural(s.padding, "empty layer"));
    if (s.loss)
      parts.push_back("loss");
    absl::StrAppend(&line, absl::StrJoin(parts, ", "));
    lines.push_back(std::move(line));
  }
  return lines;
}

namespace {

double stageCost(const StageLayers &s, const PartitionCosts &costs) {
  return static_cast<double>(s.layers) * costs.layer +
         (s.embedding ? costs.embedding : 0) + (s.loss ? costs.loss : 0);
}

// What each rank costs: the sum of its stages'.
std::vector<double> rankCosts(const std::vector<StageLayers> &stages,
                              const Placement &placement,
                              const PartitionCosts &costs) {
  std::vector<double> out(placement.ranks, 0);
  for (size_t s = 0; s < stages.size(); ++s)
    out[placement.rankOf(static_cast<int64_t>(s))] +=
        stageCost(stages[s], costs);
  return out;
}

double dearestRank(const std::vector<StageLayers> &stages,
                   const Placement &placement, const PartitionCosts &costs) {
  const std::vector<double> ranks = rankCosts(stages, placement, costs);
  return *std::max_element(ranks.begin(), ranks.end());
}

// `layers` over stages of `slots` slots each: every stage starts full, and
// each empty slot goes to the dearest rank (the sum of its stages: under
// interleaving or DualPipeV's V a rank holds several), to its dearest
// stage that still has a layer to give (the later on a tie; at least one
// layer stays on every stage), which minimises the dearest rank for this
// many slots.
std::vector<StageLayers> fillSlots(int64_t layers, const Placement &placement,
                                   int64_t slots, const PartitionCosts &costs) {
  const int64_t stages = placement.stages();
  std::vector<StageLayers> out(stages);
  for (StageLayers &s : out)
    s.layers = slots;
  out.front().embedding = true;
  out.back().loss = true;
  for (int64_t empty = slots * stages - layers; empty > 0; --empty) {
    const std::vector<double> ranks = rankCosts(out, placement, costs);
    int64_t pick = -1;
    for (int64_t s = stages - 1; s >= 0; --s) {
      if (out[s].layers <= 1)
        continue;
      if (pick < 0) {
        pick = s;
        continue;
      }
      const double rank = ranks[placement.rankOf(s)];
      const double picked = ranks[placement.rankOf(pick)];
      if (rank > picked ||
          (rank == picked &&
           stageCost(out[s], costs) > stageCost(out[pick], costs)))
        pick = s;
    }
    --out[pick].layers;
    ++out[pick].padding;
  }
  return out;
}

} // namespace

absl::StatusOr<Partition> partitionLayers(int64_t layers,
                                          const Placement &placement,
                                          const PartitionCosts &costs) {
  const int64_t stages = placement.stages();
  if (layers < stages)
    return tooFewLayers(layers, stages);
  // The fewest slots that hold the layers, or a few more where the
  // embedding or the loss costs enough that their ranks should give
  // layers away (more slots, more empty ones, on the other stages): the
  // first slot count whose dearest rank is cheapest wins. Past
  // (extra cost / layer cost) + 1 more slots nothing can improve.
  const int64_t fewest = (layers + stages - 1) / stages;
  const double extra = std::max(costs.embedding, costs.loss);
  const int64_t more =
      costs.layer > 0 ? static_cast<int64_t>(std::ceil(extra / costs.layer)) + 1
                      : 0;
  const int64_t most = std::min(fewest + more, layers - stages + 1);
  Partition p;
  p.placement = placement;
  p.stages = fillSlots(layers, placement, fewest, costs);
  for (int64_t slots = fewest + 1; slots <= most; ++slots) {
    std::vector<StageLayers> candidate =
        fillSlots(layers, placement, slots, costs);
    if (dearestRank(candidate, placement, costs) <
        dearestRank(p.stages, placement, costs))
      p.stages = std::move(candidate);
  }
  numberLayers(p.stages);
  return p;
}

absl::StatusOr<Partition> parseLayout(const std::string &layout, int64_t layers,
                                      const Placement &placement) {
  auto bad = [&](const std::string &why) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline_layout \"", layout, "\": ", why));
  };
  const int64_t stages = placement.stages();
  std::vector<std::string> texts = absl::StrSplit(layout, '|');
  if (static_cast<int64_t>(texts.size()) != stages)
    return bad(absl::StrCat(
        "it has ", plural(static_cast<int64_t>(texts.size()), "stage"),
        " ('|' separates them), the pipeline ", stages,
        placement.chunks > 1
            ? absl::StrCat(" (", plural(placement.ranks, "rank"), " x ",
                           placement.chunks, " chunks)")
            : std::string()));
  Partition p;
  p.placement = placement;
  p.stages.resize(stages);
  int64_t total = 0, embeddings = 0, losses = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const std::string &text = texts[s];
    StageLayers &stage = p.stages[s];
    bool lossSeen = false, any = false;
    size_t i = 0;
    auto skipSpace = [&] {
      while (i < text.size() &&
             std::isspace(static_cast<unsigned char>(text[i])))
        ++i;
    };
    for (skipSpace(); i < text.size(); skipSpace()) {
      const char item = text[i++];
      int64_t count = 1;
      skipSpace();
      if (i < text.size() && text[i] == '*') {
        ++i;
        skipSpace();
        const size_t start = i;
        while (i < text.size() &&
               std::isdigit(static_cast<unsigned char>(text[i])))
          ++i;
        if (!absl::SimpleAtoi(text.substr(start, i - start), &count) ||
            count < 0 || count > (int64_t{1} << 20))
          return bad(absl::StrCat("stage ", s, ": '", std::string(1, item),
                                  "*' needs a count of 0 to 1048576"));
      }
      if (lossSeen)
        return bad(absl::StrCat("stage ", s,
                                ": L (the loss) must close the last stage"));
      switch (item) {
      case 'E':
        if (s != 0 || any || count != 1)
          return bad("E (the embedding) must open the first stage, once");
        stage.embedding = true;
        ++embeddings;
        break;
      case 'L':
        if (s != stages - 1 || count != 1)
          return bad("L (the loss) must close the last stage, once");
        stage.loss = lossSeen = true;
        ++losses;
        break;
      case 't':
        stage.layers += count;
        total += count;
        break;
      case 'p':
        stage.padding += count;
        break;
      default:
        return bad(absl::StrCat(
            "stage ", s, ": '", std::string(1, item),
            "' is not an item; use E (embedding), t (a layer), p (an empty "
            "layer), L (loss), each optionally followed by *N"));
      }
      any = true;
    }
  }
  if (embeddings != 1)
    return bad("E (the embedding) must open the first stage");
  if (losses != 1)
    return bad("L (the loss) must close the last stage");
  if (total != layers)
    return bad(absl::StrCat("its t's sum to ", plural(total, "layer"),
                            ", the model has ", layers));
  for (int64_t s = 0; s < stages; ++s)
    if (p.stages[s].layers == 0 && !p.stages[s].embedding && !p.stages[s].loss)
      return bad(
          absl::StrCat("stage ", s, " holds nothing; give it a layer (t)"));
  numberLayers(p.stages);
  return p;
}

absl::StatusOr<Partition> makePartition(int64_t layers,
                                        const Placement &placement,
                                        const std::string &layout,
                                        const PartitionCosts &costs) {
  return layout.empty() ? partitionLayers(layers, placement, costs)
                        : parseLayout(layout, layers, placement);
}

} // namespace braid::pipeline
