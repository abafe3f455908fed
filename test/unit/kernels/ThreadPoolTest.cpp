// ThreadPool: partition, determinism, re-entrancy and the thread count.
#include "kernels/cpu/ThreadPool.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace braid {
namespace {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

Chunks chunksOf(ThreadPool &pool, int64_t n, int64_t grain) {
  std::mutex mu;
  Chunks out;
  pool.parallelFor(n, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    out.emplace_back(b, e);
  });
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ThreadPool, PartitionCoversRangeWithAtLeastGrainPerChunk) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  for (int64_t n : {1, 3, 7, 100, 1001})
    for (int64_t grain : {1, 2, 10, 300}) {
      Chunks c = chunksOf(pool, n, grain);
      ASSERT_FALSE(c.empty());
      EXPECT_LE(static_cast<int>(c.size()), pool.size());
      EXPECT_EQ(static_cast<int>(c.size()), pool.numChunks(n, grain));
      int64_t next = 0;
      for (auto [b, e] : c) {
        EXPECT_EQ(b, next);
        EXPECT_TRUE(e - b >= grain || c.size() == 1) << n << " " << grain;
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  EXPECT_TRUE(chunksOf(pool, 0, 1).empty());
}

TEST(ThreadPool, PartitionDependsOnlyOnSizes) {
  ThreadPool pool(3);
  const Chunks first = chunksOf(pool, 1000, 7);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(chunksOf(pool, 1000, 7), first);
  // The inline path (nested call) uses the same partition.
  Chunks nested;
  pool.parallelFor(1, 1,
                   [&](int64_t, int64_t) { nested = chunksOf(pool, 1000, 7); });
  EXPECT_EQ(nested, first);
}

TEST(ThreadPool, UsesWorkerThreads) {
  ThreadPool pool(3);
  std::mutex mu;
  std::vector<std::thread::id> ids;
  pool.parallelFor(3, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    ids.push_back(std::this_thread::get_id());
  });
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()) - ids.begin(), 3);
}

TEST(ThreadPool, SizeOneRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  const auto self = std::this_thread::get_id();
  int calls = 0;
  pool.parallelFor(100, 1, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), self);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, NestedAndConcurrentCallsComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallelFor(6, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallelFor(10, 1,
                       [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 60);

  total = 0;
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        pool.parallelFor(50, 1, [&](int64_t b, int64_t e) { total += e - b; });
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(total.load(), 4 * 200 * 50);
}

TEST(ThreadPool, ManyShortJobs) {
  ThreadPool pool(4);
  std::vector<int64_t> out(64);
  for (int round = 0; round < 2000; ++round) {
    pool.parallelFor(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        out[i] += i;
    });
  }
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(out[i], 2000 * i);
}

TEST(ThreadPool, DefaultThreadCountReadsTheEnvironment) {
  const char *old = std::getenv("BRAID_NUM_THREADS");
  const std::string saved = old ? old : "";
  setenv("BRAID_NUM_THREADS", "3", 1);
  EXPECT_EQ(ThreadPool::defaultThreadCount(), 3);
  const int hw = std::max(1u, std::thread::hardware_concurrency());
  for (const char *bad : {"0", "-2", "abc", "4x", "", "100000"}) {
    setenv("BRAID_NUM_THREADS", bad, 1);
    EXPECT_EQ(ThreadPool::defaultThreadCount(), hw) << bad;
  }
  unsetenv("BRAID_NUM_THREADS");
  EXPECT_EQ(ThreadPool::defaultThreadCount(), hw);
  if (old)
    setenv("BRAID_NUM_THREADS", saved.c_str(), 1);
}

} // namespace
} // namespace braid
