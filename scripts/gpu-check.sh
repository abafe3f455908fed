#!/usr/bin/env bash
# The GPU check, run on the GPU machine from the repository root, with a
# bundle made by scripts/gpu-bundle.sh:
#
#   bash scripts/gpu-check.sh out/gpu-bundle [RESULTS]
#
# Checks that nvidia-smi sees a GPU, finds NCCL, then runs
# test/bench/gpu/run.sh (the GPU tests, the NCCL path through braid-run,
# Braid with fused and with unfused plans, the GEMM ceiling, PyTorch
# torch.compile and eager, Braid's flash attention against PyTorch's SDPA)
# in a work folder and leaves in RESULTS (default $OUT, else out/gpu-check)
# at most five files: summary.txt, summary.json, console.log, nvidia-smi.txt
# and details.tar.gz (every log and JSON of the run).
#
# NCCL: the system's libnccl.so.2, else the one PyTorch's wheel installed
# (exported as BRAID_NCCL_LIBRARY for braid-run and the tests); without
# either, the NCCL tests and stage say so and everything else runs.
#
# Environment: BRAID_GPU_BUDGET (seconds for run.sh, default 450),
# BRAID_GPU_WORK (work folder, default /tmp/braid-gpu-check),
# BRAID_NCCL_LIBRARY (the libnccl.so.2 to use), and run.sh's own (PYTHON,
# BRAID_GPU_RESERVE_MIB). Extra arguments after RESULTS go to run.sh (e.g.
# --skip eager-sdpa,profile --steps 20).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -lt 1 ]; then
  sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2
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

# NCCL for the GPU's collectives (docs/parallel.md, "GPU: NCCL").
if [ -z "${BRAID_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  nccl_found="$("${PYTHON:-python3}" -c '
import importlib.util, os
try:
    spec = importlib.util.find_spec("nvidia.nccl")
except ImportError:
    spec = None
for d in (spec.submodule_search_locations or []) if spec else []:
    if os.path.exists(os.path.join(d, "lib", "libnccl.so.2")):
        print(os.path.join(d, "lib", "libnccl.so.2"))
        break
' 2>/dev/null)"
  if [ -n "$nccl_found" ]; then export BRAID_NCCL_LIBRARY="$nccl_found"; fi
fi
{
  echo "BRAID_NCCL_LIBRARY=${BRAID_NCCL_LIBRARY:-(unset)}"
  ldconfig -p 2>/dev/null | grep 'libnccl\.so' || echo "no libnccl in the loader's cache"
  "${PYTHON:-python3}" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' 2>&1 | tail -n 1
} > "$work/nccl-library.txt"
sed 's/^/gpu-check.sh: NCCL: /' "$work/nccl-library.txt"
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
