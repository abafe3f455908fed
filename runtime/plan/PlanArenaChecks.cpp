// The static arena layout. The compiler reuses activation bytes between
// tensors whose lifetimes do not meet; everything else owns its bytes for the
// whole run. A view (plan.proto Tensor.view_of) owns no bytes: it names a
// range of its base's, and its uses are its base's. A layout that breaks
// this would silently corrupt training, so the loader proves it from the
// offsets and the programs, following the order the streams and events give
// (StreamOrder.h), not program position. Host tensors (plan.proto
// Tensor.host) live in a second arena, whose offsets are their own: the
// sweep checks each arena apart.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/StreamOrder.h"

namespace braid::plan_checks {

std::vector<OrderStep> orderSteps(const LoadedProgram &program) {
  std::vector<OrderStep> steps;
  steps.reserve(program.instructions.size());
  for (const LoadedInstruction &inst : program.instructions) {
    OrderStep step;
    step.stream = inst.stream;
    step.event = inst.event;
    step.value = inst.value;
    step.kind = inst.kind == LoadedInstruction::Kind::kRecord
                    ? OrderStep::Kind::kRecord
                : inst.kind == LoadedInstruction::Kind::kWait
                    ? OrderStep::Kind::kWait
                    : OrderStep::Kind::kOther;
    steps.push_back(step);
  }
  return steps;
}

namespace {

// The uses of one tensor in one program.
struct ProgramUses {
  int program;
  StreamUses uses;
};

// The ordering of each program and the uses of every ACTIVATION tensor. A
// view owns no bytes: its uses are its base's (and its own entry stays
// empty), so a base is live wherever any of its views is.
struct Lifetimes {
  std::vector<StreamOrder> orders;
  std::vector<std::vector<ProgramUses>> uses; // by tensor id
};

uint64_t endOf(const plan::Tensor &t) { return t.offset() + t.size_bytes(); }

// Whether uses of tensors `a` and `b` of one base (or the same tensor)
// touch common bytes.
bool bytesMeet(const plan::Plan &plan, uint32_t a, uint32_t b) {
  if (a == b)
    return true;
  const plan::Tensor &x = plan.tensors(a), &y = plan.tensors(b);
  return std::max(x.offset(), y.offset()) < std::min(endOf(x), endOf(y));
}

// "[0, 512)": the bytes tensors `a` and `b` share.
std::string sharedBytes(const plan::Plan &plan, uint32_t a, uint32_t b) {
  const plan::Tensor &x = plan.tensors(a), &y = plan.tensors(b);
  return absl::StrCat("[", std::max(x.offset(), y.offset()), ", ",
                      std::min(endOf(x), endOf(y)), ")");
}

// How two distinct tensors of one base are related, for messages.
std::string relation(const plan::Plan &plan, uint32_t a, uint32_t b) {
  if (plan.tensors(a).view_of() != 0 && plan.tensors(b).view_of() != 0)
    return absl::StrCat("views of one base, ",
                        tensorRef(plan, viewBase(plan, a)));
  return "a view and its base";
}

Lifetimes lifetimes(const plan::Plan &plan, const LoadedPlan &loaded) {
  Lifetimes out;
  out.uses.resize(plan.tensors_size());
  const uint32_t streams = plan.num_streams();
  for (int p = 0; p < static_cast<int>(loaded.programs.size()); ++p) {
    const auto &insts = loaded.programs[p].instructions;
    out.orders.emplace_back(orderSteps(loaded.programs[p]), streams);
    const StreamOrder &order = out.orders.back();
    for (int i = 0; i < static_cast<int>(insts.size()); ++i) {
      auto touch = [&](uint32_t id) {
        if (plan.tensors(id).kind() != plan::ACTIVATION)
          return;
        std::vector<ProgramUses> &u = out.uses[viewBase(plan, id)];
        if (u.empty() || u.back().program != p)
          u.push_back({p, StreamUses(streams)});
        order.addUse(u.back().uses, i);
      };
      for (uint32_t id : insts[i].inputs)
        touch(id);
      for (uint32_t id : insts[i].outputs)
        touch(id);
    }
  }
  return out;
}

// The program in which neither tensor's uses all finish before the other's
// start, if any.
std::pair<const ProgramUses *, const ProgramUses *>
firstClash(const Lifetimes &life, uint32_t a, uint32_t b) {
  for (const ProgramUses &x : life.uses[a])
    for (const ProgramUses &y : life.uses[b]) {
      if (x.program != y.program)
        continue;
      const StreamOrder &order = life.orders[x.program];
      if (!order.allAfter(y.uses, x.uses) && !order.allAfter(x.uses, y.uses))
        return {&x, &y};
    }
  return {nullptr, nullptr};
}

// "launch rms_norm", "collective", ...: an instruction, for messages.
std::string instructionName(const LoadedInstruction &inst) {
  switch (inst.kind) {
  case LoadedInstruction::Kind::kLaunch:
    return absl::StrCat("launch ", std::string(inst.kernel->name));
  case LoadedInstruction::Kind::kStage:
    return "stage";
  case LoadedInstruction::Kind::kReadback:
    return "readback";
  case LoadedInstruction::Kind::kCollective:
    return "collective";
  case LoadedInstruction::Kind::kSend:
    return "send";
  case LoadedInstruction::Kind::kRecv:
    return "recv";
  default:
    return "instruction";
  }
}

// A tensor that two streams use, one of them writing it, needs an order
// between those uses: the one that events give (rule 31). An activation is
// held to it too: a receive or a gather writes it on a communication
// stream, and its readers on another stream must wait for that. Views
// follow bytes: uses of a base and its views are held to it when the bytes
// they touch meet (a view always meets its base; two views when their
// ranges do), so disjoint chunks of one base may be used on two streams
// unordered.
absl::Status checkStreamHazards(const plan::Plan &plan, const LoadedPlan &loaded,
                                const Lifetimes &life) {
  if (plan.num_streams() < 2)
    return absl::OkStatus();
  struct Use {
    int64_t index;
    uint32_t stream;
    bool writes;
    uint32_t tensor;
  };
  for (int p = 0; p < static_cast<int>(loaded.programs.size()); ++p) {
    const auto &insts = loaded.programs[p].instructions;
    const StreamOrder &order = life.orders[p];
    absl::flat_hash_map<uint32_t, std::vector<Use>> uses;
    for (int64_t i = 0; i < static_cast<int64_t>(insts.size()); ++i) {
      const LoadedInstruction &inst = insts[i];
      auto add = [&](uint32_t id, bool writes) {
        uses[viewBase(plan, id)].push_back({i, inst.stream, writes, id});
      };
      // An all-reduce names its tensors as inputs and outputs both.
      for (uint32_t id : inst.inputs)
        add(id, false);
      for (uint32_t id : inst.outputs)
        add(id, true);
      if (inst.kind == LoadedInstruction::Kind::kStage)
        add(inst.tensor, true);
      if (inst.kind == LoadedInstruction::Kind::kReadback)
        add(inst.tensor, false);
    }
    auto ordered = [&](int64_t a, int64_t b) {
      StreamUses one(order.numStreams());
      order.addUse(one, a);
      return order.startsAfter(b, one);
    };
    for (const auto &[base, list] : uses)
      for (size_t x = 0; x < list.size(); ++x)
        for (size_t y = x + 1; y < list.size(); ++y) {
          const Use &a = list[x], &b = list[y];
          if (a.stream == b.stream || (!a.writes && !b.writes))
            continue;
          if (!bytesMeet(plan, a.tensor, b.tensor))
            continue;
          if (ordered(a.index, b.index) || ordered(b.index, a.index))
            continue;
          const std::string what =
              a.tensor == b.tensor
                  ? absl::StrCat("both use ", tensorRef(plan, a.tensor),
                                 ", and at least one writes it")
                  : absl::StrCat("use ", tensorRef(plan, a.tensor), " and ",
                                 tensorRef(plan, b.tensor), ", ",
                                 relation(plan, a.tensor, b.tensor),
                                 ", which share bytes ",
                                 sharedBytes(plan, a.tensor, b.tensor),
                                 ", and at least one writes them");
          return refuse(absl::StrCat(
              "plan.programs[", p, "] (", absl::CEscape(loaded.programs[p].name),
              ") instructions ", a.index, " (", instructionName(insts[a.index]),
              ", stream ", a.stream, ") and ", b.index, " (",
              instructionName(insts[b.index]), ", stream ", b.stream, ") ",
              what,
              ", but no event orders them: record an event after the first "
              "and wait for it before the second"));
        }
  }
  return absl::OkStatus();
}

// Kernels assume their outputs alias nothing else of the launch, and a
// collective's operands are distinct buffers: the program checks refuse an
// instruction naming one tensor twice (but an all-reduce's own in-place
// tensors), and here no instruction writes bytes it also reaches through
// another view of the same base.
absl::Status checkViewOperands(const plan::Plan &plan,
                               const LoadedPlan &loaded) {
  bool views = false;
  for (const plan::Tensor &t : plan.tensors())
    views = views || t.view_of() != 0;
  if (!views)
    return absl::OkStatus();
  for (int p = 0; p < static_cast<int>(loaded.programs.size()); ++p) {
    const auto &insts = loaded.programs[p].instructions;
    for (int64_t i = 0; i < static_cast<int64_t>(insts.size()); ++i) {
      const LoadedInstruction &inst = insts[i];
      for (uint32_t out : inst.outputs)
        for (const auto *ids : {&inst.inputs, &inst.outputs})
          for (uint32_t other : *ids) {
            if (other == out ||
                viewBase(plan, other) != viewBase(plan, out) ||
                !bytesMeet(plan, out, other))
              continue;
            return refuse(absl::StrCat(
                "plan.programs[", p, "] (",
                absl::CEscape(loaded.programs[p].name), ") instruction ", i,
                " (", instructionName(inst), ") writes ", tensorRef(plan, out),
                " and also ", ids == &inst.inputs ? "reads " : "writes ",
                tensorRef(plan, other), ", ", relation(plan, out, other),
                ", which share bytes ", sharedBytes(plan, out, other),
                ": an instruction never writes bytes it reaches through "
                "another tensor"));
          }
    }
  }
  return absl::OkStatus();
}

} // namespace

namespace {

// The tensors that own bytes in one address space, the device arena or the
// host arena (`host`), in offset order. Views own no bytes: the sweep checks
// their bases, whose lifetimes cover every use of their views.
std::vector<uint32_t> ownersByOffset(const plan::Plan &plan, bool host) {
  std::vector<uint32_t> order;
  for (int i = 0; i < plan.tensors_size(); ++i) {
    const plan::Tensor &t = plan.tensors(i);
    if (t.size_bytes() > 0 && t.view_of() == 0 && t.host() == host)
      order.push_back(static_cast<uint32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return plan.tensors(a).offset() < plan.tensors(b).offset() ||
           (plan.tensors(a).offset() == plan.tensors(b).offset() && a < b);
  });
  return order;
}

// Sweeps `order` (ownersByOffset: one address space) keeping the tensors
// whose bytes reach the current offset; every pair that shares bytes meets
// in this set exactly once, and must be two activations whose lifetimes do
// not meet. `arena` names the address space in messages.
absl::Status sweepArena(const plan::Plan &plan, const LoadedPlan &loaded,
                        const Lifetimes &life,
                        const std::vector<uint32_t> &order,
                        absl::string_view arena) {
  auto end = [&](uint32_t id) { return endOf(plan.tensors(id)); };
  std::vector<bool> hasViews(plan.tensors_size());
  for (const plan::Tensor &t : plan.tensors())
    if (t.view_of() != 0)
      hasViews[t.view_of() - 1] = true;
  std::vector<uint32_t> open;
  for (uint32_t id : order) {
    const plan::Tensor &t = plan.tensors(id);
    open.erase(std::remove_if(open.begin(), open.end(),
                              [&](uint32_t o) { return end(o) <= t.offset(); }),
               open.end());
    for (uint32_t o : open) {
      const plan::Tensor &u = plan.tensors(o);
      std::string shared =
          absl::StrCat(tensorRef(plan, o), " and ", tensorRef(plan, id),
                       " share ", arena, " bytes [", t.offset(), ", ",
                       std::min(end(o), end(id)), ")");
      if (u.kind() != plan::ACTIVATION || t.kind() != plan::ACTIVATION)
        return absl::InvalidArgumentError(absl::StrCat(
            shared, ", but ",
            u.kind() != plan::ACTIVATION ? tensorRef(plan, o)
                                         : tensorRef(plan, id),
            " is a ",
            tensorKindName(u.kind() != plan::ACTIVATION ? u.kind() : t.kind()),
            " tensor: only ACTIVATION tensors may reuse bytes"));
      auto [mine, theirs] = firstClash(life, o, id);
      if (mine != nullptr)
        return absl::InvalidArgumentError(absl::StrCat(
            shared, " while both are live in plan.programs[", mine->program,
            "] (", absl::CEscape(loaded.programs[mine->program].name),
            "): instructions ", mine->uses.first, "..", mine->uses.last,
            " and ", theirs->uses.first, "..", theirs->uses.last,
            "; activations may share bytes only when every use of one "
            "finishes before any use of the other starts (in order on one "
            "stream, or through events)",
            hasViews[o] || hasViews[id]
                ? "; a base is live wherever any of its views is used"
                : ""));
    }
    open.push_back(id);
  }
  return absl::OkStatus();
}

} // namespace

absl::Status checkArenaLayout(const plan::Plan &plan,
                              const LoadedPlan &loaded) {
  if (absl::Status s = checkViewOperands(plan, loaded); !s.ok())
    return s;
  const Lifetimes life = lifetimes(plan, loaded);
  if (absl::Status s = checkStreamHazards(plan, loaded, life); !s.ok())
    return s;
  // The host arena (plan.proto Tensor.host) is an address space of its
  // own: a host tensor never shares bytes with a device tensor, whatever
  // their offsets, and host tensors that overlap follow the rules device
  // activations do.
  if (absl::Status s = sweepArena(
          plan, loaded, life, ownersByOffset(plan, /*host=*/false), "arena");
      !s.ok())
    return s;
  return sweepArena(plan, loaded, life, ownersByOffset(plan, /*host=*/true),
                    "host arena");
}

} // namespace braid::plan_checks
