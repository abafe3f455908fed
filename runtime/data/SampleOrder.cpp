#include "runtime/data/SampleOrder.h"

#include <numeric>
#include <utility>

#include "kernels/common/Random.h"

namespace braid {

SampleOrder::SampleOrder(int64_t numWindows, uint64_t seed, bool shuffle)
    : numWindows_(numWindows), seed_(seed), shuffle_(shuffle) {}

std::vector<int64_t> SampleOrder::permutation(int64_t numWindows, uint64_t seed,
                                              int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(numWindows));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  const uint64_t key = rng::shuffleKey(seed, epoch);
  uint64_t n = 0;
  for (int64_t k = numWindows - 1; k >= 1; --k) {
    uint64_t r = rng::draw(key, n++) % static_cast<uint64_t>(k + 1);
    std::swap(perm[k], perm[r]);
  }
  return perm;
}

int64_t SampleOrder::window(int64_t sample) {
  const int64_t index = sample % numWindows_;
  if (!shuffle_)
    return index;
  const int64_t epoch = sample / numWindows_;
  if (epoch != cachedEpoch_) {
    perm_ = permutation(numWindows_, seed_, epoch);
    cachedEpoch_ = epoch;
  }
  return perm_[index];
}

} // namespace braid
