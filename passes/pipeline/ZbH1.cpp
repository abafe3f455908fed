// ZB-H1, the zero-bubble schedule of Qi et al., "Zero Bubble Pipeline
// Parallelism", with the activation memory of 1F1B.
//
// The backward is split in two: B, the input gradient, which the previous
// stage waits for, and W, the weight gradient, which nothing downstream
// waits for. Delaying W lets B reach the previous stage a W earlier at every
// hop, and the delayed W fill the tail that 1F1B leaves idle; with F = B = W
// and M >= P the bubble drops from 1F1B's (P - 1)(F + B + W) to
// (P - 1)(F + B - W).
//
// The order is the one the authors hand-wrote into Megatron-LM's
// non-interleaved 1F1B schedule for ZB-H1 (the ZB-H1 quick start of their
// zero-bubble-pipeline-parallelism repository, sail-sg): 1F1B's warm-up,
// steady state and cool-down, with the backward split only where that
// gains something, so that the other backwards keep Megatron's fused
// input-and-weight backward:
//   - rank 0 never splits: nothing waits for its input gradient;
//   - rank r > 0 splits the first r backwards of the steady state and
//     leaves their W queued, which delays its W by r micro-batches as the
//     paper's ZB-H1 picture does (stage r runs F_x, B_{x-P+1+r}, W_{x-P+1});
//   - the rest of the steady state runs whole backwards (BW), but its last
//     backward and every cool-down backward is a B, each followed by the
//     oldest queued W when that leaves r queued;
//   - the W still queued run at the end, oldest first.
// The queued W keep at most r micro-batches alive on rank r beyond the
// P - r of 1F1B, so no rank holds more than P and rank 0 holds P, as in
// 1F1B.
#include <algorithm>
#include <deque>

#include "passes/pipeline/Generators.h"

namespace braid::pipeline {

std::vector<Entry> zbH1Order(int64_t rank, int64_t ranks, int64_t mbs) {
  const int64_t warmup = std::min(ranks - rank - 1, mbs);
  const int64_t steady = mbs - warmup;
  std::vector<Entry> order;
  std::deque<int64_t> pendingW; // micro-batches whose B ran, W not yet
  auto splitBackward = [&](int64_t mb) {
    order.push_back(Entry::b(mb, 0));
    pendingW.push_back(mb);
  };
  auto oldestW = [&] {
    order.push_back(Entry::w(pendingW.front(), 0));
    pendingW.pop_front();
  };

  for (int64_t mb = 0; mb < warmup; ++mb)
    order.push_back(Entry::f(mb, 0));
  for (int64_t i = 0; i < steady; ++i) {
    const bool last = i == steady - 1;
    order.push_back(Entry::f(warmup + i, 0));
    if (rank > 0 && (i < rank || last))
      splitBackward(i);
    else
      order.push_back(Entry::bw(i, 0));
    if (last && rank > 0 && i >= rank)
      oldestW();
  }
  for (int64_t i = 0; i < warmup; ++i) {
    const int64_t mb = steady + i;
    if (rank == 0) {
      order.push_back(Entry::bw(mb, 0));
      continue;
    }
    splitBackward(mb);
    if (mb >= rank)
      oldestW();
  }
  while (!pendingW.empty())
    oldestW();
  return order;
}

} // namespace braid::pipeline
