#!/usr/bin/env bash
# braidc's compile time against depth: llama-tiny (models/llama-tiny.pbtxt)
# with 100, 500 and 2000 layers, each compiled to a plan by build/bin/braidc,
# best of R rounds (default 1). Prints layers, seconds, seconds per layer,
# and the time per layer of the deepest spec over that of the shallowest:
# near 1 when compile time grows linearly with depth, near the ratio of the
# depths (20 by default) if it grew with the square (docs/benchmarks.md).
#
#   test/bench/compile_time.sh [--layers "100 500 2000"] [--rounds R] [--fusion LIST]
#
# Needs a build (scripts/build.sh); BRAID_BUILD_DIR picks another one.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
layers="100 500 2000"
rounds=1
fusion=none
while [ $# -gt 0 ]; do
  case "$1" in
    --layers) layers="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --fusion) fusion="$2"; shift 2 ;;
    *) echo "compile_time.sh: unknown option '$1' (use --layers LIST, --rounds R, --fusion LIST)" >&2; exit 2 ;;
  esac
done
braidc="$build/bin/braidc"
[ -x "$braidc" ] || {
  echo "compile_time.sh: no $braidc; build first (scripts/build.sh)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

printf '%8s %10s %16s\n' layers seconds "seconds/layer"
first="" last=""
for n in $layers; do
  sed "s/num_layers: 2/num_layers: $n/" "$root/models/llama-tiny.pbtxt" > "$work/llama-$n.pbtxt"
  best=""
  for _ in $(seq 1 "$rounds"); do
    start=$(date +%s%N)
    "$braidc" "$work/llama-$n.pbtxt" --fusion="$fusion" -o "$work/llama-$n.plan" 2>/dev/null
    end=$(date +%s%N)
    s=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (a == "" || b < a) ? b : a }')
  done
  per=$(awk -v s="$best" -v n="$n" 'BEGIN { printf "%.6f", s / n }')
  printf '%8d %10.3f %16.6f\n' "$n" "$best" "$per"
  [ -n "$first" ] || first="$n $per"
  last="$n $per"
done
set -- $first $last
awk -v a="$1" -v pa="$2" -v b="$3" -v pb="$4" \
  'BEGIN { printf "time per layer at %d over %d layers: %.2f\n", b, a, pb / pa }'
