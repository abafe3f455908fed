// Pipeline transfers: the order of one plan's sends and receives on each
// channel, and what the stages of a pipeline plan must agree on (whose
// parameters, whose losses, which send meets which receive).
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/plan/PlanChecks.h"
#include "runtime/plan/StreamOrder.h"

namespace braid::plan_checks {
namespace {

bool isTransfer(const LoadedInstruction &inst) {
  return inst.kind == LoadedInstruction::Kind::kSend ||
         inst.kind == LoadedInstruction::Kind::kRecv;
}

// The PP coordinate `offset` away from `coord`, modulo the pipeline's size.
int64_t peerOf(int64_t coord, int32_t offset, int64_t pp) {
  return ((coord + offset) % pp + pp) % pp;
}

std::string ordinal(size_t n) {
  const char *suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    if (n % 10 == 1)
      suffix = "st";
    else if (n % 10 == 2)
      suffix = "nd";
    else if (n % 10 == 3)
      suffix = "rd";
  }
  return absl::StrCat(n, suffix);
}

std::string programRef(const std::string &planPath, int p,
                       const LoadedProgram &program) {
  return absl::StrCat(planPath, ".programs[", p, "] (",
                      absl::CEscape(program.name), ")");
}

// One send or receive of a stage, for matching against its peer's.
struct Leg {
  int64_t stage = 0;
  int program = 0;
  int64_t instruction = 0;
  uint32_t tensor = 0;
};

std::string legRef(const LoadedPlan &pipeline, const Leg &leg) {
  const LoadedPlan &stage = pipeline.stages[leg.stage];
  return absl::StrCat(
      programRef(absl::StrCat("plan.stage_plans[", leg.stage, "]"), leg.program,
                 stage.programs[leg.program]),
      " instruction ", leg.instruction);
}

// "plan.stage_plans[1].tensors[4] (h.0)".
std::string stageTensorRef(const LoadedPlan &pipeline, int64_t stage,
                           uint32_t tensor) {
  return absl::StrCat(
      "plan.stage_plans[", stage, "].tensors[", tensor, "] (",
      absl::CEscape(pipeline.stages[stage].proto.tensors(tensor).name()), ")");
}

std::string moved(const LoadedPlan &stage, uint32_t tensor) {
  return absl::StrCat(stage.descs[tensor].numel(), " ",
                      planDTypeName(stage.proto.tensors(tensor).dtype()));
}

// The sends (or receives) from one PP coordinate to another on one channel,
// in program order.
using Route = std::tuple<int64_t, int64_t, uint32_t>; // from, to, channel

absl::Status matchTransfers(const LoadedPlan &pipeline,
                            plan::ProgramKind kind) {
  const int64_t pp = static_cast<int64_t>(pipeline.stages.size());
  std::map<Route, std::vector<Leg>> sends, recvs;
  for (int64_t k = 0; k < pp; ++k) {
    const LoadedPlan &stage = pipeline.stages[k];
    for (int p = 0; p < static_cast<int>(stage.programs.size()); ++p) {
      if (stage.programs[p].kind != kind)
        continue;
      const auto &insts = stage.programs[p].instructions;
      for (int64_t i = 0; i < static_cast<int64_t>(insts.size()); ++i) {
        if (!isTransfer(insts[i]))
          continue;
        const int64_t peer = peerOf(k, insts[i].peerOffset, pp);
        const bool send = insts[i].kind == LoadedInstruction::Kind::kSend;
        const Route route = send ? Route{k, peer, insts[i].channel}
                                 : Route{peer, k, insts[i].channel};
        (send ? sends : recvs)[route].push_back({k, p, i, insts[i].tensor});
      }
    }
  }
  const char *program = kind == plan::STEP ? "STEP" : "INIT";
  std::map<Route, std::vector<Leg>> routes = sends;
  for (const auto &[route, legs] : recvs)
    routes.emplace(route, std::vector<Leg>());
  for (const auto &[route, unused] : routes) {
    const auto &[from, to, channel] = route;
    const std::vector<Leg> &out = sends[route];
    const std::vector<Leg> &in = recvs[route];
    for (size_t n = 0; n < std::min(out.size(), in.size()); ++n) {
      const LoadedPlan &a = pipeline.stages[from];
      const LoadedPlan &b = pipeline.stages[to];
      const plan::Tensor &x = a.proto.tensors(out[n].tensor);
      const plan::Tensor &y = b.proto.tensors(in[n].tensor);
      if (x.dtype() == y.dtype() &&
          a.descs[out[n].tensor].numel() == b.descs[in[n].tensor].numel())
        continue;
      return refuse(absl::StrCat(
          legRef(pipeline, out[n]), " sends ", moved(a, out[n].tensor), " (",
          stageTensorRef(pipeline, from, out[n].tensor), "), pipeline rank ",
          from, "'s ", ordinal(n + 1), " send to rank ", to, " on channel ",
          channel, ", but the receive it meets, ", legRef(pipeline, in[n]),
          ", takes ", moved(b, in[n].tensor), " (",
          stageTensorRef(pipeline, to, in[n].tensor),
          "): a send and its receive move the same number of elements of one "
          "dtype"));
    }
    if (out.size() != in.size()) {
      const Leg &extra =
          out.size() > in.size() ? out[in.size()] : in[out.size()];
      return refuse(absl::StrCat(
          "pipeline rank ", from, "'s ", program, " program sends ", out.size(),
          " tensors to rank ", to, " on channel ", channel, " but rank ", to,
          "'s receives ", in.size(), " from rank ", from,
          " there: ", legRef(pipeline, extra),
          " meets no transfer of its peer, and would wait for ever"));
    }
  }
  return absl::OkStatus();
}

} // namespace

