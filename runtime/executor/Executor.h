// The executor both devices share: it binds the programs of a loaded plan
// to the arena and the staging block once, and issues a program's
// instructions, in program order, to a StreamTarget, the device's streams
// (StreamTarget.h). The CPU's target runs stream 0 on the calling thread and
// queues the others to worker threads (cpu/CpuStreams.h); the CUDA target
// enqueues on CUDA streams (cuda/CudaPrograms.cpp).
//
// Binding also settles the event work. The loader has checked the timeline
// rules (StreamOrder.h checkEvents): every wait names a record earlier in
// program order, on the one stream recording that event. A wait on that
// stream itself is already satisfied when reached and is dropped; a record
// no other stream waits for is dropped too. Each record kept gets a signal
// slot, numbered from 0 in program order, and its waits the same slot, so
// a device that keeps one object per record (a CUDA event) indexes it
// directly. A one-stream program has no event work at all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/registry/Kernel.h"
#include "runtime/executor/StagingLayout.h"
#include "runtime/executor/StreamTarget.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

// global = local * stride + offset.
struct MicroBatchMap {
  int64_t stride = 1;
  int64_t offset = 0;

  int64_t global(int64_t local) const { return local * stride + offset; }
};

class Executor {
public:
  // One instruction, bound to memory.
  struct Op {
    LoadedInstruction::Kind kind = LoadedInstruction::Kind::kLaunch;
    uint32_t stream = 0;
    // kLaunch.
    const KernelDef *kernel = nullptr;
    std::vector<TensorView> ins;
    std::vector<TensorView> outs;
    const KernelParams *params = nullptr;
    int64_t microBatch = 0;
    // kStage / kReadback.
    HostCopy copy;
    // kRepeat: the next `length` ops run `count` times.
    uint32_t count = 0, length = 0;
    // kRecord / kWait.
    EventSignal signal;
    // kCollective: reads `ins`, writes `outs`.
    plan::CollectiveKind collective = plan::COLLECTIVE_UNSPECIFIED;
    plan::MeshAxis axis = plan::AXIS_UNSPECIFIED;
    int32_t shiftOffset = 0;
    // kSend (its tensor is ins[0]) / kRecv (outs[0]): the peer's offset
    // along PP and the channel.
    int32_t peerOffset = 0;
    uint32_t channel = 0;
    // kMark.
    MarkCall mark;
    // The end of the highest 64-byte block of the device arena and of the
    // host arena the op's operands reach (0: none), which issuing it adds
    // to the high-water marks; a stage or readback counts for neither.
    uint64_t arenaReach = 0;
    uint64_t hostReach = 0;
  };
  struct Program {
    std::string name;
    plan::ProgramKind kind = plan::PROGRAM_UNSPECIFIED;
    // In program order, events settled as above.
    std::vector<Op> ops;
    // The streams the program uses, ascending; stream 0 always (devices
    // order their own copies on it and fork the others from it).
    std::vector<uint32_t> streams;
    // Signal slots 0..numSignals-1.
    uint32_t numSignals = 0;
  };

  // Binds `plan` to `arena` (at least plan.memory.arena_bytes bytes, or
  // InvalidArgument; device memory on a GPU), its host tensors
  // (plan.proto Tensor.host) to `hostArena` (at least
  // plan.memory.host_bytes bytes, or InvalidArgument; pinned host memory on
  // a GPU; may be null when the plan has no host bytes), and to the host
  // block `staging`, laid out by `layout` (StagingLayout.h): stage
  // instructions copy from it, readbacks into it. The plan, its kernel
  // registry, both arenas and the staging block must outlive the executor.
  //
  // `microBatches` maps the plan's micro-batch of a launch (this rank's)
  // to the global one its kernels key random draws on (data parallel: the
  // rank's k-th micro-batch is the step's k * DP + dp-th).
  static absl::StatusOr<std::unique_ptr<Executor>>
  create(const LoadedPlan &plan, uint8_t *arena, uint64_t arenaBytes,
         uint8_t *hostArena, uint64_t hostArenaBytes, uint8_t *staging,
         const StagingLayout &layout, MicroBatchMap microBatches = {});

  const std::vector<Program> &programs() const { return programs_; }
  // The program of kind `kind`, or NotFound naming it (INIT is optional).
  absl::StatusOr<const Program *> program(plan::ProgramKind kind) const;

  // Hands every instruction of `program` to `target`, a Repeat's body once
  // per iteration with its micro-batch and slot offsets applied, and stops
  // at the first error the target returns.
  absl::Status issue(const Program &program, StreamTarget &target) const;

  // The arena's high-water mark, measured as instructions are issued: the
  // end of the highest 64-byte block of the arena that an issued launch,
  // collective or transfer reads or writes (blocks, since the planner
  // places buffers at 64-byte offsets and rounds their sizes up to 64).
  // Only device tensors count; the plan predicts plan.memory.arena_bytes.
  uint64_t arenaHighWater() const { return highWater_; }
  // The host arena's, measured alike over host tensors only (which only
  // copy launches use); the plan predicts plan.memory.host_bytes.
  uint64_t hostHighWater() const { return hostHighWater_; }

private:
  Executor() = default;

  std::vector<Program> programs_;
  MicroBatchMap microBatches_;
  mutable uint64_t highWater_ = 0;
  mutable uint64_t hostHighWater_ = 0;
};

} // namespace braid
