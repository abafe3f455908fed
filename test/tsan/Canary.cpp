// braid-tsan-canary: two threads write one int unordered, a race that
// ThreadSanitizer must report. The `tsan` tests run it first
// (run-under-tsan.sh --expect-report): a build that is not instrumented,
// or reports that do not reach their folder, would otherwise pass every
// race check without checking anything.
//
// Both writes happen while both threads are alive, one after the other in
// time through relaxed atomics, which order nothing for ThreadSanitizer.
// When the other thread could finish before the main thread wrote,
// ThreadSanitizer missed the race about once in two hundred runs.
#include <atomic>
#include <thread>

namespace {
int shared = 0;
std::atomic<int> stage{0};

void waitFor(int reached) {
  while (stage.load(std::memory_order_relaxed) < reached)
    std::this_thread::yield();
}
} // namespace

int main() {
  std::thread other([] {
    shared = 1;
    stage.store(1, std::memory_order_relaxed);
    waitFor(2);
  });
  waitFor(1);
  shared = 2;
  stage.store(2, std::memory_order_relaxed);
  other.join();
  return shared == 0 ? 1 : 0;
}
