#!/usr/bin/env bash
# The tensor-parallel overlap benchmark, 2 ranks at TP 2 on the CPU under
# mpirun, on test/bench/specs/cpu-small.pbtxt. The TP sums go over an
# emulated link (braid-run --emulate-link, runtime/comm/EmulatedLink.h)
# whose bandwidth is chosen so that they take about half the compute time
# of a step, a third of the serial step (or as given). Side by side in one
# run it measures:
#   - TP 2 with no link delay (compute only);
#   - TP 2 over the link without and with tp_comm_overlap (each row-parallel
#     GEMM and its sum in pieces, backward sums behind the weight
#     gradients): the step time of each, the communication fraction of the
#     serial step and the share of the communication hidden.
# With --sequence-parallel all three runs are sequence parallel, and the
# overlap is the rings: each all-gather along the sequence beside the GEMMs
# that read it, each reduce-scatter beside the GEMMs that make it, each
# re-gather for a weight gradient passed round ahead of it. --chunks sets
# tp_comm_chunks (default: the spec's, 4 pieces per GEMM or 2 per block).
# With --pairs every run takes two micro-batches of 8 per step (global
# batch 16), and a fourth run adds tp_comm_pair_micro_batches to the
# overlap: the two micro-batches run interleaved, one's TP communication
# beside the other's compute.
#
#   test/bench/run_tp_overlap_bench.sh [--steps N] [--rounds R]
#                                      [--latency-us L] [--gbps B]
#                                      [--chunks K] [--sequence-parallel]
#                                      [--pairs] [--out DIR]
#
# Step times on a shared 2-core machine vary by 10 to 20% from run to run:
# the runs are made in turn, R rounds of each (default 3), and each figure
# is the median of its rounds' median steps.
#
# Needs a build with MPI (scripts/build.sh; Open MPI from install-deps.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
steps=20
rounds=3
latency=10
gbps=""
chunks=""
sp=false
pairs=false
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sequence-parallel) sp=true; shift ;;
    --pairs) pairs=true; shift ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --latency-us) latency="$2"; shift 2 ;;
    --gbps) gbps="$2"; shift 2 ;;
    --chunks) chunks="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "run_tp_overlap_bench.sh: unknown option '$1' (use --steps N, --rounds R, --latency-us L, --gbps B, --chunks K, --sequence-parallel, --pairs, --out DIR)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$build/bench/tp-overlap$([ "$sp" = true ] && echo -sp)$([ "$pairs" = true ] && echo -pairs)"
command -v mpirun >/dev/null || {
  echo "run_tp_overlap_bench.sh: no mpirun; run scripts/install-deps.sh" >&2; exit 1; }
