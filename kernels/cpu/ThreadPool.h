// A fixed set of worker threads for the CPU kernels.
//
// Kernels split their rows over the pool with parallelFor. The partition of
// [0, n) depends only on (n, grain, size()), never on timing, so a kernel that
// combines per-chunk results in chunk order is bitwise reproducible for a
// given thread count. OpenBLAS runs its own threads; the pool's workers sleep
// on a condition variable when idle so that they leave the cores to it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace braid {

class ThreadPool {
public:
  // `numThreads` counts the calling thread, so the pool starts
  // numThreads - 1 workers; 1 (or less) means every call runs inline. The
  // pool must outlive every parallelFor made on it.
  explicit ThreadPool(int numThreads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return size_; }

  // Calls fn(begin, end) over a partition of [0, n) into at most size()
  // contiguous chunks of at least `grain` items each (one chunk when n <
  // 2 * grain), and returns when all calls have returned. Chunk c runs on
  // worker c (the caller runs chunk 0). A call made while the pool is busy,
  // from inside fn or concurrently from another thread, runs its chunks
  // inline and in order on the calling thread, with the same partition.
  // fn must not throw.
  void parallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)> &fn);

  // The number of chunks parallelFor(n, grain, ...) uses and the bounds of
  // chunk c; exposed so that callers can size per-chunk scratch.
  int numChunks(int64_t n, int64_t grain) const;
  static int64_t chunkBegin(int64_t n, int chunks, int c) {
    return n * c / chunks;
  }

  // BRAID_NUM_THREADS when it holds an integer in [1, 4096], otherwise the
  // hardware concurrency (at least 1).
  static int defaultThreadCount();

private:
  void workerLoop(int index);
  void runChunk(int c);

  const int size_;
  std::vector<std::thread> workers_;

  // The job being run; written by the dispatching thread under mu_ before
  // generation_ is bumped.
  const std::function<void(int64_t, int64_t)> *fn_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;

  std::mutex mu_;
  std::condition_variable wake_; // workers wait here for a new generation
  std::condition_variable done_; // the dispatcher waits here for workers
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> busy_{false};
  bool stop_ = false;
};

} // namespace braid
