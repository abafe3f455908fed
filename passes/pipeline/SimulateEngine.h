// The simulator's engine, shared by its two ways of timing a schedule
// (Simulate.cpp, SharedCores.cpp): the schedule's entries as nodes, the
// transfers between ranks as channels, and the state of a run. Private to
// passes/pipeline.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pipeline/Simulate.h"

namespace braid::pipeline::detail {

constexpr double kUnknown = -1;

// A tensor that crosses from one stage to the next: the activations of `mb`
// into stage `to` (from to - 1), or the gradient into `to` (from to + 1).
struct Tensor {
  bool gradient = false;
  int64_t mb = 0;
  int64_t to = 0;
  bool operator==(const Tensor &o) const {
    return gradient == o.gradient && mb == o.mb && to == o.to;
  }
};

// What an entry waits for from another entry: a tensor through a channel,
// or in memory from an entry of its own rank.
struct Input {
  Tensor tensor;
  int64_t producer = -1; // node
  int64_t channel = -1;  // -1: in memory
  double ready = kUnknown;
};

// One entry of the schedule. Nodes are numbered rank by rank, in each
// rank's order, so the entry before node n on its rank is node n - 1.
struct Node {
  const Entry *entry = nullptr;
  int64_t rank = 0, pos = 0;
  // The stage of the forward half (F, FB), of the backward half (B, BW,
  // FB), and of a W; -1 where the entry has no such part.
  int64_t fStage = -1, bStage = -1, wStage = -1;
  double cost = 0;
  Input inputs[2];
  int numInputs = 0;
  int pending = 0; // inputs whose time is not known yet
  double start = kUnknown, end = kUnknown;
};

// An ordered pair of ranks: its sends in the sender's order, its receives
// in the receiver's, each queue consumed from its head.
struct Channel {
  struct Item {
    int64_t node;
    Tensor tensor;
    int slot = 0; // receives: which input of the node
  };
  std::vector<Item> sends, recvs;
  size_t sendHead = 0, recvHead = 0;
  double last = 0; // end of the channel's previous transfer
};

// A run of one schedule: checks it, builds its nodes and channels, times
// them one of two ways, and reads the results or the reason it is stuck.
class Engine {
public:
  Engine(const Schedule &schedule, const CostModel &costs)
      : schedule_(schedule), costs_(costs), place_(schedule.placement),
        mbs_(schedule.microBatches) {}

  absl::StatusOr<Simulation> run();

private:
  absl::Status checkShape() const;
  absl::Status buildNodes();
  absl::Status checkComplete() const;
  void buildTransfers();
  void addInput(int64_t consumer, Tensor tensor, int64_t producer);
  int64_t channel(int64_t from, int64_t to, bool gradient);
  // Every rank its own compute (cores = 0): times as max-plus sums.
  void runOwnCores();
  void advanceRank(int64_t rank);
  // The ranks sharing costs_.cores (SharedCores.cpp): times on one clock.
  void runSharedCores();
  void advanceChannel(int64_t c);
  void wake(int64_t rank);
  std::string whyStuck(int64_t rank) const;
  std::string whyWaiting(const Node &node, const Input &input) const;
  Simulation results() const;

  int64_t slot(int64_t stage, int64_t mb) const { return stage * mbs_ + mb; }
  std::string at(int64_t node) const;

  const Schedule &schedule_;
  const CostModel &costs_;
  const Placement &place_;
  const int64_t mbs_;

  std::vector<Node> nodes_;
  std::vector<int64_t> firstNode_; // per rank, and one past the last
  // Per (stage, mb): the node of its forward, its backward (B, BW or FB)
  // and its W; -1 where there is none.
  std::vector<int64_t> forward_, backward_, weight_;
  std::vector<Channel> channels_;
  // Per rank: (2 x receiver + 1 for gradients, channel).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> peers_;

  // Per rank: its first entry not started yet (on shared cores, the one
  // before it may still be running).
  std::vector<int64_t> next_;
  std::vector<double> free_;  // per rank: when its stream is free
  std::vector<int64_t> work_; // ranks to try
  std::vector<bool> queued_;
};

} // namespace braid::pipeline::detail
