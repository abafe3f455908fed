#!/usr/bin/env bash
# The expert-parallel benchmark: test/bench/specs/cpu-moe.pbtxt on 2 ranks
# (DP 2, one micro-batch of 4 x 256 tokens each), side by side in one run:
#   - dp2: every rank holds all 16 experts; their gradients join the DP
#     all-reduce;
#   - ep2: each rank holds 8 experts; every MoE layer exchanges its tokens
#     (dispatch and combine, forward and backward), the experts' gradients
#     stay on their rank (EP = DP: no edp sum); the receive room is the
#     worst case (dropless_bound 0, here twice the mean; the routing of
#     the first steps sends most tokens to one rank's experts, so a
#     smaller bound stops at step 1);
#   - ep2o: ep2 with ep_comm_overlap (the exchanges on a stream of their
#     own, beside the shared expert, the router's losses and gradients and
#     the experts' weight gradients; docs/moe.md "Hiding the exchanges");
#   - ep2u: ep2o with ep_sub_units 2 (each MoE layer's tokens in two
#     halves of the sequence, so that one half's exchange also runs beside
#     the other half's experts; docs/moe.md "Sub-units").
# Each runs without a link delay (compute and shared-memory MPI) and over
# the emulated link of the data-parallel benchmarks (braid-run
# --emulate-link, runtime/comm/EmulatedLink.h: each collective held for
# latency + bytes / bandwidth). Printed: the median step of each against
# dp2's, the planned arena and parameter bytes against dp2's, and the loss
# after the last step (the layouts train the same numbers within 1e-5,
# test/mpi/moe.test and test/mpi/moe-sub-units.test; ep2o trains ep2's
# numbers bit for bit). Then the all-to-all overlap, with the link on the
# exchanges alone (braid-run --emulate-link-axes ep, so that the
# data-parallel sums, hidden or not, do not count): ep2o's and ep2u's step
# against ep2's, and the share of the all-to-all each hides,
# 1 - (theirs over the link - theirs without delay) / (ep2 over the link -
# ep2 without delay). The step time is the median step after three
# warm-up steps, then the median over R rounds (the layouts run in turn).
#
#   test/bench/run_ep_bench.sh [--steps N] [--rounds R] [--link L:B]
#                              [--out DIR]
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
out="$build/bench/ep"
bench_options run_ep_bench.sh "steps:steps rounds:rounds link:link out:out" "$@"
bench_need_mpi_build run_ep_bench.sh
spec="$bench_root/test/bench/specs/cpu-moe.pbtxt"
mkdir -p "$out"
layouts="dp2 ep2 ep2o ep2u"
for l in $layouts; do
  s="$out/$l.pbtxt"
  sed -e 's/global_batch_size: 4/global_batch_size: 8/' \
      -e "s/data_parallel: 1/data_parallel: 2$(case $l in ep2) echo ' expert_parallel: 2' ;; ep2o) echo ' expert_parallel: 2 ep_comm_overlap: true' ;; ep2u) echo ' expert_parallel: 2 ep_comm_overlap: true ep_sub_units: 2' ;; esac)/" \
      "$spec" > "$s"
  bench_compile "$out" "$l"
done
mpi=("${bench_mpi2[@]}")
for r in $(seq 1 "$rounds"); do
  for l in $layouts; do
    "${mpi[@]}" "$build/bin/braid-run" "$out/$l.plan" --data "$data" \
      --steps "$steps" --threads 1 --quiet --log "$out/$l.local.$r.jsonl"
    "${mpi[@]}" "$build/bin/braid-run" "$out/$l.plan" --data "$data" \
      --steps "$steps" --threads 1 --quiet --log "$out/$l.link.$r.jsonl" \
      --emulate-link "$link"
  done
  for l in ep2 ep2o ep2u; do
    "${mpi[@]}" "$build/bin/braid-run" "$out/$l.plan" --data "$data" \
      --steps "$steps" --threads 1 --quiet --log "$out/$l.a2a.$r.jsonl" \
      --emulate-link "$link" --emulate-link-axes ep
  done
done
python3 - "$out" "$rounds" "$link" $layouts <<'PY'
import json, re, statistics, sys
out, rounds, link, layouts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def step(l, where):
    per_round, last = [], None
    for r in range(1, rounds + 1):
        log = [json.loads(x) for x in open(f"{out}/{l}.{where}.{r}.jsonl")]
        last = log[-1]["loss"]
        per_round.append(statistics.median(1.0 / x["tokens_per_s"] for x in log[3:]))
    return statistics.median(per_round), last
rows = []
for l in layouts:
    report = open(f"{out}/{l}.report").read()
    arena = int(re.search(r"\n\s*arena\s+(\d+) bytes", report).group(1))
    params = int(re.search(r"\n\s*parameters\s+(\d+) bytes", report).group(1))
    local, last = step(l, "local")
    linked, _ = step(l, "link")
    rows.append((l, local, linked, arena, params, last))
b = rows[0]
print(f"cpu-moe on 2 ranks (DP 2), median of {rounds} rounds; link {link} (us:GB/s)")
print(f"{'layout':<10} {'step vs dp2':>11} {'over link':>10} {'arena':>11} {'vs dp2':>7} {'params':>10} {'vs dp2':>7} {'last loss':>10}")
for l, local, linked, arena, params, last in rows:
    print(f"{l:<10} {local / b[1]:>10.2f}x {linked / b[2]:>9.2f}x {arena / 2**20:>7.1f} MiB {arena / b[3]:>6.2f}x "
          f"{params / 2**20:>6.1f} MiB {params / b[4]:>6.2f}x {last:>10.4f}")
local = {r[0]: r[1] for r in rows}
serial, _ = step("ep2", "a2a")
a2a = serial - local["ep2"]
print(f"all-to-all over the link alone: ep2 {serial / local['ep2']:.2f}x its step without delay")
for l in ("ep2o", "ep2u"):
    overlapped, _ = step(l, "a2a")
    hidden = 1 - (overlapped - local[l]) / a2a if a2a > 0 else 0
    print(f"  {l} {overlapped / local[l]:.2f}x its own; its step {overlapped / serial:.2f}x ep2's; "
          f"share of the all-to-all hidden: {hidden:.0%}")
PY
