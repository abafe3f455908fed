#!/usr/bin/env bash
# The CPU training-step benchmark: Braid, fused (--fusion=all) and unfused
# (--fusion=none), against PyTorch eager on the identical models
# (test/bench/specs/cpu-{small,medium}.pbtxt), with the sgemm rate of the
# same run as the MFU peak; and llama-tiny at sequence 2048
# (llama-tiny-seq2048.pbtxt), fused and unfused, for step time and peak
# activation memory. Prints tokens/s, MFU and the ratios. Ratios, measured
# side by side, are the result; absolute times on a shared machine are
# noise.
#
#   test/bench/run_cpu_bench.sh [--threads N] [--rounds R] [--out DIR]
#
# Needs a build (scripts/build.sh) and Debian's python3-torch
# (scripts/install-deps.sh --bench).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
threads=2
rounds=3
out="$build/bench"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "run_cpu_bench.sh: unknown option '$1' (use --threads N, --rounds R, --out DIR)" >&2; exit 2 ;;
  esac
done
torch_python=/usr/bin/python3
"$torch_python" -c "import torch" 2>/dev/null || {
  echo "run_cpu_bench.sh: PyTorch is missing; run scripts/install-deps.sh --bench" >&2; exit 1; }
[ -x "$build/bin/braid_cpu_bench" ] || {
  echo "run_cpu_bench.sh: no $build/bin/braid_cpu_bench; build first (scripts/build.sh)" >&2; exit 1; }

mkdir -p "$out"
configs=(small medium)
plan_args=()
compile() { # NAME SPEC: NAME (fused) and NAME-unfused
  "$build/bin/braidc" "$2" --fusion=all -o "$out/$1.plan"
  "$build/bin/braidc" "$2" --fusion=none -o "$out/$1-unfused.plan"
  plan_args+=("--plan=$1=$out/$1.plan" "--plan=$1-unfused=$out/$1-unfused.plan")
}
for c in "${configs[@]}"; do
  compile "$c" "$root/test/bench/specs/cpu-$c.pbtxt"
done
compile long "$root/test/bench/specs/llama-tiny-seq2048.pbtxt"

# Rounds alternate Braid and PyTorch so that both see the same machine;
# the report takes each side's best round. Both get the same BLAS settings:
# OpenBLAS workers sleep right after a GEMM instead of spinning (braid-run
# sets this for itself, see kernels/cpu/Linear.cpp) and OpenMP idles
# passively.
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=PASSIVE
for round in $(seq 1 "$rounds"); do
  echo "== round $round/$rounds: Braid (braid_cpu_bench, $threads threads) =="
  BRAID_NUM_THREADS=$threads "$build/bin/braid_cpu_bench" "${plan_args[@]}" \
    --threads="$threads" --benchmark_out="$out/braid-$round.json" \
    --benchmark_out_format=json
  for c in "${configs[@]}"; do
    echo "== round $round/$rounds: PyTorch eager, $c ($threads threads) =="
    "$torch_python" "$root/test/bench/torch_step.py" \
      --spec "$root/test/bench/specs/cpu-$c.pbtxt" --threads "$threads" \
      --warmup 2 --steps 8 | tee "$out/torch-$c-$round.json"
  done
done

"$torch_python" "$root/test/bench/report_cpu_bench.py" "$out" "$rounds" "${configs[@]}"
