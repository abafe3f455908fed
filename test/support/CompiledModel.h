// Test support: compile a spec under models/ with the braidc of this build
// and load the plan with the CPU kernels, as braid-run would.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "runtime/plan/PlanLoader.h"

namespace braid::testing {

// Writes `<tmp>/<model>.plan` with braidc and loads it.
absl::StatusOr<LoadedPlan> compileModel(const std::string &model);

// The shared corpus (tinyshakespeare.txt) beside the checkout.
std::string corpusPath();

}  // namespace braid::testing
