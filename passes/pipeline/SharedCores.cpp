// The simulator's shared-cores mode (CostModel::cores > 0, Simulate.h): the
// engine's nodes and channels timed on one clock, the entries that run at
// the same time on different ranks sharing the cores.
//
// The clock moves from event to event: the end of an activity, or the
// arrival of what a rank's next entry waits for (a transfer's completion).
// At each instant it ends the activities due (an entry ends with its last
// one, and its sends join their channels), then starts every entry whose
// rank's stream is free and whose inputs have arrived by now, and does so
// again until nothing changes at that instant. Which transfer meets which
// is the channels' business, as in the max-plus engine: a transfer's
// completion, max(send, posting, the channel's previous one) + transfer,
// is computed once its send and its posting have happened, so it is never
// earlier than the instant it becomes known, and the clock never passes
// one.
//
// Between two events k activities run, each at rate min(1, cores / k):
// an activity keeps its projected end at the current rate, and when k
// changes the rate, what is left of each ((end - now) at the old rate) is
// projected again at the new one. While the rate stays 1 an activity ends
// at exactly its start plus its cost, so where the cores are never
// oversubscribed the times are the max-plus engine's, bit for bit.
//
// An instant costs O(ranks + running activities), and there is at most one
// per activity's end and one per transfer, so a run is O(entries x ranks).
// When the clock has nothing left to wait for, the entries not started
// are stuck, and the engine's deadlock report reads the same state as for
// a core per rank: which entries run does not depend on the times.
#include <algorithm>
#include <limits>
#include <vector>

#include "passes/pipeline/SimulateEngine.h"

namespace braid::pipeline::detail {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// A running part of an entry: its whole compute, or one half of an FB.
struct Activity {
  int64_t rank = 0;
  double end = 0; // projected at the current rate
};

} // namespace

void Engine::runSharedCores() {
  const double cores = static_cast<double>(costs_.cores);
  std::vector<Activity> running;
  // Per rank: the activities of its started entry still running; 0 where
  // its stream is free.
  std::vector<int> left(place_.ranks, 0);
  double now = 0, rate = 1;

  // Projects the running activities' ends again where the number of them
  // has changed the rate.
  auto rerate = [&] {
    const double k = static_cast<double>(running.size());
    const double r = k <= cores ? 1.0 : cores / k;
    if (r == rate)
      return;
    for (Activity &a : running)
      a.end = now + (a.end - now) * (rate / r);
    rate = r;
  };
  // When the rank's next entry can start: the latest of its inputs'
  // arrivals, or never while its stream is busy, it has no entry left, or
  // an input's time is not known.
  auto arrival = [&](int64_t rank) {
    const int64_t id = firstNode_[rank] + next_[rank];
    if (left[rank] > 0 || id == firstNode_[rank + 1] || nodes_[id].pending > 0)
      return kNever;
    const Node &n = nodes_[id];
    double t = 0;
    for (int i = 0; i < n.numInputs; ++i) {
      const Input &in = n.inputs[i];
      // In memory: an earlier entry of the same stream, ended by now.
      t = std::max(t, in.channel < 0 ? nodes_[in.producer].end : in.ready);
    }
    return t;
  };
  auto begin = [&](int64_t rank, double cost) {
    running.push_back({rank, now + cost / rate});
    ++left[rank];
  };

  // advanceChannel also wakes ranks for the max-plus loop; this one looks
  // at every rank at every instant and needs no waking.
  for (;;) {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t i = 0; i < running.size();) {
        if (running[i].end > now) {
          ++i;
          continue;
        }
        const int64_t rank = running[i].rank;
        running[i] = running.back();
        running.pop_back();
        moved = true;
        if (--left[rank] > 0)
          continue;
        nodes_[firstNode_[rank] + next_[rank] - 1].end = free_[rank] = now;
        for (auto [peer, c] : peers_[rank]) // its sends are ready
          advanceChannel(c);
      }
      rerate();
      for (int64_t rank = 0; rank < place_.ranks; ++rank) {
        if (arrival(rank) > now)
          continue;
        const int64_t id = firstNode_[rank] + next_[rank]++;
        Node &n = nodes_[id];
        n.start = now;
        moved = true;
        if (n.entry->kind == Kind::kFB) {
          const StageCosts &f = costs_.stage(n.fStage);
          const StageCosts &b = costs_.stage(n.bStage);
          begin(rank, f.f);
          begin(rank, b.b + b.w);
        } else {
          begin(rank, n.cost);
        }
        rerate();
        // The next entry's receives are posted.
        if (id + 1 < firstNode_[rank + 1]) {
          const Node &following = nodes_[id + 1];
          for (int i = 0; i < following.numInputs; ++i)
            if (following.inputs[i].channel >= 0)
              advanceChannel(following.inputs[i].channel);
        }
      }
    }
    double next = kNever;
    for (const Activity &a : running)
      next = std::min(next, a.end);
    for (int64_t rank = 0; rank < place_.ranks; ++rank)
      next = std::min(next, arrival(rank));
    if (next == kNever)
      return;
    now = next;
  }
}

} // namespace braid::pipeline::detail
