#include "compiler/spec/RecomputePolicy.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace braid {

namespace {

// The groups a policy may name, and the op kinds each stands for (the
// fused ops with the unfused ones they replace).
const std::map<std::string, std::vector<std::string>> &groups() {
  static const auto *g = new std::map<std::string, std::vector<std::string>>{
      {"norm",
       {"rms_norm", "layer_norm", "fused_add_rms_norm",
        "fused_add_layer_norm"}},
      {"activation",
       {"swiglu", "gelu", "fused_bias_swiglu", "fused_bias_gelu"}},
      {"attention", {"attention", "flash_attention"}},
      // A mixture-of-experts block's levels (docs/memory.md): kinds after
      // "moe:" count only inside an MoE block, "moe:*" is every op of one.
      // Light: the router, the permutations (and the sub-units' split),
      // the activation function (fused or not: braid-fuse-moe).
      {"moe-light",
       {"moe:moe_route", "moe:moe_scores", "moe:moe_topk", "moe:moe_permute",
        "moe:moe_sort", "moe:moe_gather", "moe:moe_gather_choices",
        "moe:moe_split_tokens", "moe:swiglu", "moe:fused_bias_swiglu"}},
      // Medium: and the experts' GEMMs and the shared experts (and the
      // router's linear).
      {"moe-medium",
       {"moe:moe_route", "moe:moe_scores", "moe:moe_topk", "moe:moe_permute",
        "moe:moe_sort", "moe:moe_gather", "moe:moe_gather_choices",
        "moe:moe_split_tokens", "moe:swiglu", "moe:fused_bias_swiglu",
        "moe:moe_grouped_linear", "moe:moe_batched_linear", "moe:linear"}},
      // Full: the whole block, expert parallel's exchanges included.
      {"moe-full", {"moe:*"}},
  };
  return *g;
}

constexpr const char *kAccepted =
    "none, auto, full, selective, uniform-N, block-N (N a number of layers, 1 or "
    "more), or op kinds separated by commas: norm, activation, attention, "
    "moe-light, moe-medium, moe-full or forward op names such as rms_norm or "
    "rope";

absl::StatusOr<int64_t> layerCount(const std::string &text,
                                   const std::string &whole) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 1 || n > (int64_t{1} << 20))
    return absl::InvalidArgumentError(
        absl::StrCat("'", whole, "' needs a number of layers from 1 to ",
                     int64_t{1} << 20, " after the dash; use ", kAccepted));
  return n;
}

} // namespace

const std::vector<std::string> &recomputableOps() {
  static const auto *ops = new std::vector<std::string>{
      "add",
      "attention",
      "dropout",
      "embedding",
      "flash_attention",
      "fused_add_layer_norm",
      "fused_add_rms_norm",
      "fused_bias_dropout_add",
      "fused_bias_gelu",
      "fused_bias_swiglu",
      "fused_linear_rope",
      "gelu",
      "layer_norm",
      "linear",
      // The experts' GEMMs (in a mixture-of-experts block only).
      "moe_batched_linear",
      "moe_grouped_linear",
      "repeat_kv",
      "rms_norm",
      "rope",
      "swiglu",
  };
  return *ops;
}

absl::StatusOr<RecomputePolicy> parseRecomputePolicy(std::string_view text) {
  const std::string whole(
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())));
  RecomputePolicy policy;
  if (whole.empty() || whole == "none")
    return policy;
  if (whole == "auto") {
    policy.kind = RecomputePolicy::Kind::kAuto;
    return policy;
  }
  if (whole == "full") {
    policy.kind = RecomputePolicy::Kind::kFull;
    policy.layers = 1;
    return policy;
  }
  for (auto [prefix, kind] :
       {std::pair{std::string("uniform-"), RecomputePolicy::Kind::kUniform},
        std::pair{std::string("block-"), RecomputePolicy::Kind::kBlock}}) {
    if (whole.rfind(prefix, 0) != 0)
      continue;
    absl::StatusOr<int64_t> n =
        layerCount(whole.substr(prefix.size()), whole);
    if (!n.ok())
      return n.status();
    policy.kind = kind;
    policy.layers = *n;
    return policy;
  }
  policy.kind = RecomputePolicy::Kind::kOps;
  for (absl::string_view part : absl::StrSplit(whole, ',')) {
    const std::string name(absl::StripAsciiWhitespace(part));
    if (name.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "'", whole, "' has an empty op kind; use ", kAccepted));
    std::vector<std::string> kinds;
    if (name == "selective")
      kinds = groups().at("attention");
    else if (auto g = groups().find(name); g != groups().end())
      kinds = g->second;
    else if (std::find(recomputableOps().begin(), recomputableOps().end(),
                       name) != recomputableOps().end())
      kinds = {name};
    else
      return absl::InvalidArgumentError(absl::StrCat(
          "'", name, "' is not a recompute policy or an op kind; use ",
          kAccepted, " (op names: ", absl::StrJoin(recomputableOps(), ", "),
          ")"));
    for (std::string &k : kinds)
      if (std::find(policy.ops.begin(), policy.ops.end(), k) ==
          policy.ops.end())
        policy.ops.push_back(std::move(k));
  }
  return policy;
}

absl::StatusOr<std::vector<RecomputePolicy>>
parseRecomputeStages(std::string_view text) {
  std::vector<RecomputePolicy> stages;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '|')) {
    absl::StatusOr<RecomputePolicy> policy =
        parseRecomputePolicy(std::string_view(part.data(), part.size()));
    if (!policy.ok())
      return policy.status();
    stages.push_back(std::move(*policy));
  }
  if (stages.size() > 1)
    for (const RecomputePolicy &p : stages)
      if (p.kind == RecomputePolicy::Kind::kAuto)
        return absl::InvalidArgumentError(absl::StrCat(
            "'", std::string(text.data(), text.size()),
            "': auto chooses the policy of every pipeline rank, so it "
            "stands alone; write 'auto', or a policy for each rank"));
  return stages;
}

} // namespace braid
