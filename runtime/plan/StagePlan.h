// Pipeline plans (plan.proto Plan.stage_plans): the outer plan carries the
// header every rank shares (format version, name, model, train, mesh), and
// each stage plan what one pipeline rank runs. A rank trains its effective
// plan, the stage plan with the header copied in: a whole plan of its own,
// which every rule of docs/plan-format.md applies to. The loader, braid-run
// and the compiler's checks all build it here, so that they agree on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/plan/plan.pb.h"

namespace braid {

// Whether `plan` is a pipeline plan: its mesh has more than one pipeline
// rank, or it carries stage plans (which the loader refuses without one).
bool isPipelinePlan(const plan::Plan &plan);

// The effective plan of PP coordinate `stage` (0 <= stage <
// plan.stage_plans_size()): plan.stage_plans[stage] with format_version,
// name, model, train and mesh taken from `pipeline`, and no stage plans.
plan::Plan effectiveStagePlan(const plan::Plan &pipeline, int stage);
// The same, taking the stage plan out of `pipeline` instead of copying it
// (the loader's way: a large plan is not held twice).
plan::Plan takeEffectiveStagePlan(plan::Plan &pipeline, int stage);

// `message`, a refusal of the effective plan of `stage`, reworded for the
// pipeline plan: the paths of the stage's own fields ("plan.programs[2]")
// become "plan.stage_plans[k].programs[2]"; the header's ("plan.train...")
// stay as they are, since the stage took them from the outer plan. A
// message naming no field of the stage is prefixed with
// "plan.stage_plans[k]: ".
std::string stageMessage(std::string_view message, int stage);

} // namespace braid
