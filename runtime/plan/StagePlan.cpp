#include "runtime/plan/StagePlan.h"

#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"

namespace braid {
namespace {

void copyHeader(const plan::Plan &from, plan::Plan &to) {
  to.set_format_version(from.format_version());
  to.set_name(from.name());
  *to.mutable_model() = from.model();
  *to.mutable_train() = from.train();
  *to.mutable_mesh() = from.mesh();
  to.clear_stage_plans();
}

// Fields of the header, which a stage's message names as the outer plan's.
bool namesHeader(std::string_view rest) {
  for (std::string_view field : {"format_version", "name", "model.", "train.",
                                 "mesh.", "mesh ", "stage_plans"})
    if (rest.substr(0, field.size()) == field)
      return true;
  return rest == "mesh" || rest == "model" || rest == "train";
}

bool identifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

} // namespace

bool isPipelinePlan(const plan::Plan &plan) {
  return plan.mesh().pp() > 1 || plan.stage_plans_size() > 0;
}

plan::Plan effectiveStagePlan(const plan::Plan &pipeline, int stage) {
  plan::Plan out = pipeline.stage_plans(stage);
  copyHeader(pipeline, out);
  return out;
}

plan::Plan takeEffectiveStagePlan(plan::Plan &pipeline, int stage) {
  plan::Plan out;
  out.Swap(pipeline.mutable_stage_plans(stage));
  copyHeader(pipeline, out);
  return out;
}

std::string stageMessage(std::string_view message, int stage) {
  const std::string path = absl::StrCat("plan.stage_plans[", stage, "].");
  constexpr std::string_view kPlan = "plan.";
  std::string out;
  bool named = false;
  size_t i = 0;
  while (i < message.size()) {
    const bool starts = message.compare(i, kPlan.size(), kPlan) == 0 &&
                        (i == 0 || !identifierChar(message[i - 1]));
    if (starts && !namesHeader(message.substr(i + kPlan.size()))) {
      out += path;
      i += kPlan.size();
      named = true;
      continue;
    }
    out += message[i++];
  }
  if (named)
    return out;
  return absl::StrCat("plan.stage_plans[", stage, "]: ", out);
}

} // namespace braid
