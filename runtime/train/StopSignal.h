// Graceful stop on SIGINT / SIGTERM: the handler only records the signal;
// the training loop notices it between steps, finishes cleanly (saving a
// checkpoint when it can) and exits with 128 + the signal number.
#pragma once

namespace braid {

// Routes SIGINT and SIGTERM to the recorder. A second signal of either kind
// while a stop is pending restores the default action and re-raises it, so
// a user can still force an exit.
void installStopHandlers();
// The signal recorded since start-up or the last clear, or 0.
int stopSignal();
// Forgets a recorded signal.
void clearStopSignal();

} // namespace braid
