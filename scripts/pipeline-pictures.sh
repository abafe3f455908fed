#!/usr/bin/env bash
# Draws docs/pipeline/*.svg, one simulated timeline per schedule family, of
# the model in docs/pipeline/timeline.pbtxt, and prints each simulation.
#   scripts/pipeline-pictures.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
braidc="${1:-$root/build}/bin/braidc"
spec="$root/docs/pipeline/timeline.pbtxt"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
draw() { # NAME PARALLEL-FIELDS
  sed "s/^parallel {.*}/parallel { pipeline_parallel: 4 $2 }/" "$spec" > "$tmp/$1.pbtxt"
  echo "== $1"
  "$braidc" "$tmp/$1.pbtxt" --simulate --schedule-svg="$root/docs/pipeline/$1.svg"
}
draw gpipe "pipeline_schedule: GPIPE"
draw 1f1b "pipeline_schedule: ONE_F_ONE_B"
draw interleaved "pipeline_schedule: INTERLEAVED virtual_stages: 2"
draw zb-h1 "pipeline_schedule: ZB_H1"
draw dualpipev "pipeline_schedule: DUALPIPE_V"
