// The pipeline simulator: the execution model of Simulate.h as a max-plus
// computation over the schedule's entries, for ranks that each have their
// own compute (CostModel::cores = 0). The engine's checks, its nodes and
// channels, its deadlock report and its results serve the shared-cores mode
// too (SharedCores.cpp), which times the same nodes on one clock.
//
// Which transfer meets which is decided by the orders alone (the heads of
// each rank pair's send and receive queues), not by the times, so the engine
// needs no global clock: it runs an entry as soon as the times of everything
// it waits for are known, and a transfer as soon as its send and receive are
// at their queues' heads and both times are known. Each entry and each
// transfer is handled once, so a run costs O(entries). When nothing more can
// run but entries remain, the state left in the queues says why, rank by
// rank.
#include "passes/pipeline/Simulate.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/pipeline/SimulateEngine.h"

namespace braid::pipeline {

const StageCosts &CostModel::stage(int64_t s) const {
  static const StageCosts kUnit;
  return stages.empty() ? kUnit : stages[s];
}

double CostModel::fbCost(double f, double bw) const {
  return fbShare < 0 ? f + bw : fbShare * (f + bw);
}

namespace detail {
namespace {

std::string describe(const Entry &e) {
  if (e.kind == Kind::kFB)
    return absl::StrCat("FB (F mb ", e.mb, " chunk ", e.chunk, " with BW mb ",
                        e.bMb, " chunk ", e.bChunk, ")");
  return absl::StrCat(kindName(e.kind), " mb ", e.mb, " chunk ", e.chunk);
}

std::string describeTensor(const Tensor &t) {
  return absl::StrCat(t.gradient ? "the gradient" : "the activations",
                      " of mb ", t.mb);
}

} // namespace

std::string Engine::at(int64_t node) const {
  return absl::StrCat(describe(*nodes_[node].entry), " at entry ",
                      nodes_[node].pos);
}

absl::Status Engine::checkShape() const {
  if (place_.ranks < 1 || place_.chunks < 1 ||
      (place_.vShape && place_.chunks != 2))
    return absl::InvalidArgumentError(absl::StrCat(
        "the placement of ", place_.ranks, " ranks with ", place_.chunks,
        " chunks each", place_.vShape ? " in a V" : "", " is not one"));
  if (static_cast<int64_t>(schedule_.ranks.size()) != place_.ranks)
    return absl::InvalidArgumentError(
        absl::StrCat("the schedule has orders for ", schedule_.ranks.size(),
                     " ranks, its placement ", place_.ranks));
  if (mbs_ < 1)
    return absl::InvalidArgumentError(
        absl::StrCat(mbs_, " is not a number of micro-batches"));
  if (!costs_.stages.empty() &&
      static_cast<int64_t>(costs_.stages.size()) != place_.stages())
    return absl::InvalidArgumentError(
        absl::StrCat("the cost model has costs for ", costs_.stages.size(),
                     " stages, the schedule ", place_.stages()));
  // Times start at 0 and only grow; a negative cost would break that.
  auto bad = [](double v) { return !(v >= 0); };
  bool negative = bad(costs_.transfer) || bad(costs_.fbCost(1, 1)) ||
                  std::isnan(costs_.gradientTransfer);
  for (const StageCosts &c : costs_.stages)
    negative |= bad(c.f) || bad(c.b) || bad(c.w) || bad(c.activationBytes);
  if (negative)
    return absl::InvalidArgumentError(
        "the cost model has a negative (or NaN) cost, transfer time, FB "
        "share or activation size");
  if (costs_.cores < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the cost model shares ", costs_.cores, " cores between the ranks"));
  return absl::OkStatus();
}

// Numbers the entries, checks their micro-batches and chunks, and fills the
// per (stage, mb) tables, rejecting a part that is there twice.
absl::Status Engine::buildNodes() {
  const int64_t stages = place_.stages();
  forward_.assign(stages * mbs_, -1);
  backward_.assign(stages * mbs_, -1);
  weight_.assign(stages * mbs_, -1);
  for (int64_t r = 0; r < place_.ranks; ++r) {
    firstNode_.push_back(nodes_.size());
    const std::vector<Entry> &order = schedule_.ranks[r];
    for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) {
      const Entry &e = order[i];
      auto valid = [&](int64_t mb, int64_t chunk) {
        return mb >= 0 && mb < mbs_ && chunk >= 0 && chunk < place_.chunks;
      };
      if (!valid(e.mb, e.chunk) ||
          (e.kind == Kind::kFB && !valid(e.bMb, e.bChunk)))
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", r, " entry ", i, ", ", describe(e), ", is outside the ",
            mbs_, " micro-batches and ", place_.chunks, " chunks per rank"));
      Node n;
      n.entry = &e;
      n.rank = r;
      n.pos = i;
      const int64_t stage = place_.stageOf(r, e.chunk);
      const StageCosts &c = costs_.stage(stage);
      switch (e.kind) {
      case Kind::kF:
        n.fStage = stage;
        n.cost = c.f;
        break;
      case Kind::kB:
        n.bStage = stage;
        n.cost = c.b;
        break;
      case Kind::kW:
        n.wStage = stage;
        n.cost = c.w;
        break;
      case Kind::kBW:
        n.bStage = stage;
        n.cost = c.b + c.w;
        break;
      case Kind::kFB: {
        n.fStage = stage;
        n.bStage = place_.stageOf(r, e.bChunk);
        const StageCosts &bc = costs_.stage(n.bStage);
        n.cost = costs_.fbCost(c.f, bc.b + bc.w);
        break;
      }
      }
      const int64_t id = nodes_.size();
      auto claim = [&](std::vector<int64_t> &table, int64_t s, int64_t mb,
                       const char *what) -> absl::Status {
        int64_t &held = table[slot(s, mb)];
        if (held >= 0)
          return absl::FailedPreconditionError(absl::StrCat(
              "incomplete schedule: rank ", r, " runs the ", what, " of mb ",
              mb, " chunk ", place_.chunkOf(s), " twice: ", at(held), " and ",
              describe(e), " at entry ", i));
        held = id;
        return absl::OkStatus();
      };
      nodes_.push_back(n);
      if (n.fStage >= 0)
        if (absl::Status s = claim(forward_, n.fStage, e.mb, "forward");
            !s.ok())
          return s;
      if (n.bStage >= 0)
        if (absl::Status s =
                claim(backward_, n.bStage, e.kind == Kind::kFB ? e.bMb : e.mb,
                      "backward");
            !s.ok())
          return s;
      if (n.wStage >= 0)
        if (absl::Status s = claim(weight_, n.wStage, e.mb, "weight gradient");
            !s.ok())
          return s;
    }
  }
  firstNode_.push_back(nodes_.size());
  return absl::OkStatus();
}

