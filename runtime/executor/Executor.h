// Runs the programs of a loaded plan on the CPU.
//
// Every launch is bound to its arena memory once, at construction, so a run
// is a walk over prepared operations. Each plan stream is a sequence executed
// in order; streams run concurrently and synchronise only through events.
// Stream 0 runs on the calling thread and every other stream on a worker
// thread created with the executor, so a one-stream plan runs with no thread
// hand-off at all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/registry/Kernel.h"
#include "runtime/executor/EventCounters.h"
#include "runtime/executor/StagingLayout.h"
#include "runtime/executor/StreamWorker.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/profile/KernelProfile.h"

namespace braid {

class Executor {
public:
  // Binds `plan` to `arena` (at least plan.memory.arena_bytes bytes, or
  // InvalidArgument) and to the host block `staging`, laid out by `layout`
  // (StagingLayout.h): stage instructions copy from it, readbacks into it.
  // The plan, its kernel registry, the arena and the staging block must
  // outlive the executor.
  static absl::StatusOr<std::unique_ptr<Executor>>
  create(const LoadedPlan &plan, uint8_t *arena, uint64_t arenaBytes,
         uint8_t *staging, const StagingLayout &layout);

  ~Executor();

  // Runs the plan's program of kind `kind` with `ctx` and returns once
  // every stream has finished it. NotFound when the plan has none (INIT is
  // optional). Not reentrant: one run at a time.
  absl::Status run(plan::ProgramKind kind, const KernelContext &ctx);

  int numStreams() const { return numStreams_; }

  // While set, every launch on stream 0 is timed into `profile` (null to
  // stop). Launches on other streams overlap stream 0 and are not timed.
  void setProfile(KernelProfile *profile) { profile_ = profile; }

private:
  struct Op {
    LoadedInstruction::Kind kind;
    const KernelDef *kernel = nullptr;
    std::vector<TensorView> ins;
    std::vector<TensorView> outs;
    const KernelParams *params = nullptr;
    int64_t microBatch = 0;
    uint32_t event = 0;
    int64_t waitTarget = 0;
    // kStage / kReadback.
    HostCopy copy;
    // kRepeat: the next `length` ops run `count` times.
    uint32_t count = 0, length = 0;
  };
  struct BoundProgram {
    plan::ProgramKind kind = plan::PROGRAM_UNSPECIFIED;
    // ops[stream]: the stream's instructions in program order.
    std::vector<std::vector<Op>> ops;
  };

  Executor(int numStreams, uint32_t numEvents);
  void execute(const std::vector<Op> &ops, const KernelContext &ctx,
               KernelProfile *profile);
  // One op, in iteration `iteration` of the Repeat body it is in (0
  // outside).
  void runOp(const Op &op, int64_t iteration, const KernelContext &ctx,
             KernelProfile *profile);

  int numStreams_;
  std::vector<BoundProgram> programs_;
  EventCounters events_;
  // workers_[s - 1] runs stream s.
  std::vector<std::unique_ptr<StreamWorker>> workers_;
  KernelProfile *profile_ = nullptr;
};

} // namespace braid
