#!/usr/bin/env bash
# The GPU benchmark and GPU test run, in one command on one CUDA machine
# (docs/benchmarks.md, "GPU"):
#
#   1. Braid's GPU tests (every ctest test labelled `gpu`);
#   2. Braid: braid-run --device=cuda (CUDA graphs on) on the 1B model
#      (test/bench/specs/gpu-llama-1b.pbtxt), the largest compiled
#      micro-batch whose arena fits the free device memory, random tokens;
#   3. the bf16 GEMM ceiling at the model's shapes (gemm_ceiling.py);
#   4. PyTorch on the identical model: torch.compile with scaled-dot-product
#      attention, eager with Braid's reference attention, eager with
#      scaled-dot-product attention (torch_llama.py);
#   5. braid-run --profile (graphs off), when time is left;
#
# then prints OUT/summary.txt and writes OUT/summary.json: tokens/s, MFU
# (Megatron's model FLOPs; against the measured GEMM ceiling and the H200's
# 989 TFLOP/s dense bf16) and the ratios Braid/eager and Braid/compile.
# Every stage runs under a timeout carved from one budget; a stage that
# fails, times out or is skipped is recorded in the summary, and the rest
# still run.
#
#   test/bench/gpu/run.sh OUT --bundle DIR   binaries and plans from
#                                            scripts/gpu-bundle.sh (a machine
#                                            without the compiler)
#   test/bench/gpu/run.sh OUT --build DIR    a CUDA build tree with braidc
#
# Options: --budget S (whole run, default 450), --steps N (Braid's steps,
# default 20), --micro-batch N (Braid's plan; default: the largest that
# fits), --torch-micro-batch N (default: the largest that fits), --skip
# STAGES (comma-separated: tests,braid,gemm,compile,eager,eager-sdpa,profile).
# Environment: PYTHON (default python3), BRAID_GPU_RESERVE_MIB (memory left
# beside Braid's arena, default 3072), BRAID_GPU_STAGE (where a bundle is
# unpacked, default /tmp/braid-gpu-stage).
set -uo pipefail

usage() {
  sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

root="$(cd "$(dirname "$0")/../../.." && pwd)"
here="$root/test/bench/gpu"
spec="$root/test/bench/specs/gpu-llama-1b.pbtxt"
[ $# -ge 1 ] || usage
out="$1"
shift
bundle=""
build=""
budget=450
steps=20
braid_mb=0
torch_mb=0
skip=","
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --micro-batch) braid_mb="$2"; shift 2 ;;
    --torch-micro-batch) torch_mb="$2"; shift 2 ;;
    --skip) skip=",$2,"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage ;;
  esac
done
if [ -z "$bundle" ] && [ -z "$build" ]; then
  echo "run.sh: give --bundle DIR (scripts/gpu-bundle.sh) or --build DIR (a CUDA build)" >&2
  exit 2
fi
python="${PYTHON:-python3}"
reserve_mib="${BRAID_GPU_RESERVE_MIB:-3072}"
stage="${BRAID_GPU_STAGE:-/tmp/braid-gpu-stage}"

mkdir -p "$out/logs" "$out/tests" "$out/braid" "$out/torch" "$out/work"
out="$(cd "$out" && pwd)"
: > "$out/stages.jsonl"
: > "$out/tests.jsonl"
started=$(date +%s)
deadline=$((started + budget))
export PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"

say() { echo "[run.sh +$(( $(date +%s) - started ))s] $*"; }

# One line of OUT/stages.jsonl: stage, status (ok, failed, timeout, skipped),
# exit status, seconds, a note (quotes and backslashes dropped).
record() {
  local note
  note="$(printf '%s' "$5" | tr -d '\042\134' | tr '\n\t\r' '   ' | cut -c1-400)"
  printf '{"stage":"%s","status":"%s","rc":%s,"seconds":%s,"note":"%s"}\n' \
    "$1" "$2" "$3" "$4" "$note" >> "$out/stages.jsonl"
}

