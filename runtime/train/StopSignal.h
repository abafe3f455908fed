// Graceful stop on SIGINT, SIGTERM and SIGHUP: the handler only records the
// signal and acknowledges it on stderr; the training loop notices it
// between steps, finishes cleanly (saving a checkpoint when it can) and
// exits with 128 + the signal number.
#pragma once

namespace braid {

// Routes SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) to
// the recorder. The first one prints "braid-run: <SIG>: saving at the end
// of this step; press Ctrl-C again to abort" (`saving` true) or "...:
// stopping at the end of this step (nothing is saved without --save-dir);
// ..." to stderr. A second signal while a stop is pending restores the
// default action and re-raises it, so a user can still force an exit.
void installStopHandlers(bool saving);
// The signal recorded since start-up or the last clear, or 0.
int stopSignal();
// Forgets a recorded signal.
void clearStopSignal();
// "SIGINT", "SIGTERM", "SIGHUP", or "a signal".
const char *stopSignalName(int sig);

} // namespace braid
