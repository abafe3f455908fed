#include "runtime/device/cuda/StreamSchedule.h"

#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace braid {
namespace {

constexpr uint32_t kUnused = UINT32_MAX;

uint64_t key(uint32_t event, uint32_t stream) {
  return (uint64_t{event} << 32) | stream;
}

// Records of one event on one stream seen so far in program order.
struct RecordsSoFar {
  uint32_t last = kUnused; // instruction index of the latest
  int64_t count = 0;
};

std::string refusal(const LoadedProgram &program, int programIndex,
                    uint32_t instruction, const LoadedInstruction &wait,
                    const std::set<uint32_t> &recorders) {
  std::vector<std::string> names;
  for (uint32_t t : recorders)
    names.push_back(absl::StrCat(t));
  return absl::StrCat(
      "plan.programs[", programIndex, "] (", absl::CEscape(program.name),
      ") instruction ", instruction, ": stream ", wait.stream,
      " waits for event ", wait.event, ", which streams ",
      absl::StrJoin(names, " and "),
      " record, so which records release the wait depends on timing; a CUDA "
      "graph would freeze one order, so this program runs without a graph");
}

} // namespace

StreamSchedule scheduleProgram(const LoadedProgram &program, int programIndex,
                               uint32_t numStreams) {
  StreamSchedule out;
  const std::vector<LoadedInstruction> &insts = program.instructions;

  // Streams recording each event anywhere in the program: a record later in
  // program order on another stream can still run before a wait.
  absl::flat_hash_map<uint32_t, std::set<uint32_t>> recorders;
  std::set<uint32_t> used = {0};
  for (const LoadedInstruction &inst : insts) {
    used.insert(inst.stream);
    if (inst.kind == LoadedInstruction::Kind::kRecord)
      recorders[inst.event].insert(inst.stream);
  }
  out.streams.assign(used.begin(), used.end());

  // For each wait, the record instructions it waits for.
  std::vector<std::vector<uint32_t>> waitsFor(insts.size());
  std::vector<bool> needed(insts.size(), false);
  absl::flat_hash_map<uint64_t, RecordsSoFar> soFar;
  for (uint32_t i = 0; i < insts.size(); ++i) {
    const LoadedInstruction &inst = insts[i];
    if (inst.kind == LoadedInstruction::Kind::kRecord) {
      RecordsSoFar &r = soFar[key(inst.event, inst.stream)];
      r.last = i;
      ++r.count;
      continue;
    }
    if (inst.kind != LoadedInstruction::Kind::kWait)
      continue;
    for (uint32_t t = 0; t < numStreams; ++t) {
      if (t == inst.stream)
        continue;
      auto it = soFar.find(key(inst.event, t));
      if (it != soFar.end()) {
        waitsFor[i].push_back(it->second.last);
        needed[it->second.last] = true;
      }
    }
    // Records on the waiting stream before the wait have run when it is
    // reached; the rest of the target must come from the other streams.
    auto own = soFar.find(key(inst.event, inst.stream));
    const int64_t ownBefore = own == soFar.end() ? 0 : own->second.count;
    std::set<uint32_t> others = recorders[inst.event];
    others.erase(inst.stream);
    if (!out.graphRefusal && inst.waitTarget > ownBefore && others.size() > 1)
      out.graphRefusal = refusal(program, programIndex, i, inst, others);
  }

  std::vector<uint32_t> slotOf(insts.size(), kUnused);
  for (uint32_t i = 0; i < insts.size(); ++i)
    if (needed[i])
      slotOf[i] = out.numSlots++;
  for (uint32_t i = 0; i < insts.size(); ++i) {
    const LoadedInstruction &inst = insts[i];
    EventOp op;
    op.instruction = i;
    op.stream = inst.stream;
    if (inst.kind == LoadedInstruction::Kind::kRecord && needed[i]) {
      op.kind = EventOp::Kind::kRecord;
      op.slot = slotOf[i];
    } else if (inst.kind == LoadedInstruction::Kind::kWait &&
               !waitsFor[i].empty()) {
      op.kind = EventOp::Kind::kWait;
      for (uint32_t r : waitsFor[i])
        op.waitSlots.push_back(slotOf[r]);
    } else {
      continue;
    }
    out.eventOps.push_back(std::move(op));
  }
  return out;
}

} // namespace braid
