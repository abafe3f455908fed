#include "runtime/device/cuda/GraphPolicy.h"

#include <utility>

namespace braid {

GraphPolicy::GraphPolicy(bool enabled) : enabled_(enabled) {}

GraphPolicy::Action GraphPolicy::next(uint64_t arenaEpoch,
                                      bool profiling) const {
  if (!capturable() || profiling || !warmedUp_)
    return Action::kEager;
  if (graphEpoch_ && *graphEpoch_ == arenaEpoch)
    return Action::kReplay;
  return Action::kCapture;
}

void GraphPolicy::ran(Action action, uint64_t arenaEpoch, bool succeeded) {
  if (!succeeded)
    return;
  switch (action) {
  case Action::kEager:
    warmedUp_ = true;
    break;
  case Action::kCapture:
    graphEpoch_ = arenaEpoch;
    break;
  case Action::kReplay:
    break;
  }
}

void GraphPolicy::refuse(std::string why) {
  refusal_ = std::move(why);
  graphEpoch_.reset();
}

const char *graphActionName(GraphPolicy::Action action) {
  switch (action) {
  case GraphPolicy::Action::kEager:
    return "eager";
  case GraphPolicy::Action::kCapture:
    return "capture";
  case GraphPolicy::Action::kReplay:
    return "replay";
  }
  return "unknown";
}

} // namespace braid
