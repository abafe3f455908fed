#!/usr/bin/env bash
# The pipeline benchmark on the CPU under mpirun: models/llama-tiny.pbtxt
# with 8 layers, one thread per rank, at m = 2p micro-batches, PP 2 on 2
# ranks and PP 4 on 4, every schedule family (interleaved with 2 virtual
# stages). The transfers go over the emulated link of the data-parallel
# benchmark (braid-run --emulate-link). Each run is traced (braid-run
# --trace); braidc --simulate --sim-profile then simulates the same
# schedule from the parts' costs measured in that run, with the machine's
# cores shared by the ranks (--sim-cores), and the table holds the
# simulation against the measurement:
#   - the schedule's step time (first part to last), measured and
#     simulated, and the error;
#   - the bubble, the mean over the ranks, measured from the trace's
#     timestamps and simulated;
#   - each schedule's measured step time against 1F1B's;
#   - the step the same measured costs give with a core per rank, which
#     shows what sharing the cores costs each schedule.
#
# The families run in turn, --rounds times (default 3), so that a slower
# spell of a shared machine falls on all of them; each figure is from the
# round whose measured step is the family's median.
#
#   test/bench/run_pipeline_bench.sh [--steps N] [--rounds R] [--link L:B]
#                                    [--pp "2 4"] [--out DIR]
#
# Needs a build with MPI (scripts/build.sh; Open MPI from install-deps.sh).
# Run it on a quiet machine: a build beside it distorts every figure.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
steps=20
rounds=3
link="25:2"
pps="2 4"
out="$build/bench/pipeline"
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --link) link="$2"; shift 2 ;;
    --pp) pps="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "run_pipeline_bench.sh: unknown option '$1' (use --steps N, --rounds R, --link L:B, --pp LIST, --out DIR)" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || {
  echo "run_pipeline_bench.sh: no mpirun; run scripts/install-deps.sh" >&2; exit 1; }
[ -x "$build/bin/braidc" ] && [ -x "$build/bin/braid-run" ] || {
  echo "run_pipeline_bench.sh: no $build/bin/braidc; build first (scripts/build.sh)" >&2; exit 1; }
[ "$steps" -ge 3 ] || { echo "run_pipeline_bench.sh: --steps needs 3 or more" >&2; exit 2; }
[ "$rounds" -ge 1 ] || { echo "run_pipeline_bench.sh: --rounds needs 1 or more" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
data="${BRAID_DATA_DIR:-$root/../shared/data}/tinyshakespeare.txt"
cores=$(nproc)
mkdir -p "$out"
rm -f "$out/results.tsv"

# SCHEDULE VPP -> a spec of llama-tiny, 8 layers, PP $pp, m = 2 pp.
spec() {
  sed -e 's/num_layers: 2/num_layers: 8/' \
      -e "s/global_batch_size: 16/global_batch_size: $((8 * 2 * pp))/" \
      -e "s/pipeline_parallel: 1/pipeline_parallel: $pp virtual_stages: $2 pipeline_schedule: $1/" \
      "$root/models/llama-tiny.pbtxt"
}

families="ONE_F_ONE_B INTERLEAVED ZB_H1 DUALPIPE_V"
name_of() { echo "pp$1-$(echo "$2" | tr 'A-Z_' 'a-z-')"; }
for pp in $pps; do
  for sched in $families; do
    vpp=1
    [ "$sched" = INTERLEAVED ] && vpp=2
    name=$(name_of "$pp" "$sched")
    spec "$sched" "$vpp" > "$out/$name.pbtxt"
    "$build/bin/braidc" "$out/$name.pbtxt" -o "$out/$name.plan" >/dev/null 2>&1
  done
done
for round in $(seq "$rounds"); do
  for pp in $pps; do
    for sched in $families; do
      name=$(name_of "$pp" "$sched")
      run="$out/$name.r$round"
      echo "run_pipeline_bench.sh: round $round: $name ($steps steps on $pp ranks)" >&2
      rm -rf "$run.trace"
      mpirun --oversubscribe --bind-to none -x BRAID_NUM_THREADS=1 -np "$pp" \
        "$build/bin/braid-run" "$out/$name.plan" --data "$data" \
        --steps "$steps" --threads 1 --quiet --emulate-link "$link" \
        --trace "$run.trace"
      "$build/bin/braidc" "$out/$name.pbtxt" --simulate --sim-link "$link" \
        --sim-profile "$run.trace" --sim-cores "$cores" > "$run.sim.txt"
      # The same measured costs with a core per rank: what the schedule
      # would do on a machine that does not share cores.
      "$build/bin/braidc" "$out/$name.pbtxt" --simulate --sim-link "$link" \
        --sim-profile "$run.trace" > "$run.own-cores.txt"
      printf '%s\t%s\t%s\t%s\n' "$pp" "$sched" "$run.sim.txt" \
        "$run.own-cores.txt" >> "$out/results.tsv"
    done
  done
done

python3 - "$out/results.tsv" "$link" "$cores" "$steps" "$rounds" <<'PY'
import re, statistics, sys
def simulated(text):
    return float(re.search(r"step time ([\d.]+) ms \(simulated\)", text).group(1))
def figures(path, own):
    text = open(path).read()
    m = re.search(r"step time ([\d.]+) ms \(simulated\), ([\d.]+) ms measured", text)
    ranks = re.findall(r"^\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)%.*\s([\d.]+)%$", text, re.M)
    return {"sim": float(m.group(1)), "meas": float(m.group(2)),
            "simb": sum(float(a) for a, _ in ranks) / len(ranks),
            "measb": sum(float(b) for _, b in ranks) / len(ranks),
            "own": simulated(open(own).read())}
runs = {}
for pp, sched, path, own in (l.rstrip("\n").split("\t") for l in open(sys.argv[1])):
    runs.setdefault((pp, sched), []).append(figures(path, own))
print(f"pipeline benchmark: llama-tiny, 8 layers, m = 2p, link {sys.argv[2]} "
      f"(L us : GB/s), {sys.argv[3]} cores, {sys.argv[4]} steps (the first left "
      f"out), the median of {sys.argv[5]} rounds")
print(f"{'PP':>2}  {'schedule':<12} {'measured':>9} {'simulated':>9} {'error':>7}"
      f"  {'bubble meas.':>12} {'sim.':>6}  {'vs 1F1B':>7}  {'own cores':>9}  rounds measured")
base = {}
for (pp, sched), rs in runs.items():
    mid = sorted(rs, key=lambda r: r["meas"])[(len(rs) - 1) // 2]
    if sched == "ONE_F_ONE_B":
        base[pp] = mid["meas"]
    ratio = mid["meas"] / base[pp] if pp in base else float("nan")
    spread = " ".join(f"{r['meas']:.1f}" for r in rs)
    print(f"{pp:>2}  {sched:<12} {mid['meas']:7.1f}ms {mid['sim']:7.1f}ms "
          f"{100*(mid['sim']/mid['meas']-1):+6.1f}%  {mid['measb']:11.1f}% "
          f"{mid['simb']:5.1f}%  {ratio:6.2f}x  {mid['own']:7.1f}ms  {spread}")
PY