// Every (stage, mb) has one forward and one backward after it, and a B has
// one W after it while a BW or FB has none.
absl::Status Engine::checkComplete() const {
  for (int64_t s = 0; s < place_.stages(); ++s) {
    const int64_t rank = place_.rankOf(s), chunk = place_.chunkOf(s);
    for (int64_t mb = 0; mb < mbs_; ++mb) {
      const int64_t f = forward_[slot(s, mb)], b = backward_[slot(s, mb)],
                    w = weight_[slot(s, mb)];
      if (f < 0)
        return absl::FailedPreconditionError(absl::StrCat(
            "incomplete schedule: rank ", rank, " runs no forward of mb ", mb,
            " chunk ", chunk,
            b >= 0 ? absl::StrCat(", yet runs its backward, ", at(b)) : ""));
      if (b < 0)
        return absl::FailedPreconditionError(absl::StrCat(
            "incomplete schedule: rank ", rank, " runs no backward of mb ", mb,
            " chunk ", chunk, " after its forward, ", at(f)));
      if (b <= f)
        return absl::FailedPreconditionError(
            absl::StrCat("incomplete schedule: rank ", rank, " runs ", at(b),
                         ", the backward of mb ", mb, " chunk ", chunk,
                         ", before its forward, ", at(f)));
      const bool split = nodes_[b].entry->kind == Kind::kB;
      if (split && w < 0)
        return absl::FailedPreconditionError(absl::StrCat(
            "incomplete schedule: rank ", rank, " runs ", at(b),
            " but no W mb ", mb, " chunk ", chunk, " for its weight gradient"));
      if (!split && w >= 0)
        return absl::FailedPreconditionError(absl::StrCat(
            "incomplete schedule: rank ", rank, " runs ", at(w),
            " without a B mb ", mb, " chunk ", chunk, ": its backward, ", at(b),
            ", computes the weight gradient already"));
      if (split && w < b)
        return absl::FailedPreconditionError(
            absl::StrCat("incomplete schedule: rank ", rank, " runs ", at(w),
                         " before its B, ", at(b)));
    }
  }
  return absl::OkStatus();
}

