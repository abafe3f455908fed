#!/usr/bin/env bash
# The MoE execution-mode benchmark: test/bench/specs/cpu-moe.pbtxt on one
# rank, dropless (grouped GEMMs over the experts' blocks of rows) against
# capacity mode (one batched GEMM over E equal blocks of slots, padding
# included) at each capacity factor given, and dropless with the router
# and permutations fused (--fusion=moe, braid-fuse-moe) against unfused,
# side by side in one run: the median step time of each against dropless,
# the planned arena and the loss after the last step (a capacity that
# drops trains differently; fused trains bit for bit as unfused).
# The step time is the median step of each run after three warm-up steps,
# then the median over R rounds (the modes run in turn in each round).
#
#   test/bench/run_moe_bench.sh [--steps N] [--rounds R] [--threads T]
#                               [--factors "1 1.25 2 16"] [--out DIR]
#
# Needs a build (scripts/build.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
steps=12
rounds=3
threads=2
factors="1 1.25 2 16"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --factors) factors="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "run_moe_bench.sh: unknown option '$1' (use --steps N, --rounds R, --threads T, --factors \"...\", --out DIR)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$build/bench/moe"
[ -x "$build/bin/braidc" ] || {
  echo "run_moe_bench.sh: no $build/bin/braidc; build first (scripts/build.sh)" >&2; exit 1; }
data="${BRAID_DATA_DIR:-$root/../shared/data}/tinyshakespeare.txt"
spec="$root/test/bench/specs/cpu-moe.pbtxt"
mkdir -p "$out"
modes="dropless fused"
for f in $factors; do modes="$modes capacity-$f"; done
for m in $modes; do
  s="$out/$m.pbtxt"
  fusion=none
  case "$m" in
    dropless) cp "$spec" "$s" ;;
    fused) cp "$spec" "$s"; fusion=moe ;;
    capacity-*) sed -e "s/^    aux_loss_coeff:/    capacity_factor: ${m#capacity-}\n    aux_loss_coeff:/" "$spec" > "$s" ;;
  esac
  "$build/bin/braidc" "$s" --fusion="$fusion" --report-memory -o "$out/$m.plan" \
    > "$out/$m.report" 2>&1 || { cat "$out/$m.report" >&2; exit 1; }
done
for r in $(seq 1 "$rounds"); do
  for m in $modes; do
    "$build/bin/braid-run" "$out/$m.plan" --data "$data" --steps "$steps" \
      --threads "$threads" --quiet --log "$out/$m.$r.jsonl"
  done
done
python3 - "$out" "$rounds" $modes <<'PY'
import json, re, statistics, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = []
for m in modes:
    report = open(f"{out}/{m}.report").read()
    arena = int(re.search(r"\n\s*arena\s+(\d+) bytes", report).group(1))
    per_round, last = [], None
    for r in range(1, rounds + 1):
        log = [json.loads(l) for l in open(f"{out}/{m}.{r}.jsonl")]
        last = log[-1]["loss"]
        per_round.append(statistics.median(1.0 / x["tokens_per_s"] for x in log[3:]))
    rows.append((m, statistics.median(per_round), arena, last))
base_time, base_arena = rows[0][1], rows[0][2]
print(f"cpu-moe, one rank, median of {rounds} rounds")
print(f"{'mode':<16} {'GEMMs':<8} {'step vs dropless':>16} {'arena':>11} {'vs dropless':>11} {'last loss':>10}")
for m, t, arena, last in rows:
    gemm = "batched" if m.startswith("capacity") else "grouped"
    print(f"{m:<16} {gemm:<8} {t / base_time:>15.2f}x {arena / 2**20:>7.1f} MiB {arena / base_arena:>10.2f}x {last:>10.4f}")
PY
