#!/usr/bin/env bash
# The GPU check, run on the GPU machine from the repository root, with a
# bundle made by scripts/gpu-bundle.sh:
#
#   bash scripts/gpu-check.sh out/gpu-bundle [RESULTS]
#
# Checks that nvidia-smi sees a GPU, then runs test/bench/gpu/run.sh (the GPU
# tests, Braid with fused and with unfused plans, the GEMM ceiling, PyTorch
# torch.compile and eager, Braid's flash attention against PyTorch's SDPA)
# in a work folder and leaves in RESULTS (default $OUT, else out/gpu-check)
# at most five files: summary.txt, summary.json, console.log, nvidia-smi.txt
# and details.tar.gz (every log and JSON of the run).
#
# Environment: BRAID_GPU_BUDGET (seconds for run.sh, default 450),
# BRAID_GPU_WORK (work folder, default /tmp/braid-gpu-check), and run.sh's
# own (PYTHON, BRAID_GPU_RESERVE_MIB). Extra arguments after RESULTS go to
# run.sh (e.g. --skip eager-sdpa,profile --steps 20).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -lt 1 ]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
bundle="$1"
shift
results="${OUT:-$root/out/gpu-check}"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  results="$1"
  shift
fi
work="${BRAID_GPU_WORK:-/tmp/braid-gpu-check}"
budget="${BRAID_GPU_BUDGET:-450}"
mkdir -p "$results"
results="$(cd "$results" && pwd)"
if [ -d "$bundle" ]; then bundle="$(cd "$bundle" && pwd)"; fi
cd "$root" || exit 1

if ! nvidia-smi > "$results/nvidia-smi.txt" 2>&1; then
  echo "gpu-check.sh: nvidia-smi failed; no usable GPU here:" >&2
  cat "$results/nvidia-smi.txt" >&2
  echo "no GPU: nvidia-smi failed (see nvidia-smi.txt)" > "$results/summary.txt"
  exit 1
fi
nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv,noheader
if [ ! -f "$bundle/bundle.env" ] || [ ! -f "$bundle/payload.tar.xz" ]; then
  echo "gpu-check.sh: $bundle is not a bundle of scripts/gpu-bundle.sh (no bundle.env or payload.tar.xz)" >&2
  echo "no bundle at $bundle" > "$results/summary.txt"
  exit 1
fi

rm -rf "$work"
mkdir -p "$work"
rc=0
bash "$root/test/bench/gpu/run.sh" "$work" --bundle "$bundle" --budget "$budget" "$@" 2>&1 |
  tee "$work/console.log" || rc=$?

cp "$work/console.log" "$results/" 2>/dev/null
for f in summary.txt summary.json; do
  if [ -f "$work/$f" ]; then cp "$work/$f" "$results/"; fi
done
# Everything else, without the token file and the unpacked binaries.
tar -C "$work" --exclude=./work -czf "$results/details.tar.gz" . 2>/dev/null
echo "gpu-check.sh: results in $results"
exit "$rc"