// Activations and gradients travel on channels of their own between two
// ranks (the step program tags them apart and posts them on separate
// streams), so that one kind waiting does not hold the other up.
int64_t Engine::channel(int64_t from, int64_t to, bool gradient) {
  const int64_t key = 2 * to + (gradient ? 1 : 0);
  for (auto [peer, c] : peers_[from])
    if (peer == key)
      return c;
  const int64_t c = channels_.size();
  channels_.push_back({});
  peers_[from].push_back({key, c});
  return c;
}

void Engine::addInput(int64_t consumer, Tensor tensor, int64_t producer) {
  Node &n = nodes_[consumer];
  Input &in = n.inputs[n.numInputs];
  in.tensor = tensor;
  in.producer = producer;
  const int64_t from = nodes_[producer].rank;
  if (from == n.rank) {
    // Handed over in memory: the stream runs the producer first, or never
    // gets there when the producer comes later in the same order.
    if (nodes_[producer].pos > n.pos)
      ++n.pending;
  } else {
    in.channel = channel(from, n.rank, tensor.gradient);
    channels_[in.channel].recvs.push_back({consumer, in.tensor, n.numInputs});
    ++n.pending;
  }
  ++n.numInputs;
}

// The receives and sends of every entry, in each rank's order, an FB's
// forward half's before its backward half's.
void Engine::buildTransfers() {
  const int64_t last = place_.stages() - 1;
  peers_.resize(place_.ranks);
  for (int64_t id = 0; id < static_cast<int64_t>(nodes_.size()); ++id) {
    const Node &n = nodes_[id];
    const int64_t fMb = n.entry->mb;
    const int64_t bMb = n.entry->kind == Kind::kFB ? n.entry->bMb : n.entry->mb;
    if (n.fStage > 0)
      addInput(id, {false, fMb, n.fStage}, forward_[slot(n.fStage - 1, fMb)]);
    if (n.bStage >= 0 && n.bStage < last)
      addInput(id, {true, bMb, n.bStage}, backward_[slot(n.bStage + 1, bMb)]);
    auto send = [&](bool gradient, int64_t mb, int64_t toStage) {
      const int64_t to = place_.rankOf(toStage);
      if (to != n.rank)
        channels_[channel(n.rank, to, gradient)].sends.push_back(
            {id, Tensor{gradient, mb, toStage}});
    };
    if (n.fStage >= 0 && n.fStage < last)
      send(false, fMb, n.fStage + 1);
    if (n.bStage > 0)
      send(true, bMb, n.bStage - 1);
  }
}

void Engine::wake(int64_t rank) {
  if (!queued_[rank]) {
    queued_[rank] = true;
    work_.push_back(rank);
  }
}

