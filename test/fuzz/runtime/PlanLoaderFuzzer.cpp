// Arbitrary bytes as a plan file (header and checksum) and as a bare plan.
// Both loaders must refuse or accept without crashing; an accepted bare plan
// with a small arena is then bound and run once, since "validated" has to
// mean "safe to execute". (Mutations rarely keep a checksum right, so the
// bare plan is what reaches the validation rules.)
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/registry/Kernel.h"
#include "runtime/device/cpu/CpuDevice.h"
#include "runtime/executor/StagingLayout.h"
#include "runtime/plan/PlanLoader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace braid;
  const std::string_view bytes(reinterpret_cast<const char *>(data), size);
  (void)loadSealedPlan(bytes, "fuzz", PlanSource::kFile,
                       defaultKernelRegistry(), Device::kCPU);
  absl::StatusOr<LoadedPlan> plan =
      loadPlan(bytes, defaultKernelRegistry(), Device::kCPU);
  if (!plan.ok())
    return 0;
  // Bounded so that every accepted input runs in milliseconds.
  constexpr uint64_t kMaxArena = 1 << 20;
  if (plan->proto.memory().arena_bytes() > kMaxArena)
    return 0;
  if (StagingLayout(*plan).bytes() > kMaxArena)
    return 0;
  absl::StatusOr<std::unique_ptr<CpuDevice>> device =
      CpuDevice::create(*plan, /*numThreads=*/1);
  if (!device.ok())
    return 0;
  for (const LoadedProgram &program : plan->programs)
    (void)(*device)->run(program.kind, StepValues());
  return 0;
}
