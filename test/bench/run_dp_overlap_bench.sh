#!/usr/bin/env bash
# The data-parallel overlap benchmark, 2 ranks on the CPU under mpirun, on
# test/bench/specs/cpu-small.pbtxt. Shared-memory MPI makes communication
# nearly free, so the collectives go over an emulated link (braid-run
# --emulate-link, runtime/comm/EmulatedLink.h) whose bandwidth is chosen so
# that the gradient all-reduce takes about half the compute time of a step
# (or as given). Side by side in one run it measures:
#   - one rank on one core, and 2 ranks with no link delay (compute only):
#     the data-parallel speed-up in tokens/s;
#   - 2 ranks over the link, the reduction after the backward (serial) and
#     in buckets during it (overlapped, braidc's default): the step time of
#     each against compute only, the share of the communication hidden,
#     and the communication fraction of the serial step.
#
#   test/bench/run_dp_overlap_bench.sh [--steps N] [--latency-us L]
#                                      [--gbps B] [--bucket-mb X]
#                                      [--zero-stage Z] [--out DIR]
#
# Needs a build with MPI (scripts/build.sh; Open MPI from install-deps.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
steps=20
latency=25
gbps=""
bucket=0
zero=0
out="$build/bench/dp-overlap"
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --latency-us) latency="$2"; shift 2 ;;
    --gbps) gbps="$2"; shift 2 ;;
    --bucket-mb) bucket="$2"; shift 2 ;;
    --zero-stage) zero="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "run_dp_overlap_bench.sh: unknown option '$1' (use --steps N, --latency-us L, --gbps B, --bucket-mb X, --zero-stage Z, --out DIR)" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || {
  echo "run_dp_overlap_bench.sh: no mpirun; run scripts/install-deps.sh" >&2; exit 1; }
[ -x "$build/bin/braidc" ] && [ -x "$build/bin/braid-opt" ] || {
  echo "run_dp_overlap_bench.sh: no $build/bin/braidc; build first (scripts/build.sh)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
data="${BRAID_DATA_DIR:-$root/../shared/data}/tinyshakespeare.txt"
mkdir -p "$out"
spec="$root/test/bench/specs/cpu-small.pbtxt"
# The same global batch of 16 sequences: one rank accumulates 2
# micro-batches, each of 2 ranks trains 1.
sed -e 's/global_batch_size: 8/global_batch_size: 16/' "$spec" > "$out/one.pbtxt"
sed -e 's/data_parallel: 1/data_parallel: 2/' \
    -e "s/^parallel {\(.*\) }/parallel {\1 bucket_mb: $bucket zero_stage: $zero }/" \
    "$out/one.pbtxt" > "$out/dp2.pbtxt"
"$build/bin/braidc" "$out/one.pbtxt" -o "$out/one.plan" 2>/dev/null
"$build/bin/braidc" "$out/dp2.pbtxt" -o "$out/overlapped.plan" 2>/dev/null
"$build/bin/braid-opt" /dev/null --braid-import=spec="$out/dp2.pbtxt" \
  --braid-autodiff --braid-lower-to-sched --braid-plan-memory \
  --braid-emit-plan=output="$out/serial.plan" -o /dev/null

mpi=(mpirun --oversubscribe --bind-to none -x BRAID_NUM_THREADS=1 -np 2)
train() { # NAME PLAN [mpirun and link args]
  local name="$1" plan="$2"; shift 2
  "$@" "$build/bin/braid-run" "$plan" --data "$data" --steps "$steps" \
    --threads 1 --quiet --log "$out/$name.jsonl" ${link:+--emulate-link "$link"}
}
# Median step seconds over the steps after the first three.
step_time() {
  python3 - "$out/$1.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][3:]
tokens = 16 * 128
print(statistics.median(tokens / r["tokens_per_s"] for r in rows))
PY
}
link="" train one "$out/one.plan" env
link="" train compute "$out/overlapped.plan" "${mpi[@]}"
compute=$(step_time compute)
if [ -z "$gbps" ]; then
  # 4-byte gradients; a 2-rank ring all-reduce sends the buffer once per
  # rank. Aim the transfer at half the compute step.
  bytes=$("$build/bin/braidc" "$out/dp2.pbtxt" --report-memory -o /dev/null 2>&1 |
          sed -n 's/^ *gradients *\([0-9]*\) bytes.*/\1/p')
  gbps=$(python3 -c "print(max(0.001, $bytes / ($compute / 2) / 1e9))")
fi
link="$latency:$gbps" train serial "$out/serial.plan" "${mpi[@]}"
link="$latency:$gbps" train overlapped "$out/overlapped.plan" "${mpi[@]}"

python3 - "$latency" "$gbps" "$(step_time one)" "$compute" \
  "$(step_time serial)" "$(step_time overlapped)" <<'PY'
import sys
latency, gbps = sys.argv[1], float(sys.argv[2])
one, compute, serial, overlapped = (float(x) for x in sys.argv[3:7])
comm = serial - compute
print(f"link: {latency} us, {gbps:.3g} GB/s (gradient all-reduce about half the compute step)")
print(f"step time  one rank, 1 core: {one*1e3:8.1f} ms")
print(f"           2 ranks, no link: {compute*1e3:8.1f} ms  (compute only)")
print(f"           2 ranks, serial:  {serial*1e3:8.1f} ms  ({serial/compute:.2f}x compute)")
print(f"           2 ranks, overlap: {overlapped*1e3:8.1f} ms  ({overlapped/compute:.2f}x compute)")
print(f"data-parallel speed-up (tokens/s, 2 ranks over 1): {one/compute:.2f}x")
print(f"communication fraction of the serial step: {comm/serial:.0%}")
hidden = (serial - overlapped) / comm if comm > 0 else 0
print(f"share of communication hidden by overlap: {hidden:.0%}")
print(f"overlapped vs serial step: {overlapped/serial:.2f}x")
PY
