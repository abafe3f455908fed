#!/usr/bin/env bash
# The NCCL stage of the GPU run (test/bench/gpu/run.sh): braid-run trains the
# two plans of test/e2e/Inputs/collective_plans.sh on the GPU, the one whose
# step program has collectives through NCCL (braid-run makes the
# communicators at one rank), and their losses and gradient norms must agree:
#
#   nccl_check.sh BRAID_RUN PLANS_DIR TEXT OUT [STEPS]
#
# Writes OUT/reference.{log,jsonl}, OUT/collectives.{log,jsonl} and
# OUT/nccl.txt (the verdict, and the NCCL braid-run loaded when it says).
# Exits 0 when they agree, 77 (ctest's skip code, which run.sh records as
# skipped) when NCCL is not installed: the collectives plan is then refused
# with the loader's sentence, which is no failure of the path. 1 otherwise.
set -uo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
bin="$1" plans="$2" text="$3" out="$4" steps="${5:-6}"
mkdir -p "$out"
verdict() { echo "$*" | tee -a "$out/nccl.txt"; }
: > "$out/nccl.txt"
verdict "BRAID_NCCL_LIBRARY=${BRAID_NCCL_LIBRARY:-(unset)}"
if [ -f "$plans/collectives.why" ]; then
  verdict "no collectives plan: $(cat "$plans/collectives.why")"
  exit 1
fi
for p in reference collectives; do
  if [ ! -f "$plans/$p.plan" ]; then
    verdict "no $plans/$p.plan (built with the gpu_nccl_training_test target)"
    exit 1
  fi
done

train() { # NAME
  echo "+ $bin $plans/$1.plan --device=cuda --data $text --steps $steps --log $out/$1.jsonl"
  "$bin" "$plans/$1.plan" --device=cuda --data "$text" --steps "$steps" \
    --log "$out/$1.jsonl" > "$out/$1.log" 2>&1
}
rm -f "$out/reference.jsonl" "$out/collectives.jsonl"
if ! train reference; then
  verdict "the reference plan (no collectives) failed on the GPU: $(tail -n 2 "$out/reference.log")"
  exit 1
fi
if ! train collectives; then
  if grep -q "NCCL is not installed" "$out/collectives.log"; then
    verdict "NCCL not found, so the NCCL path was not run: $(grep -o 'NCCL is not installed.*' "$out/collectives.log" | head -n 1)"
    exit 77
  fi
  verdict "the collectives plan failed through NCCL: $(tail -n 3 "$out/collectives.log")"
  exit 1
fi
# Losses and gradient norms, step by step; tokens/s differs.
python3 - "$out/reference.jsonl" "$out/collectives.jsonl" "$steps" <<'EOF' | tee -a "$out/nccl.txt"
import json, sys
ref, col = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[1:3])
steps = int(sys.argv[3])
ok = len(ref) == len(col) == steps
worst = 0.0
for a, b in zip(ref, col):
    for key in ("loss", "grad_norm"):
        worst = max(worst, abs(a[key] - b[key]) / max(abs(a[key]), 1e-30))
    print(f"step {a['step']}: loss {a['loss']:.8f} / {b['loss']:.8f}, "
          f"grad_norm {a['grad_norm']:.6f} / {b['grad_norm']:.6f}")
ok = ok and worst <= 1e-5
print(f"NCCL path: {'OK' if ok else 'MISMATCH'}: {len(col)} of {steps} steps, "
      f"largest relative difference {worst:.2e} (limit 1e-5)")
sys.exit(0 if ok else 1)
EOF
