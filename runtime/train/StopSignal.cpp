#include "runtime/train/StopSignal.h"

#include <atomic>
#include <initializer_list>
#include <csignal>
#include <cstring>

#include <signal.h>
#include <unistd.h>

namespace braid {
namespace {

// Lock-free, hence safe to touch from a signal handler.
std::atomic<int> gSignal{0};
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<bool> gSaving{false};

// write(2) only: the handler may run in the middle of any library call.
void say(const char *text) {
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void onStopSignal(int sig) {
  int expected = 0;
  if (!gSignal.compare_exchange_strong(expected, sig)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  say("\nbraid-run: ");
  say(stopSignalName(sig));
  say(gSaving.load() ? ": saving at the end of this step; "
                     : ": stopping at the end of this step (nothing is "
                       "saved without --save-dir); ");
  say(sig == SIGINT ? "press Ctrl-C again to abort\n"
                    : "send it again to abort\n");
}

} // namespace

const char *stopSignalName(int sig) {
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP";
  default:
    return "a signal";
  }
}

void installStopHandlers(bool saving) {
  gSaving.store(saving);
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaction(sig, &action, nullptr);
}

int stopSignal() { return gSignal.load(); }

void clearStopSignal() { gSignal.store(0); }

} // namespace braid
