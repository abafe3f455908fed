#!/usr/bin/env bash
# The recompute benchmark: test/bench/specs/cpu-medium.pbtxt on one rank,
# one row per recompute policy (braidc --recompute, docs/memory.md
# "Recompute"), each policy's step time and planned activation peak
# against no recompute, side by side in one run. The peak is braidc's
# --report-memory figure, which the arena's checks hold the runtime to;
# the step time is the median step of each run after three warm-up steps,
# then the median over R rounds (the policies run in turn in each round).
# The policy "auto" runs recompute auto (docs/memory.md, "Recompute under
# a budget") under a budget halfway between none's arena and full's.
# "offload" offloads every layer's saved activations (braidc
# --offload=activations; docs/memory.md "Activation offload") without
# recompute, and "P+offload" with recompute P; "optimizer" keeps the
# masters and moments on the host with AdamW there (--offload=optimizer;
# docs/memory.md "Optimizer offload"), and "+optimizer" adds it to a row.
# Offloading rows add the host arena.
#
#   test/bench/run_recompute_bench.sh [--steps N] [--rounds R]
#                                     [--threads T] [--fusion LIST]
#                                     [--policies "none full ..."]
#                                     [--out DIR]
#
# Needs a build (scripts/build.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
steps=12
rounds=3
threads=2
fusion=all
policies="none selective norm activation norm,activation block-4 uniform-2 full auto offload selective+offload full+offload optimizer full+offload+optimizer"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --fusion) fusion="$2"; shift 2 ;;
    --policies) policies="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "run_recompute_bench.sh: unknown option '$1' (use --steps N, --rounds R, --threads T, --fusion LIST, --policies \"...\", --out DIR)" >&2; exit 2 ;;
  esac
done
case " $policies " in
  *" none "*) ;;
  *) policies="none $policies" ;;
esac
# auto's budget comes from full's arena.
case " $policies " in
  *" auto "*) case " $policies " in *" full "*) ;; *) policies="$policies full" ;; esac
    policies="$(echo " $policies " | sed -e 's/ auto / /') auto" ;;
esac
[ -n "$out" ] || out="$build/bench/recompute"
[ -x "$build/bin/braidc" ] || {
  echo "run_recompute_bench.sh: no $build/bin/braidc; build first (scripts/build.sh)" >&2; exit 1; }
data="${BRAID_DATA_DIR:-$root/../shared/data}/tinyshakespeare.txt"
spec="$root/test/bench/specs/cpu-medium.pbtxt"
mkdir -p "$out"
name() { echo "$1" | tr ',|' '+_'; }
arena() { grep -o '^  arena *[0-9]*' "$out/$1.report" | grep -o '[0-9]*$'; }
for p in $policies; do
  n=$(name "$p")
  budget=()
  # P, P+offload, P+optimizer, P+offload+optimizer; P may be left out.
  recompute=none
  targets=()
  for part in $(echo "$p" | tr '+' ' '); do
    case "$part" in
      offload) targets+=(activations) ;;
      optimizer) targets+=(optimizer) ;;
      *) recompute="$part" ;;
    esac
  done
  offload=$(IFS=';'; echo "${targets[*]:-none}")
  if [ "$p" = auto ]; then
    gib=$(python3 -c "import sys; print((int(sys.argv[1]) + int(sys.argv[2])) / 2 / 2**30)" "$(arena none)" "$(arena full)")
    budget=(--memory-budget-gb="$gib")
  fi
  "$build/bin/braidc" "$spec" --fusion="$fusion" --recompute="$recompute" \
    --offload="$offload" "${budget[@]}" \
    --report-memory -o "$out/$n.plan" > "$out/$n.report" 2>&1 || {
    cat "$out/$n.report" >&2; exit 1; }
done
for r in $(seq 1 "$rounds"); do
  for p in $policies; do
    n=$(name "$p")
    "$build/bin/braid-run" "$out/$n.plan" --data "$data" --steps "$steps" \
      --threads "$threads" --quiet --log "$out/$n.$r.jsonl"
  done
done
python3 - "$out" "$rounds" "$fusion" $(for p in $policies; do echo "$p:$(name "$p")"; done) <<'PY'
import json, re, statistics, sys
out, rounds, fusion = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = []
for arg in sys.argv[4:]:
    policy, n = arg.split(":", 1)
    report = open(f"{out}/{n}.report").read()
    peak = int(re.search(r"activations \(peak\)\s+(\d+) bytes", report).group(1))
    arena = int(re.search(r"\n\s*arena\s+(\d+) bytes", report).group(1))
    host = re.search(r"host arena \(offload\)\s+(\d+) bytes", report)
    host = int(host.group(1)) if host else 0
    per_round = []
    for r in range(1, rounds + 1):
        log = [json.loads(l) for l in open(f"{out}/{n}.{r}.jsonl")][3:]
        per_round.append(statistics.median(1.0 / x["tokens_per_s"] for x in log))
    if policy == "auto":
        chosen = re.search(r"\n  recompute\s+(\S+)", report).group(1)
        budget = int(re.search(r"\n  budget\s+(\d+) bytes", report).group(1))
        policy = f"auto {budget / 2**20:.0f} MiB: {chosen}"
    rows.append((policy, statistics.median(per_round), peak, arena, host))
base_time, base_peak, base_arena = rows[0][1], rows[0][2], rows[0][3]
print(f"cpu-medium, one rank, fusion {fusion}, median of {rounds} rounds")
print(f"{'policy':<26} {'step vs none':>12} {'activation peak':>16} {'vs none':>8} {'arena':>11} {'vs none':>8} {'host arena':>11}")
for policy, t, peak, arena, host in rows:
    print(f"{policy:<26} {t / base_time:>11.2f}x {peak / 2**20:>12.1f} MiB {peak / base_peak:>7.2f}x"
          f" {arena / 2**20:>7.1f} MiB {arena / base_arena:>7.2f}x {host / 2**20:>7.1f} MiB")
PY
