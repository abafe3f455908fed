#include "runtime/executor/Executor.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/plan/RepeatWalk.h"

namespace braid {
namespace {

// The events of one program, settled: for each instruction, whether its
// event work stays and with which slot (nullopt: dropped).
std::vector<std::optional<uint32_t>> settleEvents(const LoadedProgram &program,
                                                  uint32_t *numSignals) {
  const auto &insts = program.instructions;
  std::vector<std::optional<uint32_t>> slotOf(insts.size());
  // The record of each (event, value), and whether another stream waits.
  std::map<std::pair<uint32_t, uint64_t>, size_t> recordAt;
  std::vector<bool> needed(insts.size(), false);
  for (size_t i = 0; i < insts.size(); ++i) {
    const LoadedInstruction &inst = insts[i];
    if (inst.kind == LoadedInstruction::Kind::kRecord) {
      recordAt[{inst.event, inst.value}] = i;
    } else if (inst.kind == LoadedInstruction::Kind::kWait) {
      auto it = recordAt.find({inst.event, inst.value});
      // The loader guarantees the record; one on the waiting stream has
      // run by the time the stream reaches the wait.
      if (it != recordAt.end() && insts[it->second].stream != inst.stream)
        needed[it->second] = true;
    }
  }
  uint32_t next = 0;
  for (size_t i = 0; i < insts.size(); ++i) {
    const LoadedInstruction &inst = insts[i];
    if (inst.kind == LoadedInstruction::Kind::kRecord && needed[i]) {
      slotOf[i] = next++;
    } else if (inst.kind == LoadedInstruction::Kind::kWait) {
      auto it = recordAt.find({inst.event, inst.value});
      if (it != recordAt.end() && needed[it->second] &&
          insts[it->second].stream != inst.stream)
        slotOf[i] = slotOf[it->second];
    }
  }
  *numSignals = next;
  return slotOf;
}

// The end of the 64-byte block holding the last byte of `t` (blocks,
// since the planner places buffers at 64-byte offsets and rounds their
// sizes up to 64).
uint64_t blockEnd(const plan::Tensor &t) {
  constexpr uint64_t kBlock = 64;
  return (t.offset() + t.size_bytes() + kBlock - 1) / kBlock * kBlock;
}

// Sets op.arenaReach and op.hostReach from the tensors the instruction
// reads and writes, each in its own arena.
void setReach(const plan::Plan &plan, const LoadedInstruction &inst,
              Executor::Op &op) {
  for (const auto *ids : {&inst.inputs, &inst.outputs})
    for (uint32_t id : *ids) {
      const plan::Tensor &t = plan.tensors(id);
      uint64_t &reach = t.host() ? op.hostReach : op.arenaReach;
      reach = std::max(reach, blockEnd(t));
    }
}

} // namespace

absl::StatusOr<std::unique_ptr<Executor>>
Executor::create(const LoadedPlan &plan, uint8_t *arena, uint64_t arenaBytes,
                 uint8_t *hostArena, uint64_t hostArenaBytes, uint8_t *staging,
                 const StagingLayout &layout, MicroBatchMap microBatches) {
  const plan::MemoryReport &memory = plan.proto.memory();
  if (arenaBytes < memory.arena_bytes() ||
      (arena == nullptr && memory.arena_bytes() > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("the arena has ", arenaBytes, " bytes but the plan needs ",
                     memory.arena_bytes()));
  if (hostArenaBytes < memory.host_bytes() ||
      (hostArena == nullptr && memory.host_bytes() > 0))
    return absl::InvalidArgumentError(absl::StrCat(
        "the host arena has ", hostArenaBytes, " bytes but the plan needs ",
        memory.host_bytes(), " (plan.memory.host_bytes)"));
  std::unique_ptr<Executor> ex(new Executor());
  ex->microBatches_ = microBatches;
  auto view = [&](uint32_t id) {
    const plan::Tensor &t = plan.proto.tensors(id);
    return TensorView{(t.host() ? hostArena : arena) + t.offset(),
                      &plan.descs[id]};
  };
  for (const LoadedProgram &loaded : plan.programs) {
    Program &program = ex->programs_.emplace_back();
    program.name = loaded.name;
    program.kind = loaded.kind;
    program.streams.push_back(0);
    std::vector<std::optional<uint32_t>> slotOf =
        settleEvents(loaded, &program.numSignals);
    for (size_t i = 0; i < loaded.instructions.size(); ++i) {
      const LoadedInstruction &inst = loaded.instructions[i];
      const bool event = inst.kind == LoadedInstruction::Kind::kRecord ||
                         inst.kind == LoadedInstruction::Kind::kWait;
      // Events are never inside a Repeat body (the loader), so dropping
      // one leaves every body's length as it is.
      if (event && !slotOf[i])
        continue;
      Op op;
      op.kind = inst.kind;
      op.stream = inst.stream;
      switch (inst.kind) {
      case LoadedInstruction::Kind::kLaunch:
        op.kernel = inst.kernel;
        op.params = &inst.params;
        op.microBatch = inst.microBatch;
        for (uint32_t id : inst.inputs)
          op.ins.push_back(view(id));
        for (uint32_t id : inst.outputs)
          op.outs.push_back(view(id));
        break;
      case LoadedInstruction::Kind::kStage:
      case LoadedInstruction::Kind::kReadback:
        op.copy = layout.bind(
            inst, static_cast<uint8_t *>(view(inst.tensor).data), staging);
        break;
      case LoadedInstruction::Kind::kRepeat:
        op.count = inst.count;
        op.length = inst.length;
        break;
      case LoadedInstruction::Kind::kRecord:
      case LoadedInstruction::Kind::kWait:
        op.signal = EventSignal{inst.event, inst.value, *slotOf[i]};
        break;
      case LoadedInstruction::Kind::kCollective:
        op.collective = inst.collective;
        op.axis = inst.axis;
        op.shiftOffset = inst.shiftOffset;
        for (uint32_t id : inst.inputs)
          op.ins.push_back(view(id));
        for (uint32_t id : inst.outputs)
          op.outs.push_back(view(id));
        break;
      case LoadedInstruction::Kind::kSend:
      case LoadedInstruction::Kind::kRecv:
        op.peerOffset = inst.peerOffset;
        op.channel = inst.channel;
        (inst.kind == LoadedInstruction::Kind::kSend ? op.ins : op.outs)
            .push_back(view(inst.tensor));
        break;
      case LoadedInstruction::Kind::kMark:
        op.mark = MarkCall{inst.part, inst.stage, inst.microBatch, inst.end};
        break;
      }
      setReach(plan.proto, inst, op);
      if (std::find(program.streams.begin(), program.streams.end(),
                    op.stream) == program.streams.end())
        program.streams.push_back(op.stream);
      program.ops.push_back(std::move(op));
    }
    std::sort(program.streams.begin(), program.streams.end());
  }
  return ex;
}

absl::StatusOr<const Executor::Program *>
Executor::program(plan::ProgramKind kind) const {
  for (const Program &p : programs_)
    if (p.kind == kind)
      return &p;
  return absl::NotFoundError(absl::StrCat(
      "the plan has no ", plan::ProgramKind_Name(kind), " program"));
}

absl::Status Executor::issue(const Program &program,
                             StreamTarget &target) const {
  return forEachRun(program.ops, [&](const Op &op,
                                     int64_t iteration) -> absl::Status {
    highWater_ = std::max(highWater_, op.arenaReach);
    hostHighWater_ = std::max(hostHighWater_, op.hostReach);
    switch (op.kind) {
    case LoadedInstruction::Kind::kLaunch:
      return target.launch(op.stream, *op.kernel,
                           KernelArgs{op.ins, op.outs, op.params,
                                      &target.context(op.stream),
                                      microBatches_.global(op.microBatch +
                                                           iteration)});
    case LoadedInstruction::Kind::kStage:
    case LoadedInstruction::Kind::kReadback:
      return target.copy(op.stream,
                         op.kind == LoadedInstruction::Kind::kStage
                             ? CopyDirection::kToDevice
                             : CopyDirection::kToHost,
                         op.copy.destination(iteration),
                         op.copy.source(iteration), op.copy.bytes);
    case LoadedInstruction::Kind::kRecord:
      return target.record(op.stream, op.signal);
    case LoadedInstruction::Kind::kWait:
      return target.wait(op.stream, op.signal);
    case LoadedInstruction::Kind::kCollective:
      return target.collective(op.stream,
                               CollectiveCall{op.collective, op.axis, op.ins,
                                              op.outs, op.shiftOffset});
    case LoadedInstruction::Kind::kSend:
      return target.transfer(op.stream,
                             TransferCall{true, op.ins[0], op.peerOffset,
                                          op.channel});
    case LoadedInstruction::Kind::kRecv:
      return target.transfer(op.stream,
                             TransferCall{false, op.outs[0], op.peerOffset,
                                          op.channel});
    case LoadedInstruction::Kind::kMark:
      return target.mark(op.stream, op.mark);
    case LoadedInstruction::Kind::kRepeat:
      return absl::OkStatus(); // forEachRun runs the body
    }
    return absl::OkStatus();
  });
}

} // namespace braid
