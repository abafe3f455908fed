#include "kernels/cpu/ThreadPool.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace braid {
namespace {

// Set on the pool's own workers: a parallelFor they make runs inline.
thread_local bool tIsWorker = false;

// A few tens of microseconds of polling before sleeping: long enough to
// catch the next launch of a back-to-back kernel sequence, short enough not
// to compete with OpenBLAS for the cores during a GEMM.
constexpr int kSpinIterations = 2000;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

} // namespace

ThreadPool::ThreadPool(int numThreads) : size_(std::max(1, numThreads)) {
  workers_.reserve(size_ - 1);
  for (int i = 1; i < size_; ++i)
    workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

int ThreadPool::numChunks(int64_t n, int64_t grain) const {
  if (n <= 0)
    return 0;
  grain = std::max<int64_t>(1, grain);
  return static_cast<int>(
      std::min<int64_t>(size_, std::max<int64_t>(1, n / grain)));
}

void ThreadPool::runChunk(int c) {
  (*fn_)(chunkBegin(n_, chunks_, c), chunkBegin(n_, chunks_, c + 1));
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)> &fn) {
  const int chunks = numChunks(n, grain);
  if (chunks == 0)
    return;
  bool expected = false;
  if (chunks == 1 || tIsWorker ||
      !busy_.compare_exchange_strong(expected, true,
                                     std::memory_order_acquire)) {
    for (int c = 0; c < chunks; ++c)
      fn(chunkBegin(n, chunks, c), chunkBegin(n, chunks, c + 1));
    return;
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    pending_.store(chunks - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();

  fn(chunkBegin(n, chunks, 0), chunkBegin(n, chunks, 1));

  for (int i = 0;
       i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0;
       ++i)
    cpuRelax();
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(
        lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::workerLoop(int index) {
  tIsWorker = true;
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations &&
                    generation_.load(std::memory_order_acquire) == seen;
         ++i)
      cpuRelax();
    bool participate;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        return stop_ || generation_.load(std::memory_order_relaxed) != seen;
      });
      if (stop_)
        return;
      seen = generation_.load(std::memory_order_relaxed);
      participate = index < chunks_;
    }
    // The dispatcher cannot publish another job before this one's
    // participants finish, so fn_, n_ and chunks_ stay valid here.
    if (!participate)
      continue;
    runChunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_one();
    }
  }
}

int ThreadPool::defaultThreadCount() {
  if (const char *env = std::getenv("BRAID_NUM_THREADS")) {
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(env, &end, 10);
    if (errno == 0 && end != env && *end == '\0' && v >= 1 && v <= 4096)
      return static_cast<int>(v);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

} // namespace braid
