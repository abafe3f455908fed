// Kernels that exist only in tests, registered beside the real CPU kernels.
//
//   test.log    no operands; appends its "id" parameter to eventLog(), after
//               sleeping "sleep_ms" milliseconds when given. Executor tests
//               read the log to see the order launches ran in.
//   test.touch  any operands, accepts everything, does nothing.
//   test.stop   no operands; raises SIGTERM when ctx.step equals its "step"
//               parameter and the launch computes micro-batch 0 (signal-handling tests).
//   test.poison one f32 output; writes NaN into its first element when
//               ctx.step equals its "step" parameter (non-finite steps).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/registry/Kernel.h"

namespace braid::test {

// The real CPU kernels plus the test kernels above.
const KernelRegistry &testKernelRegistry();

// The ids logged by test.log since the last clearEventLog().
std::vector<int64_t> eventLog();
void clearEventLog();

} // namespace braid::test
