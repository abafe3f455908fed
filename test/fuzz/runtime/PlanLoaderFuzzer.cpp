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
#include "runtime/device/cpu/CpuArena.h"
#include "runtime/executor/Executor.h"
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
  absl::StatusOr<CpuArena> arena =
      CpuArena::create(plan->proto.memory().arena_bytes());
  if (!arena.ok())
    return 0;
  const StagingLayout layout(*plan);
  if (layout.bytes() > kMaxArena)
    return 0;
  std::vector<uint8_t> staging(layout.bytes());
  absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(
      *plan, arena->data(), arena->size(), staging.data(), layout);
  if (!executor.ok())
    return 0;
  KernelContext ctx;
  for (const LoadedProgram &program : plan->programs)
    (void)(*executor)->run(program.kind, ctx);
  return 0;
}