skipped() { case "$skip" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# Seconds a stage may take: its cap, or what is left of the budget less a
# margin for the report, whichever is smaller.
stage_limit() {
  local left=$((deadline - $(date +%s) - 10))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# run_stage NAME CAP LOG CMD...: runs CMD under its time limit, output to LOG,
# and records the outcome. Returns CMD's exit status (124: timed out; 125:
# skipped for lack of time).
run_stage() {
  local name="$1" cap="$2" log="$3" limit rc=0 t0 status=ok note=""
  shift 3
  limit="$(stage_limit "$cap")"
  if [ "$limit" -lt 20 ]; then
    say "$name: skipped, ${limit}s of the budget left"
    record "$name" skipped null 0 "out of time budget"
    return 125
  fi
  say "$name (limit ${limit}s): $*"
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" > "$log" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=timeout; note="timed out after ${limit}s; $(grep -v '^+ ' "$log" | tail -n 2)"
  elif [ "$rc" -ne 0 ]; then
    status=failed; note="$(grep -v '^+ ' "$log" | tail -n 4)"
  fi
  record "$name" "$status" "$rc" "$(( $(date +%s) - t0 ))" "$note"
  say "$name: $status (exit $rc, $(( $(date +%s) - t0 ))s)"
  tail -n 3 "$log" | sed 's/^/    /'
  return "$rc"
}

# --- The binaries ------------------------------------------------------------
braid_run=""
plans_tsv=""
tests_tsv=""
if [ -n "$bundle" ]; then
  bundle="$(cd "$bundle" && pwd)"
  # shellcheck source=/dev/null
  . "$bundle/bundle.env"
  say "bundle $bundle: $BUNDLE_DESCRIBE, built $BUNDLE_CREATED"
  rm -rf "$stage"
  mkdir -p "$stage"
  if ! tar -xJf "$bundle/payload.tar.xz" -C "$stage" 2>"$out/logs/unpack.log"; then
    "$python" -m tarfile -e "$bundle/payload.tar.xz" "$stage" >>"$out/logs/unpack.log" 2>&1 || {
      record unpack failed 1 0 "cannot unpack $bundle/payload.tar.xz: $(tail -n 2 "$out/logs/unpack.log")"
      say "cannot unpack the bundle"; }
  fi
  # The test binaries hold the build's absolute paths (BRAID_SOURCE_DIR,
  # BRAID_BINARY_DIR, BRAID_DATA_DIR): make each one exist here, pointing at
  # this checkout, the unpacked build and the bundled corpus.
  link_to() {
    local target="$1" path="$2"
    if [ -e "$path" ] || [ -L "$path" ]; then
      return 0
    fi
    if ! { mkdir -p "$(dirname "$path")" && ln -s "$target" "$path"; } 2>/dev/null; then
      say "note: could not link $path -> $target; tests that use it may fail"
    fi
  }
  link_to "$root" "$BUNDLE_SOURCE_DIR"
  link_to "$stage/build" "$BUNDLE_BINARY_DIR"
  data_dir="$(realpath -m "$BUNDLE_DATA_DIR")"
  if [ ! -f "$data_dir/tinyshakespeare.txt" ] && [ -f "$stage/data/tinyshakespeare.txt" ]; then
    if ! { mkdir -p "$data_dir" && cp "$stage/data/tinyshakespeare.txt" "$data_dir/"; } 2>/dev/null; then
      say "note: could not place the corpus at $data_dir"
    fi
  fi
  braid_run="$stage/build/bin/braid-run"
  plans_tsv="$bundle/plans/plans.tsv"
  tests_tsv="$bundle/tests.tsv"
  binary_dir="$BUNDLE_BINARY_DIR"
else
  build="$(cd "$build" && pwd)"
  braid_run="$build/bin/braid-run"
  binary_dir="$build"
  # Compile the plans here, as scripts/gpu-bundle.sh would.
  mkdir -p "$out/plans"
  : > "$out/plans/plans.tsv"
  for mb in 1 2 4 8 12 16 24 32; do
    sed -e "s/^\( *micro_batch_size:\) .*/\1 $mb/" -e "s/^\( *global_batch_size:\) .*/\1 $mb/" \
      "$spec" > "$out/plans/gpu-llama-1b-mb$mb.pbtxt"
    if "$build/bin/braidc" "$out/plans/gpu-llama-1b-mb$mb.pbtxt" --emit=plan --report-memory \
        -o "$out/plans/gpu-llama-1b-mb$mb.plan" 2> "$out/plans/mb$mb.report"; then
      arena="$(sed -n 's/^ *arena *\([0-9]*\) bytes.*/\1/p' "$out/plans/mb$mb.report")"
      printf '%s\t%s\t%s\n' "$mb" "$arena" "gpu-llama-1b-mb$mb.plan" >> "$out/plans/plans.tsv"
    fi
  done
  plans_tsv="$out/plans/plans.tsv"
fi

# A braid-run built elsewhere may need a newer libstdc++ than this machine
# has: the bundle carries the build machine's, used only when needed.
if [ -x "$braid_run" ] && ! "$braid_run" --help > "$out/logs/braid-run-help.log" 2>&1; then
  if grep -q "GLIBCXX\|CXXABI" "$out/logs/braid-run-help.log" && [ -d "$stage/lib" ]; then
    export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "using the bundled libstdc++ ($(head -n 1 "$out/logs/braid-run-help.log"))"
  fi
fi

# --- Machine -----------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version,clocks.max.sm \
    --format=csv 2>&1
  "$python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  if [ -n "$bundle" ]; then echo "bundle: $BUNDLE_DESCRIBE ($BUNDLE_CREATED)"; fi
} > "$out/machine.txt"
sed 's/^/    /' "$out/machine.txt"

# --- 1. GPU tests ------------------------------------------------------------
run_tests() {
  local limit t0 name kind dir rc status arg passed=0 failed=0 skip77=0 stop
  local -a fields cmd
  limit="$(stage_limit 90)"
  if [ "$limit" -lt 20 ]; then record gpu-tests skipped null 0 "out of time budget"; return; fi
  stop=$(( $(date +%s) + limit ))
  t0=$(date +%s)
  if [ -n "$bundle" ]; then
    if [ ! -s "$tests_tsv" ]; then
      record gpu-tests failed null 0 "the bundle lists no GPU tests (tests.tsv is empty)"
      return
    fi
    # tests.tsv: name, kind (gtest or other), working directory, command.
    while IFS=$'\t' read -r -a fields; do
      [ "${#fields[@]}" -ge 4 ] || continue
      name="${fields[0]}"
      kind="${fields[1]}"
      dir="${fields[2]}"
      cmd=()
      for arg in "${fields[@]:3}"; do
        # The build's binaries, from the unpacked bundle.
        case "$arg" in
          "$binary_dir"/bin/*) cmd+=("$stage/build/bin/${arg#"$binary_dir"/bin/}") ;;
          *) cmd+=("$arg") ;;
        esac
      done
      mkdir -p "$dir" 2>/dev/null || dir="$out/work"
      local left=$(( stop - $(date +%s) ))
      if [ "$left" -lt 5 ]; then
        printf '{"test":"%s","status":"not run (time)"}\n' "$name" >> "$out/tests.jsonl"
        continue
      fi
      say "test $name (limit ${left}s)"
      rc=0
      # GoogleTest binaries also leave an XML report.
      if [ "$kind" = gtest ]; then
        cmd+=("--gtest_output=xml:$out/tests/$name.xml")
      fi
      (cd "$dir" && timeout -k 5 "$left" "${cmd[@]}") > "$out/tests/$name.log" 2>&1 || rc=$?
      case "$rc" in
        0) status=passed; passed=$((passed + 1)) ;;
        77) status=skipped; skip77=$((skip77 + 1)) ;;
        124|137) status=timeout; failed=$((failed + 1)) ;;
        *) status=failed; failed=$((failed + 1)) ;;
      esac
      printf '{"test":"%s","status":"%s","rc":%s}\n' "$name" "$status" "$rc" >> "$out/tests.jsonl"
      say "test $name: $status"
      if [ "$status" != passed ]; then
        grep -E "^\[  FAILED  \]|Failure|error" "$out/tests/$name.log" | head -n 5 | sed 's/^/    /'
      fi
    done < "$tests_tsv"
  else
    rc=0
    (cd "$build" && timeout -k 5 "$limit" ctest -L gpu --output-on-failure) \
      > "$out/tests/ctest.log" 2>&1 || rc=$?
    tail -n 5 "$out/tests/ctest.log" | sed 's/^/    /'
    if [ "$rc" -eq 0 ]; then passed=1; else failed=1; fi
  fi
  status=ok
  if [ "$failed" -gt 0 ]; then
    status=failed
  elif [ "$passed" -eq 0 ]; then
    status=skipped
  fi
  record gpu-tests "$status" "$failed" "$(( $(date +%s) - t0 ))" \
    "$passed passed, $failed failed or timed out, $skip77 skipped (no device)"
}
if skipped tests; then record gpu-tests skipped null 0 "--skip"; else run_tests; fi

# --- 2. Braid ----------------------------------------------------------------
seq_len="$(sed -n 's/^ *seq_len: *\([0-9]*\).*/\1/p' "$spec" | head -n 1)"
vocab="$(sed -n 's/^ *vocab_size: *\([0-9]*\).*/\1/p' "$spec" | head -n 1)"
free_mib="$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -dc 0-9)"
free_mib="${free_mib:-0}"
plan=""
plan_mb=0
plans_dir="$(dirname "$plans_tsv")"
smaller=()  # the fitting plans below the chosen one, largest first
if [ -s "$plans_tsv" ]; then
  # Largest micro-batch whose arena, plus a reserve for the CUDA context,
  # cuBLASLt's workspace and the graphs, fits the free memory.
  while IFS=$'\t' read -r mb arena file; do
    [ -n "$arena" ] || continue
    if [ "$braid_mb" -gt 0 ]; then
      [ "$mb" -eq "$braid_mb" ] || continue
    elif [ $(( arena / 1048576 + reserve_mib )) -gt "$free_mib" ]; then
      continue
    fi
    smaller+=("$mb:$plans_dir/$file")
  done < <(sort -n -r "$plans_tsv")
  if [ "${#smaller[@]}" -gt 0 ]; then
    plan_mb="${smaller[0]%%:*}"
    plan="${smaller[0]#*:}"
    smaller=("${smaller[@]:1}")
  fi
fi
write_choice() {
  printf '{"micro_batch":%s,"plan":"%s","free_mib":%s,"reserve_mib":%s,"seq_len":%s}\n' \
    "$plan_mb" "$plan" "$free_mib" "$reserve_mib" "${seq_len:-0}" > "$out/braid/choice.json"
}
write_choice

braid_stage() { # STAGE CAP GRAPHS: braid-run on $plan, log to OUT/braid/run.log
  run_stage "$1" "$2" "$out/braid/run.log" bash "$here/braid_step.sh" "$braid_run" "$plan" \
    "$out/work/tokens.u16" "$3" --steps "$steps" --log "$out/braid/log.jsonl" \
    --peak-gflops 989000
}

if skipped braid; then
  record braid skipped null 0 "--skip"
elif [ ! -x "$braid_run" ]; then
  record braid failed null 0 "no braid-run at $braid_run"
elif [ -z "$plan" ]; then
  record braid failed null 0 "no plan fits ${free_mib} MiB free (reserve ${reserve_mib} MiB; plans: $(tr '\n\t' '; ' < "$plans_tsv" 2>/dev/null))"
else
  say "Braid: micro-batch $plan_mb ($(basename "$plan")), ${free_mib} MiB free"
  tokens=$(( (steps + 2) * plan_mb * (seq_len + 1) + 1 ))
  "$python" - "$out/work/tokens.u16" "$tokens" "$vocab" <<'EOF'
import sys
import numpy as np
path, count, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
np.random.default_rng(1234).integers(0, vocab, count, dtype=np.uint16).tofile(path)
EOF
  rc=0
  braid_stage braid 120 on || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 125 ]; then
    cp "$out/braid/run.log" "$out/braid/run-1.log"
    if grep -qi "out of memory\|cudaMalloc\|cudaErrorMemoryAllocation" "$out/braid/run.log" &&
        [ "${#smaller[@]}" -gt 0 ]; then
      # The arena did not fit after all: the next smaller plan.
      plan_mb="${smaller[0]%%:*}"
      plan="${smaller[0]#*:}"
      write_choice
      braid_stage braid-smaller 90 on || true
    else
      # Graphs off, to tell a capture problem from a kernel problem.
      braid_stage braid-graphs-off 90 off || true
      touch "$out/braid/graphs-off"
    fi
  fi
fi

# --- 3. GEMM ceiling ---------------------------------------------------------
gemm_tokens=$(( (plan_mb > 0 ? plan_mb : 8) * ${seq_len:-2048} ))
if skipped gemm; then record gemm skipped null 0 "--skip"; else
  run_stage gemm 45 "$out/logs/gemm.log" "$python" "$here/gemm_ceiling.py" --spec "$spec" \
    --tokens "$gemm_tokens" --out "$out/gemm.json" || true
fi

# --- 4. PyTorch --------------------------------------------------------------
torch_stage() { # MODE CAP
  local mode="$1" cap="$2"
  if skipped "$mode"; then record "torch-$mode" skipped null 0 "--skip"; return; fi
  run_stage "torch-$mode" "$cap" "$out/torch/$mode.log" "$python" "$here/torch_llama.py" \
    --spec "$spec" --mode "$mode" --micro-batch "$torch_mb" --warmup 3 --steps 10 \
    --time-limit 20 --out "$out/torch/$mode.json" || true
}
torch_stage compile 180
torch_stage eager 75
torch_stage eager-sdpa 45

# --- 5. Braid's kernel profile -----------------------------------------------
if skipped profile || [ -z "$plan" ] || [ ! -x "$braid_run" ]; then
  record braid-profile skipped null 0 "no plan, no braid-run or --skip"
else
  run_stage braid-profile 45 "$out/braid/profile.log" bash "$here/braid_step.sh" "$braid_run" \
    "$plan" "$out/work/tokens.u16" off --profile --steps 6 || true
fi

# --- Report ------------------------------------------------------------------
"$python" "$here/report.py" "$out" --spec "$spec" || {
  echo "run.sh: the report failed; stages:" >&2
  cat "$out/stages.jsonl" >&2
}
