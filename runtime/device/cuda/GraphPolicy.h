// When a program runs eagerly, is captured into a CUDA graph, or replays its
// graph. Pure logic, without CUDA, so that it is tested on machines without
// a GPU; CudaDevice keeps one policy per program and does what it says.
//
// A program's first run is eager: it loads kernel modules lazily, lets
// cuBLASLt pick its algorithms and allocate nothing later, none of which may
// happen inside a capture. The next run captures the program into a graph
// and launches it; later runs replay the graph. A graph holds the device
// addresses its kernels were captured with, which are arena offsets fixed by
// the plan, and the values that change per run come from the step-values
// buffer, so a replay is the same as an eager run. A graph is re-captured
// when the memory it was captured over changes (a new arena epoch), never
// made when graphs are off, and no longer tried once a capture has failed
// (refuse()). Every program's order can be a graph: its waits name single
// records (the loader's event rules), which become graph edges. While a profile is attached, runs are eager so that
// each launch can be timed; the graph is kept.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace braid {

class GraphPolicy {
public:
  enum class Action { kEager, kCapture, kReplay };

  // `enabled`: --cuda-graphs=on.
  explicit GraphPolicy(bool enabled);

  // The action for the next run over memory of epoch `arenaEpoch` (the
  // device bumps it whenever it reallocates what graphs point into).
  Action next(uint64_t arenaEpoch, bool profiling) const;
  // Reports how a run of `action` went. A failed run changes nothing, so the
  // same action is chosen again.
  void ran(Action action, uint64_t arenaEpoch, bool succeeded);
  // Stops capturing for good: a capture failed for `why` (a sentence). Runs
  // are eager from then on, and any graph is forgotten.
  void refuse(std::string why);

  // Whether the program may ever be captured, and if not, why (nullopt when
  // graphs are merely switched off).
  bool capturable() const { return enabled_ && !refusal_; }
  const std::optional<std::string> &refusal() const { return refusal_; }
  bool hasGraph() const { return graphEpoch_.has_value(); }

private:
  bool enabled_;
  std::optional<std::string> refusal_;
  bool warmedUp_ = false;
  // The arena epoch the current graph was captured over.
  std::optional<uint64_t> graphEpoch_;
};

const char *graphActionName(GraphPolicy::Action action);

} // namespace braid