absl::Status checkTransferOrder(const plan::Plan &plan,
                                const LoadedPlan &loaded) {
  if (plan.num_streams() < 2)
    return absl::OkStatus();
  const int64_t pp = plan.mesh().pp();
  for (int p = 0; p < static_cast<int>(loaded.programs.size()); ++p) {
    const LoadedProgram &program = loaded.programs[p];
    const auto &insts = program.instructions;
    bool any = false;
    for (const LoadedInstruction &inst : insts)
      any = any || isTransfer(inst);
    if (!any)
      continue;
    const StreamOrder order(orderSteps(program), plan.num_streams());
    // The latest transfer of each (direction, peer, channel).
    std::map<std::tuple<bool, int64_t, uint32_t>, int64_t> latest;
    for (int64_t i = 0; i < static_cast<int64_t>(insts.size()); ++i) {
      if (!isTransfer(insts[i]))
        continue;
      const bool send = insts[i].kind == LoadedInstruction::Kind::kSend;
      auto [it, first] = latest.try_emplace(
          {send, peerOf(0, insts[i].peerOffset, pp), insts[i].channel}, i);
      if (first)
        continue;
      StreamUses earlier(order.numStreams());
      order.addUse(earlier, it->second);
      if (!order.startsAfter(i, earlier))
        return refuse(absl::StrCat(
            programRef("plan", p, program), " instructions ", it->second,
            " (stream ", insts[it->second].stream, ") and ", i, " (stream ",
            insts[i].stream, ") both ", send ? "send to" : "receive from",
            " the pipeline rank at offset ", insts[i].peerOffset,
            " on channel ", insts[i].channel,
            ", but no stream or event orders them: a channel's transfers "
            "meet the peer's in program order, so each must start after the "
            "one before it finishes (put them on one stream, or order them "
            "with an event)"));
      it->second = i;
    }
  }
  return absl::OkStatus();
}

absl::Status checkPipeline(LoadedPlan &pipeline) {
  const int64_t pp = static_cast<int64_t>(pipeline.stages.size());
  // Checkpoints hold every parameter once, under its name and its alias.
  absl::flat_hash_map<std::string, int64_t> owner;
  for (int64_t k = 0; k < pp; ++k) {
    const LoadedPlan &stage = pipeline.stages[k];
    for (uint32_t id : stage.parameters) {
      const plan::Tensor &t = stage.proto.tensors(id);
      for (const std::string &name : {t.name(), t.param().tied_alias()}) {
        if (name.empty())
          continue;
        auto [it, inserted] = owner.emplace(name, k);
        if (!inserted && it->second != k)
          return refuse(absl::StrCat(
              stageTensorRef(pipeline, k, id),
              name == t.name() ? " is"
                               : absl::StrCat(", under its tied alias \"",
                                              absl::CEscape(name), "\", is"),
              " a parameter of plan.stage_plans[", it->second,
              "] too: each parameter belongs to one pipeline rank, which "
              "trains and saves it"));
      }
    }
  }
  std::vector<int64_t> withLosses;
  for (int64_t k = 0; k < pp; ++k)
    if (pipeline.stages[k].proto.loss_readbacks_size() > 0)
      withLosses.push_back(k);
  if (withLosses.empty())
    return refuse("no stage plan reads the losses back: the plan of the "
                  "pipeline rank that computes the loss has "
                  "plan.train.num_micro_batches loss_readbacks");
  if (withLosses.size() > 1)
    return refuse(absl::StrCat(
        "plan.stage_plans[", withLosses[0], "] and plan.stage_plans[",
        withLosses[1],
        "] both read losses back: only the plan of the "
        "pipeline rank that computes the loss has loss_readbacks"));
  pipeline.lossStage = withLosses[0];
  for (plan::ProgramKind kind : {plan::STEP, plan::INIT})
    if (absl::Status s = matchTransfers(pipeline, kind); !s.ok())
      return s;
  return absl::OkStatus();
}

} // namespace braid::plan_checks
