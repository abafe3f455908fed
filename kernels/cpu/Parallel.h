// How a kernel's run function spreads its work over the launch's pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/ThreadPool.h"

namespace braid::cpu {

// Calls fn(begin, end) over a partition of [0, n) (see
// ThreadPool::parallelFor); without a pool, once over all of it. Kernels
// only use partitions whose results do not depend on the chunk bounds, so
// they give the same bits for every thread count.
template <typename F>
void parallelFor(ThreadPool *pool, int64_t n, int64_t grain, const F &fn) {
  if (n <= 0)
    return;
  if (!pool || pool->size() == 1) {
    fn(int64_t{0}, n);
    return;
  }
  // A one-pointer capture fits std::function's inline buffer: no allocation.
  pool->parallelFor(n, grain, [&fn](int64_t b, int64_t e) { fn(b, e); });
}

// A grain of rows that gives each chunk about `elements` floats of work.
inline int64_t rowGrain(int64_t rowLength, int64_t elements = 16384) {
  return rowLength <= 0 ? 1 : (elements + rowLength - 1) / rowLength;
}

// A per-thread buffer of at least n floats, reused across launches so that
// hot loops do not allocate. `slot` (0 to 3) tells apart the buffers one
// chunk needs at the same time. Contents are unspecified on return.
inline float *threadScratch(int slot, size_t n) {
  thread_local std::vector<float> buffers[4];
  std::vector<float> &b = buffers[slot];
  if (b.size() < n)
    b.resize(n);
  return b.data();
}

} // namespace braid::cpu