[ -x "$build/bin/braidc" ] || {
  echo "run_tp_overlap_bench.sh: no $build/bin/braidc; build first (scripts/build.sh)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
data="${BRAID_DATA_DIR:-$root/../shared/data}/tinyshakespeare.txt"
mkdir -p "$out"
spec="$root/test/bench/specs/cpu-small.pbtxt"
batch=8
[ "$pairs" = true ] && batch=16
sed -e "s/tensor_parallel: 1/tensor_parallel: 2 sequence_parallel: $sp/" \
  -e "s/global_batch_size: 8/global_batch_size: $batch/" "$spec" > "$out/serial.pbtxt"
sed -e "s/sequence_parallel: $sp/& tp_comm_overlap: true${chunks:+ tp_comm_chunks: $chunks}/" \
  "$out/serial.pbtxt" > "$out/overlapped.pbtxt"
plans=(serial overlapped)
if [ "$pairs" = true ]; then
  sed -e "s/tp_comm_overlap: true/& tp_comm_pair_micro_batches: true/" \
    "$out/overlapped.pbtxt" > "$out/paired.pbtxt"
  plans+=(paired)
fi
for p in "${plans[@]}"; do
  "$build/bin/braidc" "$out/$p.pbtxt" -o "$out/$p.plan" 2>/dev/null
done

mpi=(mpirun --oversubscribe --bind-to none -x BRAID_NUM_THREADS=1 -np 2)
train() { # NAME PLAN
  "${mpi[@]}" "$build/bin/braid-run" "$2" --data "$data" --steps "$steps" \
    --threads 1 --quiet --log "$out/$1.jsonl" ${link:+--emulate-link "$link"}
}
# Median step seconds over the steps after the first three, then the
# median over the rounds NAME.1 .. NAME.R.
step_time() {
  python3 - "$out" "$1" "$rounds" "$batch" <<'PY'
import json, statistics, sys
out, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
tokens = int(sys.argv[4]) * 128
per_round = []
for r in range(1, rounds + 1):
    rows = [json.loads(l) for l in open(f"{out}/{name}.{r}.jsonl")][3:]
    per_round.append(statistics.median(tokens / x["tokens_per_s"] for x in rows))
print(statistics.median(per_round))
PY
}
# The bytes the link carries per step: each TP collective of the step
# program (between 2 ranks an all-reduce sends its buffer once, an
# all-gather its part, a reduce-scatter the part it keeps), and the loss's
# gather.
bytes=$("$build/bin/braidc" "$out/serial.pbtxt" --emit=mlir -o - 2>/dev/null | python3 -c '
import re, sys
total = 0
times = 1  # inside a sched.repeat (the micro-batches), its count
for line in sys.stdin:
    r = re.search(r"sched.repeat ([0-9]+) \{", line)
    if r:
        times = int(r.group(1))
    elif re.match(r"^    \}", line):
        times = 1
    m = re.search(r"sched.collective (all_reduce_sum|all_gather|reduce_scatter_sum) tp\(%\S+ : memref<([0-9x]+)xf32>", line)
    if m:
        n = 1
        for d in m.group(2).split("x"):
            n *= int(d)
        total += times * 4 * n // (2 if m.group(1) == "reduce_scatter_sum" else 1)
print(total)')
if [ -z "$gbps" ]; then
  # Aim the sums at half the compute step, from one run without the link.
  link="" train probe.1 "$out/serial.plan"
  probe=$(rounds=1 step_time probe)
  gbps=$(python3 -c "print(max(0.001, $bytes / ($probe / 2) / 1e9))")
fi
for r in $(seq 1 "$rounds"); do
  link="" train "compute.$r" "$out/serial.plan"
  link="$latency:$gbps" train "serial.$r" "$out/serial.plan"
  link="$latency:$gbps" train "overlapped.$r" "$out/overlapped.plan"
  if [ "$pairs" = true ]; then
    link="$latency:$gbps" train "paired.$r" "$out/paired.plan"
  fi
done
compute=$(step_time compute)

python3 - "$latency" "$gbps" "$bytes" "${chunks:-$([ "$sp" = true ] && echo 2 || echo 4)}" "$compute" \
  "$(step_time serial)" "$(step_time overlapped)" "$sp" "$batch" \
  "$([ "$pairs" = true ] && step_time paired)" <<'PY'
import sys
latency, gbps, nbytes, chunks = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
compute, serial, overlapped = (float(x) for x in sys.argv[5:8])
sp = sys.argv[8] == "true"
batch = int(sys.argv[9])
paired = float(sys.argv[10]) if sys.argv[10] else None
comm = serial - compute
print(f"link: {latency} us, {gbps:.3g} GB/s; TP traffic {nbytes / 2**20:.1f} MiB per step; "
      + (f"sequence parallel, rings of one shift per block in {chunks} pieces" if sp
         else f"{chunks} pieces per GEMM")
      + f"; {batch // 8} micro-batch{'es' if batch > 8 else ''} of 8 per step")
print(f"step time  TP 2, no link:  {compute*1e3:8.1f} ms  (compute only)")
print(f"           TP 2, serial:   {serial*1e3:8.1f} ms  ({serial/compute:.2f}x compute)")
print(f"           TP 2, overlap:  {overlapped*1e3:8.1f} ms  ({overlapped/compute:.2f}x compute)")
if paired is not None:
    print(f"           TP 2, paired:   {paired*1e3:8.1f} ms  ({paired/compute:.2f}x compute)")
print(f"communication fraction of the serial step: {comm/serial:.0%}")
def hidden(t):
    return (serial - t) / comm if comm > 0 else 0
print(f"share of TP communication hidden by overlap: {hidden(overlapped):.0%}")
if paired is not None:
    print(f"share of TP communication hidden by overlap with paired micro-batches: {hidden(paired):.0%}")
    if paired < compute:
        print("  (above 100%: the compute-only run still holds its sums on stream 0, where each waits"
              " for the other rank; paired, stream 0 waits only where it reads a sum)")
print(f"overlapped vs serial step: {overlapped/serial:.2f}x"
      + (f"; paired vs serial: {paired/serial:.2f}x" if paired is not None else ""))
PY