// Matches the heads of a channel's queues while their times are known.
void Engine::advanceChannel(int64_t c) {
  Channel &ch = channels_[c];
  while (ch.sendHead < ch.sends.size() && ch.recvHead < ch.recvs.size()) {
    const Channel::Item &send = ch.sends[ch.sendHead];
    const Channel::Item &recv = ch.recvs[ch.recvHead];
    // Heads that disagree never change: the deadlock report says why.
    if (!(send.tensor == recv.tensor))
      return;
    const Node &producer = nodes_[send.node];
    Node &consumer = nodes_[recv.node];
    const double posted = consumer.pos == 0 ? 0 : nodes_[recv.node - 1].start;
    if (producer.end == kUnknown || posted == kUnknown)
      return;
    ch.last = std::max({producer.end, posted, ch.last}) +
              (send.tensor.gradient && costs_.gradientTransfer >= 0
                   ? costs_.gradientTransfer
                   : costs_.transfer);
    consumer.inputs[recv.slot].ready = ch.last;
    ++ch.sendHead;
    ++ch.recvHead;
    if (--consumer.pending == 0 && consumer.pos == next_[consumer.rank])
      wake(consumer.rank);
  }
}

// Runs the rank's entries while their inputs are there.
void Engine::advanceRank(int64_t rank) {
  const int64_t count = firstNode_[rank + 1] - firstNode_[rank];
  while (next_[rank] < count) {
    const int64_t id = firstNode_[rank] + next_[rank];
    Node &n = nodes_[id];
    if (n.pending > 0)
      return;
    double start = free_[rank];
    for (int i = 0; i < n.numInputs; ++i) {
      Input &in = n.inputs[i];
      if (in.channel < 0)
        in.ready = nodes_[in.producer].end;
      start = std::max(start, in.ready);
    }
    n.start = start;
    n.end = free_[rank] = start + n.cost;
    ++next_[rank];
    // Its sends are ready, and the next entry's receives are posted.
    for (auto [peer, c] : peers_[rank])
      advanceChannel(c);
    if (next_[rank] < count) {
      const Node &following = nodes_[id + 1];
      for (int i = 0; i < following.numInputs; ++i)
        if (following.inputs[i].channel >= 0)
          advanceChannel(following.inputs[i].channel);
    }
  }
}

std::string Engine::whyWaiting(const Node &node, const Input &input) const {
  const Node &producer = nodes_[input.producer];
  if (input.channel < 0)
    return absl::StrCat("its input, ", describeTensor(input.tensor),
                        ", comes in memory from its own ",
                        describe(*producer.entry),
                        ", which it runs later, at entry ", producer.pos);
  const Channel &ch = channels_[input.channel];
  const std::string what =
      absl::StrCat("its receive of ", describeTensor(input.tensor),
                   " from rank ", producer.rank);
  // The node's earlier receives have all completed, so its first pending
  // one on this channel is at the head; a second one (an FB's) waits on it.
  const Channel::Item &recv = ch.recvs[ch.recvHead];
  if (!(recv.tensor == input.tensor))
    return absl::StrCat(what, " is posted after its receive of ",
                        describeTensor(recv.tensor));
  // Its send is queued, so the queue has a head.
  const Channel::Item &send = ch.sends[ch.sendHead];
  if (send.tensor == input.tensor)
    return absl::StrCat(what, " waits for rank ", producer.rank, " to run ",
                        at(input.producer));
  int64_t taker = -1;
  for (size_t j = ch.recvHead; j < ch.recvs.size() && taker < 0; ++j)
    if (ch.recvs[j].tensor == send.tensor)
      taker = ch.recvs[j].node;
  return absl::StrCat(what, " waits behind rank ", producer.rank, "'s send of ",
                      describeTensor(send.tensor), " (from ", at(send.node),
                      "), which rank ", node.rank,
                      taker >= 0
                          ? absl::StrCat(" receives only later, at ", at(taker))
                          : std::string(" never receives"));
}

