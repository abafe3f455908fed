#!/usr/bin/env bash
# One braid-run of the GPU benchmark (test/bench/gpu/run.sh), on uint16 tokens:
#
#   braid_step.sh BRAID_RUN PLAN DATA on|off [braid-run flags...]
#
# on|off is --cuda-graphs. A braid-run that does not know --cuda-graphs
# (exit 2 naming the flag) is run again without it.
set -uo pipefail
if [ $# -lt 4 ]; then
  echo "usage: braid_step.sh BRAID_RUN PLAN DATA on|off [braid-run flags...]" >&2
  exit 2
fi
bin="$1" plan="$2" data="$3" graphs="$4"
shift 4
seen="$(mktemp)"
trap 'rm -f "$seen"' EXIT
echo "+ $bin $plan --device=cuda --cuda-graphs=$graphs --data $data --data-format uint16 $*"
"$bin" "$plan" --device=cuda --cuda-graphs="$graphs" --data "$data" --data-format uint16 "$@" \
  2>&1 | tee "$seen"
rc="${PIPESTATUS[0]}"
if [ "$rc" -eq 2 ] && grep -q -- "--cuda-graphs" "$seen"; then
  echo "+ (this braid-run has no --cuda-graphs; again without it)"
  "$bin" "$plan" --device=cuda --data "$data" --data-format uint16 "$@" 2>&1
  rc=$?
fi
exit "$rc"
