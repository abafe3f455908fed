#!/usr/bin/env bash
# The flash attention stage of the GPU benchmark (test/bench/gpu/run.sh;
# docs/benchmarks.md, "Flash attention"): Braid's CUDA attention kernels
# (braid_flash_attention_bench), then PyTorch's scaled_dot_product_attention
# (sdpa_bench.py), at the same shapes, each writing JSON lines into OUTDIR:
#
#   flash_vs_sdpa.sh BENCH PYTHON OUTDIR BATCH SEQS HEADS HEAD_DIM
#
# SEQS is comma-separated. Braid's side runs under its own limit
# (BRAID_FLASH_LIMIT seconds, default 45) so that SDPA's always runs. Exits
# with the first non-zero status of the two (77: no device), else 0.
set -uo pipefail
if [ $# -ne 7 ]; then
  echo "usage: flash_vs_sdpa.sh BENCH PYTHON OUTDIR BATCH SEQS HEADS HEAD_DIM" >&2
  exit 2
fi
bench="$1" python="$2" dir="$3" batch="$4" seqs="$5" heads="$6" head_dim="$7"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$dir"
rc=0
echo "+ braid: $bench --batch $batch --seq $seqs --heads $heads --head-dim $head_dim"
timeout -k 5 "${BRAID_FLASH_LIMIT:-45}" "$bench" --batch "$batch" --seq "$seqs" \
  --heads "$heads" --head-dim "$head_dim" --max-seconds 2 --out "$dir/braid.jsonl" || rc=$?
echo "+ torch: sdpa_bench.py --batch $batch --seq $seqs --heads $heads --head-dim $head_dim"
"$python" "$here/sdpa_bench.py" --batch "$batch" --seq "$seqs" --heads "$heads" \
  --head-dim "$head_dim" --max-seconds 2 --out "$dir/sdpa.jsonl" || {
  status=$?
  [ "$rc" -ne 0 ] || rc="$status"
}
exit "$rc"
