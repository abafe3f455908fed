#include "runtime/train/StopSignal.h"

#include <atomic>
#include <csignal>

#include <signal.h>

namespace braid {
namespace {

// Lock-free, hence safe to touch from a signal handler.
std::atomic<int> gSignal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void onStopSignal(int sig) {
  int expected = 0;
  if (!gSignal.compare_exchange_strong(expected, sig)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

} // namespace

void installStopHandlers() {
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stopSignal() { return gSignal.load(); }

void clearStopSignal() { gSignal.store(0); }

} // namespace braid
