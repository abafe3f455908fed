#!/bin/sh
# Runs a command whose Braid processes were built with ThreadSanitizer
# (BRAID_SANITIZE=thread) and fails when any of them reported a race.
#
#   run-under-tsan.sh [--expect-report TEXT] DIR COMMAND...
#
# Every process writes its reports to DIR/report.PID instead of stderr,
# so that a report still fails the run when the process is then killed (a
# fault test's MPI_Abort), when a test expects its exit status to be
# non-zero, or when a lit test pipes its stderr into FileCheck. Open MPI
# is not instrumented; openmpi.supp beside this script says what of it
# ThreadSanitizer is told to ignore, and why.
#
# --expect-report inverts the verdict: a canary passes when a report
# mentions TEXT, proving that the build is instrumented, that reports
# reach DIR and that ThreadSanitizer sees the accesses TEXT names.
set -u
expect=""
if [ "${1:-}" = "--expect-report" ]; then
  expect="$2"
  shift 2
fi
dir="$1"
shift
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
# Absolute: each process resolves log_path from its own working directory.
dir="$(cd "$dir" && pwd)"
# atexit_sleep_ms=0: ThreadSanitizer's default second of sleep before a
# process exits only slows the many short processes here.
TSAN_OPTIONS="suppressions=$here/openmpi.supp log_path=$dir/report history_size=4 atexit_sleep_ms=0 ${TSAN_OPTIONS:-}"
export TSAN_OPTIONS
"$@"
status=$?
reports=$(find "$dir" -name 'report.*' | sort)
if [ -n "$expect" ]; then
  if [ -n "$reports" ] && grep -q -F -- "$expect" $reports; then
    echo "run-under-tsan: ThreadSanitizer reported the canary's race ($expect), as it should"
    exit 0
  fi
  echo "run-under-tsan: no ThreadSanitizer report mentions '$expect': is the build instrumented?"
  for r in $reports; do
    echo "=== $r"
    cat "$r"
  done
  exit 1
fi
if [ -n "$reports" ]; then
  for r in $reports; do
    echo "=== $r"
    cat "$r"
  done
  echo "run-under-tsan: ThreadSanitizer reported in $(echo "$reports" | wc -l) process(es); reports above and in $dir"
  exit 1
fi
echo "run-under-tsan: no ThreadSanitizer report (exit status $status)"
exit "$status"
