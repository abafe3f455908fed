#!/usr/bin/env bash
# The adaptive recompute benchmark: test/bench/specs/cpu-moe.pbtxt on 2
# ranks with expert parallel 2 (DP 2, one micro-batch of 4 x 256 tokens
# each; the receive room is the worst case, twice the mean), side by side
# in one run, every layout with moe-light (router, permutations and SwiGLU
# recomputed) so that they differ only in the experts' gate and up GEMMs:
#   - never: the GEMMs' outputs kept for the backward (the worst case's
#     rows each);
#   - always: the GEMMs computed again in the backward (recompute
#     "moe-light,moe_grouped_linear");
#   - adaptive: model.moe.adaptive_recompute 1 (each rank keeps the mean's
#     rows and recomputes when its experts received more; docs/moe.md
#     "Adaptive recompute").
# Printed for each: the planned activation peak, saved bytes and arena
# (braidc --report-memory), the median step against never's, the experts'
# grouped GEMMs' time per step on rank 0 (braid-run --profile: what the
# recompute costs, measured apart from the rest of the step's noise), the
# share of the gate and up activations recomputed over the run (from the
# runs' logs) and the loss after the last step (the three train the same numbers bit
# for bit, test/mpi/moe-adaptive.test). The step time is the median step
# after three warm-up steps, then the median over R rounds (the layouts run
# in turn). The first steps route most tokens to one rank's experts
# (cpu-moe's router starts skewed; the expert bias evens it out), the
# phase in which adaptive recompute differs from both.
#
#   test/bench/run_adaptive_bench.sh [--steps N] [--rounds R] [--out DIR]
#
# Needs a build with MPI (scripts/build.sh).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
build="$bench_build"
data="$bench_data"
steps=12
rounds=3
out="$build/bench/adaptive"
bench_options run_adaptive_bench.sh "steps:steps rounds:rounds out:out" "$@"
bench_need_mpi_build run_adaptive_bench.sh
spec="$bench_root/test/bench/specs/cpu-moe.pbtxt"
mkdir -p "$out"
layouts="never always adaptive"
for l in $layouts; do
  s="$out/$l.pbtxt"
  sed -e 's/global_batch_size: 4/global_batch_size: 8/' \
      -e 's/data_parallel: 1/data_parallel: 2 expert_parallel: 2/' \
      -e "s/top_k: 2/top_k: 2$([ $l = adaptive ] && echo ' adaptive_recompute: 1')/" \
      "$spec" > "$s"
  policy=moe-light
  [ $l = always ] && policy=moe-light,moe_grouped_linear
  bench_compile "$out" "$l" --recompute="$policy"
done
mpi=("${bench_mpi2[@]}")
for r in $(seq 1 "$rounds"); do
  for l in $layouts; do
    "${mpi[@]}" "$build/bin/braid-run" "$out/$l.plan" --data "$data" \
      --steps "$steps" --threads 1 --quiet --log "$out/$l.$r.jsonl" \
      --profile > "$out/$l.$r.profile"
  done
done
python3 - "$out" "$rounds" $layouts <<'PY'
import json, re, statistics, sys
out, rounds, layouts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def figure(report, name):
    return int(re.search(r"\n\s*" + name + r"\s+(\d+) bytes", report).group(1))
rows = []
for l in layouts:
    report = open(f"{out}/{l}.report").read()
    per_round, gemm, last, recomputed = [], [], None, None
    for r in range(1, rounds + 1):
        profile = open(f"{out}/{l}.{r}.profile").read()
        gemm.append(float(re.search(r"\nmoe_grouped_linear\s+\d+\s+[\d.]+\s+([\d.]+)", profile).group(1)))
        log = [json.loads(x) for x in open(f"{out}/{l}.{r}.jsonl")]
        last = log[-1]["loss"]
        per_round.append(statistics.median(1.0 / x["tokens_per_s"] for x in log[3:]))
        if "experts_recomputed" in log[0]:
            # 2 activations (gate, up) x 3 MoE layers x 1 micro-batch per
            # rank and step.
            counts = [v for x in log for v in x["experts_recomputed"]]
            recomputed = sum(counts) / (6 * len(counts))
    share = {"never": 0.0, "always": 1.0}.get(l, recomputed)
    rows.append((l, figure(report, r"activations \(peak\)"),
                 figure(report, "saved for backward"), figure(report, "arena"),
                 statistics.median(per_round), statistics.median(gemm), share, last))
b = rows[0]
print(f"cpu-moe on 2 ranks (EP 2, moe-light), median of {rounds} rounds")
print(f"{'layout':<10} {'act. peak':>10} {'saved':>10} {'arena':>10} {'vs never':>8} {'step vs never':>13} "
      f"{'GEMMs ms/step':>13} {'recomputed':>10} {'last loss':>10}")
for l, peak, saved, arena, step, gemm, share, last in rows:
    print(f"{l:<10} {peak / 2**20:>6.1f} MiB {saved / 2**20:>6.1f} MiB {arena / 2**20:>6.1f} MiB "
          f"{arena / b[3]:>7.2f}x {step / b[4]:>12.2f}x {gemm:>13.1f} {share:>10.0%} {last:>10.4f}")
PY
