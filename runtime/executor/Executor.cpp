#include "runtime/executor/Executor.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/plan/RepeatWalk.h"
#include "runtime/profile/KernelProfile.h"

namespace braid {

Executor::Executor(int numStreams, uint32_t numEvents)
    : numStreams_(numStreams), events_(numEvents) {
  for (int s = 1; s < numStreams; ++s)
    workers_.push_back(std::make_unique<StreamWorker>());
}

Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Executor>>
Executor::create(const LoadedPlan &plan, uint8_t *arena, uint64_t arenaBytes,
                 uint8_t *staging, const StagingLayout &layout) {
  if (arenaBytes < plan.proto.memory().arena_bytes() ||
      (arena == nullptr && plan.proto.memory().arena_bytes() > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("the arena has ", arenaBytes, " bytes but the plan needs ",
                     plan.proto.memory().arena_bytes()));
  const int numStreams = static_cast<int>(plan.proto.num_streams());
  std::unique_ptr<Executor> ex(
      new Executor(numStreams, plan.proto.num_events()));
  auto view = [&](uint32_t id) {
    return TensorView{arena + plan.proto.tensors(id).offset(), &plan.descs[id]};
  };
  for (const LoadedProgram &program : plan.programs) {
    BoundProgram bound;
    bound.kind = program.kind;
    bound.ops.resize(numStreams);
    for (const LoadedInstruction &inst : program.instructions) {
      // With one stream, program order is execution order and every wait is
      // already satisfied when reached: events need no work at all.
      if (numStreams == 1 && (inst.kind == LoadedInstruction::Kind::kRecord ||
                              inst.kind == LoadedInstruction::Kind::kWait))
        continue;
      Op op;
      op.kind = inst.kind;
      op.kernel = inst.kernel;
      op.params = &inst.params;
      op.microBatch = inst.microBatch;
      op.event = inst.event;
      op.waitTarget = inst.waitTarget;
      if (inst.kind == LoadedInstruction::Kind::kStage ||
          inst.kind == LoadedInstruction::Kind::kReadback) {
        op.copy = layout.bind(
            inst, static_cast<uint8_t *>(view(inst.tensor).data), staging);
      } else if (inst.kind == LoadedInstruction::Kind::kRepeat) {
        op.count = inst.count;
        op.length = inst.length;
      }
      for (uint32_t id : inst.inputs)
        op.ins.push_back(view(id));
      for (uint32_t id : inst.outputs)
        op.outs.push_back(view(id));
      bound.ops[inst.stream].push_back(std::move(op));
    }
    ex->programs_.push_back(std::move(bound));
  }
  return ex;
}

void Executor::runOp(const Op &op, int64_t iteration,
                     const KernelContext &ctx, KernelProfile *profile) {
  using Clock = std::chrono::steady_clock;
  switch (op.kind) {
  case LoadedInstruction::Kind::kLaunch: {
    const KernelArgs args{op.ins, op.outs, op.params, &ctx,
                          op.microBatch + iteration};
    if (profile) {
      auto start = Clock::now();
      op.kernel->run(args);
      profile->add(op.kernel->name,
                   std::chrono::duration<double>(Clock::now() - start)
                       .count());
    } else {
      op.kernel->run(args);
    }
    break;
  }
  case LoadedInstruction::Kind::kStage:
  case LoadedInstruction::Kind::kReadback:
    std::memcpy(op.copy.destination(iteration), op.copy.source(iteration),
                op.copy.bytes);
    break;
  case LoadedInstruction::Kind::kRecord:
    events_.record(op.event);
    break;
  case LoadedInstruction::Kind::kWait:
    events_.wait(op.event, op.waitTarget);
    break;
  case LoadedInstruction::Kind::kRepeat:
    break; // forEachRun runs the body
  }
}

void Executor::execute(const std::vector<Op> &ops, const KernelContext &ctx,
                       KernelProfile *profile) {
  (void)forEachRun(ops, [&](const Op &op, int64_t iteration) {
    runOp(op, iteration, ctx, profile);
    return absl::OkStatus();
  });
}

absl::Status Executor::run(plan::ProgramKind kind, const KernelContext &ctx) {
  const BoundProgram *bound = nullptr;
  for (const BoundProgram &p : programs_)
    if (p.kind == kind)
      bound = &p;
  if (bound == nullptr)
    return absl::NotFoundError(absl::StrCat(
        "the plan has no ", plan::ProgramKind_Name(kind), " program"));
  if (numStreams_ == 1) {
    execute(bound->ops[0], ctx, profile_);
    return absl::OkStatus();
  }
  events_.reset();
  for (int s = 1; s < numStreams_; ++s) {
    if (bound->ops[s].empty())
      continue;
    const std::vector<Op> *ops = &bound->ops[s];
    workers_[s - 1]->start(
        [this, ops, &ctx] { execute(*ops, ctx, /*profile=*/nullptr); });
  }
  execute(bound->ops[0], ctx, profile_);
  for (int s = 1; s < numStreams_; ++s)
    if (!bound->ops[s].empty())
      workers_[s - 1]->finish();
  return absl::OkStatus();
}

} // namespace braid
