// The plan loader's verdict on a hand-built plan, for loader tests.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/plan/plan.pb.h"

namespace braid::test {

// Loads `p` for the CPU with the test kernels; the loader's verdict.
absl::Status loadOnCpu(const plan::Plan &p);

// Expects the loader to refuse `p` (InvalidArgument) with a message that
// contains `fragment`.
void expectRefused(const plan::Plan &p, const std::string &fragment);

// The id of the tensor of `p` called `name`; a test failure and 0 when
// there is none.
uint32_t idOf(const plan::Plan &p, const std::string &name);

} // namespace braid::test
