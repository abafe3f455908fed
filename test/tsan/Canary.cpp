// braid-tsan-canary: two threads write one int unordered, a race that
// ThreadSanitizer must report. The `tsan` tests run it first
// (run-under-tsan.sh --expect-report): a build that is not instrumented,
// or reports that do not reach their folder, would otherwise pass every
// race check without checking anything.
#include <thread>

namespace {
int shared = 0;
} // namespace

int main() {
  std::thread other([] { shared = 1; });
  shared = 2;
  other.join();
  return shared == 0 ? 1 : 0;
}
