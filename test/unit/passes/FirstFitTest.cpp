// FirstFitPlacer against the quadratic scan it replaces, on random buffers.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "passes/analysis/FirstFit.h"

namespace braid {
namespace {

struct Buffer {
  int64_t begin, end, size;
};

bool overlap(const Buffer &a, const Buffer &b) {
  return a.begin <= b.end && b.begin <= a.end;
}

// The memory planner's original placement: gather the placed buffers alive
// at the same time, sort their address intervals and take the first gap.
std::vector<int64_t> scanOffsets(const std::vector<Buffer> &buffers,
                                 const std::vector<size_t> &order) {
  std::vector<int64_t> offsets(buffers.size(), -1);
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (overlap(buffers[i], buffers[j]))
        busy.push_back({offsets[j], offsets[j] + buffers[j].size});
    std::sort(busy.begin(), busy.end());
    int64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + buffers[i].size <= lo)
        break;
      candidate = std::max(candidate, hi);
    }
    offsets[i] = candidate;
    placed.push_back(i);
  }
  return offsets;
}

std::vector<int64_t> placerOffsets(const std::vector<Buffer> &buffers,
                                   const std::vector<size_t> &order,
                                   int64_t numSteps) {
  FirstFitPlacer placer(numSteps);
  std::vector<int64_t> offsets(buffers.size(), -1);
  for (size_t i : order) {
    const Buffer &b = buffers[i];
    offsets[i] = placer.findOffset(b.begin, b.end, b.size);
    placer.place(b.begin, b.end, offsets[i], b.size);
  }
  return offsets;
}

// The planner's order: largest first, earlier first among equals.
std::vector<size_t> largestFirst(const std::vector<Buffer> &buffers) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size)
      return buffers[a].size > buffers[b].size;
    return buffers[a].begin < buffers[b].begin;
  });
  return order;
}

std::vector<Buffer> randomBuffers(std::mt19937_64 &rng, int64_t numSteps) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<Buffer> buffers(uniform(1, 200));
  // Few distinct sizes, as in a model's repeated layers, so that ties,
  // touching intervals and exact fits are common.
  std::vector<int64_t> sizes;
  for (int i = uniform(1, 6); i > 0; --i)
    sizes.push_back(64 * uniform(1, 16));
  for (Buffer &b : buffers) {
    b.begin = uniform(0, numSteps - 1);
    // Some buffers live long (saved activations), most briefly.
    int64_t span = uniform(0, 3) == 0 ? numSteps : uniform(0, 4);
    b.end = std::min(numSteps - 1, b.begin + uniform(0, span));
    int64_t pick = uniform(0, 9);
    b.size = pick == 0   ? uniform(1, 5000)
             : pick == 1 ? 0
                         : sizes[uniform(0, sizes.size() - 1)];
  }
  return buffers;
}

TEST(FirstFitTest, MatchesScanInPlannerOrder) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 3000; ++trial) {
    int64_t numSteps = std::uniform_int_distribution<int64_t>(1, 80)(rng);
    std::vector<Buffer> buffers = randomBuffers(rng, numSteps);
    std::vector<size_t> order = largestFirst(buffers);
    ASSERT_EQ(placerOffsets(buffers, order, numSteps),
              scanOffsets(buffers, order))
        << "trial " << trial;
  }
}

// The placer does not depend on the planner's order.
TEST(FirstFitTest, MatchesScanInAnyOrder) {
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 3000; ++trial) {
    int64_t numSteps = std::uniform_int_distribution<int64_t>(1, 80)(rng);
    std::vector<Buffer> buffers = randomBuffers(rng, numSteps);
    std::vector<size_t> order(buffers.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    ASSERT_EQ(placerOffsets(buffers, order, numSteps),
              scanOffsets(buffers, order))
        << "trial " << trial;
  }
}

TEST(FirstFitTest, GapsAndTouchingIntervals) {
  FirstFitPlacer placer(10);
  placer.place(0, 9, 0, 64);
  placer.place(0, 9, 128, 64);
  placer.place(2, 3, 64, 64);
  // The gap at 64 is free outside steps 2-3 only.
  EXPECT_EQ(placer.findOffset(0, 1, 64), 64);
  EXPECT_EQ(placer.findOffset(1, 2, 64), 192);
  EXPECT_EQ(placer.findOffset(4, 9, 64), 64);
  // Too large for the gap.
  EXPECT_EQ(placer.findOffset(0, 1, 65), 192);
  // Empty buffers go to 0.
  EXPECT_EQ(placer.findOffset(0, 9, 0), 0);
}

} // namespace
} // namespace braid
