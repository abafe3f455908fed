#!/usr/bin/env bash
# The hot-expert replication benchmark: test/bench/specs/cpu-moe.pbtxt on 2
# ranks with expert parallel 2 (DP 2, one micro-batch of 4 x 256 tokens
# each; the receive room is the worst case), in the skewed-routing phase:
# cpu-moe's router starts sending most tokens to one rank's experts and
# the expert bias evens it out over the first tens of steps. Side by side
# in one run:
#   - off: no replication (every row goes to its expert's rank);
#   - hot1, hot2: model.moe.hot_experts 1 and 2 at the default threshold
#     (replicated while the busiest rank would receive more than 1.25 x
#     the mean; docs/moe.md "Hot-expert replication").
# Each runs without a link delay (compute and shared-memory MPI) and over
# the emulated link of the data-parallel benchmarks on the EP exchanges
# (braid-run --emulate-link L:B --emulate-link-axes ep: the dispatches,
# combines, the replicas' broadcasts and their gradients' chains all pay
# latency + bytes / bandwidth). Printed for each: the median step against
# off's (without and with the link), the experts' grouped GEMMs' time per
# step on rank 0 (braid-run --profile; rank 0 holds the hot experts, so
# its GEMMs shrink when their rows stay on rank 1), the share of MoE layer
# passes that replicated over the run (from the logs), the planned arena
# against off's, and the loss after the last step (the three train the
# same numbers bit for bit, test/mpi/moe-replication.test). The step time
# is the median step after three warm-up steps, then the median over R
# rounds (the layouts run in turn).
#
#   test/bench/run_replication_bench.sh [--steps N] [--rounds R]
#                                       [--link L:B] [--out DIR]
#
# Needs a build with MPI (scripts/build.sh). --link: latency in us and
# bandwidth in GB/s (default 10:1).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
build="$bench_build"
data="$bench_data"
steps=12
rounds=3
link="10:1"
out="$build/bench/replication"
bench_options run_replication_bench.sh \
  "steps:steps rounds:rounds link:link out:out" "$@"
bench_need_mpi_build run_replication_bench.sh
spec="$bench_root/test/bench/specs/cpu-moe.pbtxt"
mkdir -p "$out"
layouts="off hot1 hot2"
for l in $layouts; do
  s="$out/$l.pbtxt"
  sed -e 's/global_batch_size: 4/global_batch_size: 8/' \
      -e 's/data_parallel: 1/data_parallel: 2 expert_parallel: 2/' \
      -e "s/top_k: 2/top_k: 2$(case $l in hot1) echo ' hot_experts: 1' ;; hot2) echo ' hot_experts: 2' ;; esac)/" \
      "$spec" > "$s"
  bench_compile "$out" "$l"
done
mpi=("${bench_mpi2[@]}")
for r in $(seq 1 "$rounds"); do
  for l in $layouts; do
    "${mpi[@]}" "$build/bin/braid-run" "$out/$l.plan" --data "$data" \
      --steps "$steps" --threads 1 --quiet --log "$out/$l.local.$r.jsonl" \
      --profile > "$out/$l.$r.profile"
    "${mpi[@]}" "$build/bin/braid-run" "$out/$l.plan" --data "$data" \
      --steps "$steps" --threads 1 --quiet --log "$out/$l.link.$r.jsonl" \
      --emulate-link "$link" --emulate-link-axes ep
  done
done
python3 - "$out" "$rounds" "$link" $layouts <<'PY'
import json, re, statistics, sys
out, rounds, link, layouts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def step(l, where):
    per_round, last, logs = [], None, []
    for r in range(1, rounds + 1):
        log = [json.loads(x) for x in open(f"{out}/{l}.{where}.{r}.jsonl")]
        last = log[-1]["loss"]
        logs += log
        per_round.append(statistics.median(1.0 / x["tokens_per_s"] for x in log[3:]))
    return statistics.median(per_round), last, logs
rows = []
for l in layouts:
    report = open(f"{out}/{l}.report").read()
    arena = int(re.search(r"\n\s*arena\s+(\d+) bytes", report).group(1))
    gemm = statistics.median(
        float(re.search(r"\nmoe_grouped_linear\s+\d+\s+[\d.]+\s+([\d.]+)",
                        open(f"{out}/{l}.{r}.profile").read()).group(1))
        for r in range(1, rounds + 1))
    local, last, logs = step(l, "local")
    linked, _, _ = step(l, "link")
    # 3 MoE layers x 1 micro-batch per rank and step.
    counts = [v for x in logs for v in x.get("experts_replicated", [])]
    share = sum(counts) / (3 * len(counts)) if counts else 0.0
    rows.append((l, local, linked, gemm, share, arena, last))
b = rows[0]
print(f"cpu-moe on 2 ranks (EP 2), skewed routing, median of {rounds} rounds; "
      f"link {link} (us:GB/s) on the EP exchanges")
print(f"{'layout':<8} {'step vs off':>11} {'over link':>10} {'GEMMs ms/step':>13} "
      f"{'replicated':>10} {'arena':>11} {'vs off':>7} {'last loss':>10}")
for l, local, linked, gemm, share, arena, last in rows:
    print(f"{l:<8} {local / b[1]:>10.2f}x {linked / b[2]:>9.2f}x {gemm:>13.1f} "
          f"{share:>10.0%} {arena / 2**20:>7.1f} MiB {arena / b[5]:>6.2f}x {last:>10.4f}")
PY