std::string Engine::whyStuck(int64_t rank) const {
  const Node &n = nodes_[firstNode_[rank] + next_[rank]];
  std::vector<std::string> reasons;
  for (int i = 0; i < n.numInputs; ++i) {
    const Input &in = n.inputs[i];
    if (in.channel >= 0 ? in.ready == kUnknown
                        : nodes_[in.producer].pos > n.pos)
      reasons.push_back(whyWaiting(n, in));
  }
  return absl::StrCat("rank ", rank, " cannot run ", describe(*n.entry),
                      " (entry ", n.pos, "): ", absl::StrJoin(reasons, "; "));
}

Simulation Engine::results() const {
  Simulation sim;
  sim.ranks.resize(place_.ranks);
  for (const Node &n : nodes_)
    sim.stepTime = std::max(sim.stepTime, n.end);
  for (int64_t r = 0; r < place_.ranks; ++r) {
    RankResult &out = sim.ranks[r];
    int64_t inFlight = 0;
    double bytes = 0;
    for (int64_t id = firstNode_[r]; id < firstNode_[r + 1]; ++id) {
      const Node &n = nodes_[id];
      out.spans.push_back({*n.entry, n.start, n.end});
      // On shared cores an entry runs longer than its cost when the cores
      // are oversubscribed, an FB shorter where its halves overlap: its
      // span is what the rank is busy.
      out.busy += costs_.cores > 0 ? n.end - n.start : n.cost;
      // A forward holds its activations from its start; a W, BW or an FB's
      // backward half lets them go at its end.
      if (n.fStage >= 0) {
        ++inFlight;
        bytes += costs_.stage(n.fStage).activationBytes;
        out.peakInFlight = std::max(out.peakInFlight, inFlight);
        out.peakActivationBytes = std::max(out.peakActivationBytes, bytes);
      }
      int64_t freed = -1;
      if (n.entry->kind == Kind::kW)
        freed = n.wStage;
      else if (n.entry->kind != Kind::kB)
        freed = n.bStage; // BW, FB (an F has none)
      if (freed >= 0) {
        --inFlight;
        bytes -= costs_.stage(freed).activationBytes;
      }
    }
    out.bubble = sim.stepTime - out.busy;
    out.bubbleRatio = sim.stepTime > 0 ? out.bubble / sim.stepTime : 0;
  }
  return sim;
}

void Engine::runOwnCores() {
  for (int64_t r = 0; r < place_.ranks; ++r)
    wake(r);
  while (!work_.empty()) {
    const int64_t rank = work_.back();
    work_.pop_back();
    queued_[rank] = false;
    advanceRank(rank);
  }
}

absl::StatusOr<Simulation> Engine::run() {
  if (absl::Status s = checkShape(); !s.ok())
    return s;
  if (absl::Status s = buildNodes(); !s.ok())
    return s;
  if (absl::Status s = checkComplete(); !s.ok())
    return s;
  buildTransfers();

  next_.assign(place_.ranks, 0);
  free_.assign(place_.ranks, 0);
  queued_.assign(place_.ranks, false);
  for (int64_t c = 0; c < static_cast<int64_t>(channels_.size()); ++c)
    advanceChannel(c);
  if (costs_.cores > 0)
    runSharedCores();
  else
    runOwnCores();

  std::vector<std::string> stuck;
  for (int64_t r = 0; r < place_.ranks; ++r)
    if (firstNode_[r] + next_[r] < firstNode_[r + 1])
      stuck.push_back(whyStuck(r));
  if (!stuck.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("deadlock: ", absl::StrJoin(stuck, "; ")));
  return results();
}

} // namespace detail

absl::StatusOr<Simulation> simulate(const Schedule &schedule,
                                    const CostModel &costs) {
  return detail::Engine(schedule, costs).run();
}

absl::Status checkSchedule(const Schedule &schedule) {
  return simulate(schedule, CostModel{}).status();
}

} // namespace braid::pipeline
