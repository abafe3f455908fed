// DualPipeV, DeepSeek's V-shaped DualPipe (the DualPipeV class of the
// DualPipe repository): each of the P ranks holds two stages, chunk 0 =
// stage r on the way down and chunk 1 = stage 2P - 1 - r on the way back,
// so that rank P - 1 turns a micro-batch around in memory and rank 0 holds
// both the embedding and the loss. Every micro-batch runs through both
// chunks; the schedule numbers the micro-batches per chunk, in the order
// each chunk meets them, as the reference does.
//
// Its steady state pairs a forward of one chunk with the backward of the
// other (FB), which the runtime overlaps so that one's communication hides
// behind the other's compute. Around it, some backwards are split into B
// and a later W (the reference's zero-bubble path, its weight gradients
// queued and run oldest first) to fill what would be bubble.
//
// The eight phases of rank r, as the reference's step() runs them (counts
// for P ranks and M >= 2P micro-batches, which makeSchedule checks):
//   1. 2(P - r - 1) forwards of chunk 0: the V's first arm fills up;
//   2. r + 1 pairs F chunk 0, F chunk 1: chunk 1's first micro-batches
//      come back up the V;
//   3. P - r - 1 times B chunk 1, its W at once, F chunk 1;
//   4. M - 2P + r + 1 times FB (F chunk 0, B chunk 1), FB (F chunk 1,
//      B chunk 0), the main loop; on rank P - 1 the very first pair runs
//      as a plain F and a whole backward, not overlapped (the reference
//      keeps them apart there for a smaller bubble);
//   5. P - r - 1 times a whole backward of chunk 1, FB (F chunk 1,
//      B chunk 0): the forwards of chunk 0 are done;
//   6. r + 1 pairs B chunk 1, B chunk 0, the later half of them split (on
//      even ranks from the middle pair's chunk 0 backward on, on odd ranks
//      from the middle pair's chunk 1 backward on), so that exactly r + 1
//      weight gradients wait at the end of this phase;
//   7. P - r - 1 times the oldest W, B chunk 0 (split);
//   8. r + 1 times the oldest W: the queue is empty.
#include <array>
#include <deque>
#include <utility>

#include "passes/pipeline/Generators.h"

namespace braid::pipeline {
namespace {

// Hands out the next micro-batch per chunk and direction, as the
// reference's per-chunk counters do, and keeps the split backwards' queue.
class DualPipeVBuilder {
public:
  void forward(int64_t chunk) {
    order_.push_back(Entry::f(nextF_[chunk]++, chunk));
  }
  // A whole backward, or (split) a B whose W is queued.
  void backward(int64_t chunk, bool split) {
    const int64_t mb = nextB_[chunk]++;
    if (!split) {
      order_.push_back(Entry::bw(mb, chunk));
      return;
    }
    order_.push_back(Entry::b(mb, chunk));
    pendingW_.push_back({mb, chunk});
  }
  void oldestWeightGrad() {
    const auto [mb, chunk] = pendingW_.front();
    pendingW_.pop_front();
    order_.push_back(Entry::w(mb, chunk));
  }
  // The forward of `fChunk` overlapped with a whole backward of `bChunk`.
  void overlapped(int64_t fChunk, int64_t bChunk) {
    order_.push_back(
        Entry::fb(nextF_[fChunk]++, fChunk, nextB_[bChunk]++, bChunk));
  }
  std::vector<Entry> take() { return std::move(order_); }

private:
  std::vector<Entry> order_;
  std::array<int64_t, 2> nextF_{0, 0}, nextB_{0, 0};
  std::deque<std::pair<int64_t, int64_t>> pendingW_; // (mb, chunk)
};

} // namespace

std::vector<Entry> dualPipeVOrder(int64_t rank, int64_t ranks, int64_t mbs) {
  const bool lastRank = rank == ranks - 1;
  DualPipeVBuilder s;

  for (int64_t i = 0; i < 2 * (ranks - rank - 1); ++i) // 1
    s.forward(0);
  for (int64_t i = 0; i < rank + 1; ++i) { // 2
    s.forward(0);
    s.forward(1);
  }
  for (int64_t i = 0; i < ranks - rank - 1; ++i) { // 3
    s.backward(1, /*split=*/true);
    s.oldestWeightGrad();
    s.forward(1);
  }
  for (int64_t i = 0; i < mbs - 2 * ranks + rank + 1; ++i) { // 4
    if (i == 0 && lastRank) {
      s.forward(0);
      s.backward(1, /*split=*/false);
    } else {
      s.overlapped(0, 1);
    }
    s.overlapped(1, 0);
  }
  for (int64_t i = 0; i < ranks - rank - 1; ++i) { // 5
    s.backward(1, /*split=*/false);
    s.overlapped(1, 0);
  }
  // 6: the split starts at pair (r + 1) / 2, with its chunk 1 backward on
  // odd ranks and its chunk 0 backward on even ones.
  const int64_t pairs = rank + 1, middle = pairs / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    s.backward(1, i > middle || (i == middle && rank % 2 == 1));
    s.backward(0, i >= middle);
  }
  for (int64_t i = 0; i < ranks - rank - 1; ++i) { // 7
    s.oldestWeightGrad();
    s.backward(0, /*split=*/true);
  }
  for (int64_t i = 0; i < rank + 1; ++i) // 8
    s.oldestWeightGrad();
  return s.take();
}

} // namespace braid::pipeline
