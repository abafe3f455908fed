// Arbitrary bytes as a plan file (header and checksum) and as a bare plan.
// Both loaders must refuse or accept without crashing; an accepted bare plan
// with a small arena is then bound and run once, since "validated" has to
// mean "safe to execute". (Mutations rarely keep a checksum right, so the
// bare plan is what reaches the validation rules.) A pipeline plan's
// stages are each run so.
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
  // A pipeline's stages are run one by one, each as one rank's plan; with
  // no ranks their transfers and collectives fail without waiting.
  std::vector<const LoadedPlan *> runs = {&*plan};
  for (const LoadedPlan &stage : plan->stages)
    runs.push_back(&stage);
  for (const LoadedPlan *run : runs) {
    // Bounded so that every accepted input runs in milliseconds.
    constexpr uint64_t kMaxArena = 1 << 20;
    if (run->proto.memory().arena_bytes() > kMaxArena ||
        run->proto.memory().host_bytes() > kMaxArena)
      continue;
    if (StagingLayout(*run).bytes() > kMaxArena)
      continue;
    absl::StatusOr<std::unique_ptr<CpuDevice>> device =
        CpuDevice::create(*run, /*numThreads=*/1);
    if (!device.ok())
      continue;
    for (const LoadedProgram &program : run->programs)
      (void)(*device)->run(program.kind, StepValues());
  }
  return 0;
}
