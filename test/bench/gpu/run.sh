#!/usr/bin/env bash
# The GPU benchmark and GPU test run, in one command on one CUDA machine
# (docs/benchmarks.md, "GPU"):
#
#   1. Braid's GPU tests (every ctest test labelled `gpu`), then the NCCL
#      path: braid-run trains a plan whose step has collectives through NCCL
#      at one rank and must match the same run without them
#      (nccl_check.sh; reported, not failed, where NCCL is not installed);
#   2. Braid fused: braid-run --device=cuda (CUDA graphs on) on the 1B model
#      (test/bench/specs/gpu-llama-1b.pbtxt) compiled with --fusion=all, the
#      largest compiled micro-batch whose arena fits the free device memory,
#      random tokens;
#   3. Braid unfused: the same with the --fusion=none plans;
#   4. the bf16 GEMM ceiling at the model's shapes (gemm_ceiling.py);
#   5. PyTorch on the identical model: torch.compile with scaled-dot-product
#      attention (torch_llama.py);
#   6. flash attention: Braid's CUDA flash_attention (and the reference
#      attention) against PyTorch's scaled_dot_product_attention, forward
#      and forward+backward at the model's attention shapes
#      (braid_flash_attention_bench, sdpa_bench.py);
#   7. PyTorch eager with Braid's reference attention, eager with
#      scaled-dot-product attention (torch_llama.py);
#   8. braid-run --profile (graphs off) on the fused plan, when time is left;
#
# then prints OUT/summary.txt and writes OUT/summary.json: tokens/s, MFU
# (Megatron's model FLOPs; against the measured GEMM ceiling and the H200's
# 989 TFLOP/s dense bf16), the ratios fused/unfused, fused/compile (target
# 1.0x), unfused/compile (target 0.8x) and against eager, and the attention
# kernels' TFLOP/s. Every stage runs under a timeout carved from one budget;
# a stage that fails, times out or is skipped is recorded in the summary,
# and the rest still run.
#
#   test/bench/gpu/run.sh OUT --bundle DIR   binaries and plans from
#                                            scripts/gpu-bundle.sh (a machine
#                                            without the compiler)
#   test/bench/gpu/run.sh OUT --build DIR    a CUDA build tree with braidc
#
# Options: --budget S (whole run, default 450), --steps N (Braid's steps per
# run, default 12: 3 warm-up, 9 timed), --micro-batch N (the unfused plan;
# default: the largest that fits), --fused-micro-batch N (the fused plan;
# default: the largest that fits), --max-micro-batch N (the largest either
# Braid plan may pick by itself, default 32, as torch_llama.py's),
# --torch-micro-batch N (default: the largest that fits), --flash-batch N
# (B of the attention benchmark, default 8), --skip STAGES (comma-separated,
# from tests,nccl,braid-fused,braid,gemm,compile,flash,eager,eager-sdpa,profile).
# Environment: PYTHON (default python3), BRAID_GPU_RESERVE_MIB (memory left
# beside Braid's arena, default 3072), BRAID_GPU_STAGE (where a bundle is
# unpacked, default /tmp/braid-gpu-stage).
set -uo pipefail

usage() {
  sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//' >&2
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
steps=12
braid_mb=0
fused_mb=0
max_mb=32
torch_mb=0
flash_batch=8
skip=","
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --micro-batch) braid_mb="$2"; shift 2 ;;
    --fused-micro-batch) fused_mb="$2"; shift 2 ;;
    --max-micro-batch) max_mb="$2"; shift 2 ;;
    --flash-batch) flash_batch="$2"; shift 2 ;;
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

mkdir -p "$out/logs" "$out/tests" "$out/braid" "$out/braid-fused" "$out/torch" "$out/flash" \
  "$out/work"
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
  elif [ "$rc" -eq 77 ]; then
    # What the stage needs is not on this machine (ctest's skip code).
    status=skipped; note="$(grep -v '^+ ' "$log" | tail -n 2)"
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
fused_tsv=""
flash_bench=""
tests_tsv=""
# The micro-batches compiled (as in scripts/gpu-bundle.sh): unfused plans
# keep the [B, 16, 2048, 2048] attention probabilities, fused ones do not.
unfused_mbs="1 2 4 8 12 16 24 32"
fused_mbs="1 2 4 8 12 16 20 24 28 32 40 48"
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
  fused_tsv="$bundle/plans/plans-fused.tsv"
  flash_bench="$stage/build/bin/braid_flash_attention_bench"
  tests_tsv="$bundle/tests.tsv"
  binary_dir="$BUNDLE_BINARY_DIR"
  nccl_plans="$stage/build/test/gpu/e2e/nccl-plans"
  nccl_text="$stage/data/tinyshakespeare.txt"
else
  build="$(cd "$build" && pwd)"
  braid_run="$build/bin/braid-run"
  binary_dir="$build"
  # Compile the plans here, as scripts/gpu-bundle.sh would:
  # compile_plans FUSION TSV NAME MICRO-BATCHES...
  compile_plans() {
    local fusion="$1" tsv="$2" name="$3" mb arena
    shift 3
    : > "$tsv"
    for mb in "$@"; do
      sed -e "s/^\( *micro_batch_size:\) .*/\1 $mb/" -e "s/^\( *global_batch_size:\) .*/\1 $mb/" \
        "$spec" > "$out/plans/$name-mb$mb.pbtxt"
      if "$build/bin/braidc" "$out/plans/$name-mb$mb.pbtxt" --emit=plan --report-memory \
          --fusion="$fusion" -o "$out/plans/$name-mb$mb.plan" \
          2> "$out/plans/$name-mb$mb.memory.txt"; then
        arena="$(sed -n 's/^ *arena *\([0-9]*\) bytes.*/\1/p' "$out/plans/$name-mb$mb.memory.txt")"
        printf '%s\t%s\t%s\n' "$mb" "$arena" "$name-mb$mb.plan" >> "$tsv"
      fi
    done
  }
  nccl_plans="$build/test/gpu/e2e/nccl-plans"
  nccl_text="$(sed -n 's/^BRAID_DATA_DIR:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n 1)/tinyshakespeare.txt"
  mkdir -p "$out/plans"
  # shellcheck disable=SC2086
  compile_plans none "$out/plans/plans.tsv" gpu-llama-1b $unfused_mbs
  # shellcheck disable=SC2086
  compile_plans all "$out/plans/plans-fused.tsv" gpu-llama-1b-fused $fused_mbs
  plans_tsv="$out/plans/plans.tsv"
  fused_tsv="$out/plans/plans-fused.tsv"
  flash_bench="$build/bin/braid_flash_attention_bench"
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
  limit="$(stage_limit 120)"
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

# --- 1b. The NCCL path through braid-run ---------------------------------------
mkdir -p "$out/nccl"
if skipped nccl; then
  record nccl skipped null 0 "--skip"
elif [ ! -x "$braid_run" ]; then
  record nccl failed null 0 "no braid-run at $braid_run"
else
  run_stage nccl 60 "$out/nccl/run.log" bash "$here/nccl_check.sh" "$braid_run" \
    "$nccl_plans" "$nccl_text" "$out/nccl" || true
fi

# --- 2, 3. Braid, fused and unfused -----------------------------------------
seq_len="$(sed -n 's/^ *seq_len: *\([0-9]*\).*/\1/p' "$spec" | head -n 1)"
vocab="$(sed -n 's/^ *vocab_size: *\([0-9]*\).*/\1/p' "$spec" | head -n 1)"
free_mib="$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -dc 0-9)"
free_mib="${free_mib:-0}"

# fitting_plans TSV FORCED: "mb:path" of every plan of TSV up to
# --max-micro-batch whose arena, plus a reserve for the CUDA context,
# cuBLASLt's workspace and the graphs, fits the free memory, largest first
# (with FORCED > 0: that micro-batch only).
fitting_plans() {
  local tsv="$1" forced="$2" dir mb arena file
  [ -s "$tsv" ] || return 0
  dir="$(dirname "$tsv")"
  while IFS=$'\t' read -r mb arena file; do
    [ -n "$arena" ] || continue
    if [ "$forced" -gt 0 ]; then
      [ "$mb" -eq "$forced" ] || continue
    elif [ "$mb" -gt "$max_mb" ] || [ $(( arena / 1048576 + reserve_mib )) -gt "$free_mib" ]; then
      continue
    fi
    echo "$mb:$dir/$file"
  done < <(sort -n -r "$tsv")
}

# write_choice DIR MB PLAN FUSION
write_choice() {
  printf '{"micro_batch":%s,"plan":"%s","fusion":"%s","free_mib":%s,"reserve_mib":%s,"seq_len":%s}\n' \
    "$2" "$3" "$4" "$free_mib" "$reserve_mib" "${seq_len:-0}" > "$1/choice.json"
}

# One token file for both runs, enough for the larger micro-batch.
tokens_ready=0
make_tokens() { # MB
  [ "$tokens_ready" -ge "$1" ] && return 0
  local tokens=$(( (steps + 2) * $1 * (seq_len + 1) + 1 ))
  "$python" - "$out/work/tokens.u16" "$tokens" "$vocab" <<'EOF'
import sys
import numpy as np
path, count, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
np.random.default_rng(1234).integers(0, vocab, count, dtype=np.uint16).tofile(path)
EOF
  tokens_ready="$1"
}

braid_stage() { # STAGE CAP GRAPHS DIR PLAN: braid-run on PLAN, log to DIR/run.log
  run_stage "$1" "$2" "$4/run.log" bash "$here/braid_step.sh" "$braid_run" "$5" \
    "$out/work/tokens.u16" "$3" --steps "$steps" --log "$4/log.jsonl" \
    --peak-gflops 989000
}

fused_plan=""
fused_plan_mb=0
plan=""
plan_mb=0

# run_braid STAGE TSV FORCED FUSION DIR CAP: the largest fitting plan of TSV;
# on failure the next smaller plan (the arena did not fit after all) or the
# same with graphs off (to tell a capture problem from a kernel problem); a
# run that timed out is not repeated (its log holds the steps it finished).
# Sets chosen_mb and chosen_plan.
run_braid() {
  local name="$1" tsv="$2" forced="$3" fusion="$4" dir="$5" rc=0
  local -a fits
  chosen_mb=0
  chosen_plan=""
  mapfile -t fits < <(fitting_plans "$tsv" "$forced")
  if [ "${#fits[@]}" -gt 0 ]; then
    chosen_mb="${fits[0]%%:*}"
    chosen_plan="${fits[0]#*:}"
  fi
  write_choice "$dir" "$chosen_mb" "$chosen_plan" "$fusion"
  if skipped "$name"; then
    record "$name" skipped null 0 "--skip"; return
  elif [ ! -x "$braid_run" ]; then
    record "$name" failed null 0 "no braid-run at $braid_run"; return
  elif [ -z "$chosen_plan" ]; then
    record "$name" failed null 0 "no --fusion=$fusion plan fits ${free_mib} MiB free (reserve ${reserve_mib} MiB; plans: $(tr '\n\t' '; ' < "$tsv" 2>/dev/null))"
    return
  fi
  say "Braid --fusion=$fusion: micro-batch $chosen_mb ($(basename "$chosen_plan")), ${free_mib} MiB free"
  make_tokens "$chosen_mb"
  braid_stage "$name" "$6" on "$dir" "$chosen_plan" || rc=$?
  case "$rc" in 0|124|125|137) return ;; esac
  cp "$dir/run.log" "$dir/run-1.log"
  if grep -qi "out of memory\|cudaMalloc\|cudaErrorMemoryAllocation" "$dir/run.log" &&
      [ "${#fits[@]}" -gt 1 ]; then
    chosen_mb="${fits[1]%%:*}"
    chosen_plan="${fits[1]#*:}"
    write_choice "$dir" "$chosen_mb" "$chosen_plan" "$fusion"
    make_tokens "$chosen_mb"
    braid_stage "$name-smaller" 90 on "$dir" "$chosen_plan" || true
  else
    braid_stage "$name-graphs-off" 90 off "$dir" "$chosen_plan" || true
    touch "$dir/graphs-off"
  fi
}

run_braid braid-fused "$fused_tsv" "$fused_mb" all "$out/braid-fused" 110
fused_plan="$chosen_plan"
fused_plan_mb="$chosen_mb"
run_braid braid "$plans_tsv" "$braid_mb" none "$out/braid" 100
plan="$chosen_plan"
plan_mb="$chosen_mb"

# --- 4. GEMM ceiling ---------------------------------------------------------
gemm_mb=$(( plan_mb > fused_plan_mb ? plan_mb : fused_plan_mb ))
gemm_tokens=$(( (gemm_mb > 0 ? gemm_mb : 8) * ${seq_len:-2048} ))
if skipped gemm; then record gemm skipped null 0 "--skip"; else
  run_stage gemm 40 "$out/logs/gemm.log" "$python" "$here/gemm_ceiling.py" --spec "$spec" \
    --tokens "$gemm_tokens" --out "$out/gemm.json" || true
fi

# --- 5, 7. PyTorch -----------------------------------------------------------
torch_stage() { # MODE CAP
  local mode="$1" cap="$2"
  if skipped "$mode"; then record "torch-$mode" skipped null 0 "--skip"; return; fi
  run_stage "torch-$mode" "$cap" "$out/torch/$mode.log" "$python" "$here/torch_llama.py" \
    --spec "$spec" --mode "$mode" --micro-batch "$torch_mb" --warmup 3 --steps 10 \
    --time-limit 20 --out "$out/torch/$mode.json" || true
}
torch_stage compile 170

# --- 6. Flash attention against SDPA ------------------------------------------
# The attention shapes of the model (heads, head size) at the spec's
# sequence length and twice it; both sides in one stage.
heads="$(sed -n 's/^ *num_heads: *\([0-9]*\).*/\1/p' "$spec" | head -n 1)"
hidden="$(sed -n 's/^ *hidden_size: *\([0-9]*\).*/\1/p' "$spec" | head -n 1)"
heads="${heads:-16}"
head_dim=$(( ${hidden:-2048} / heads ))
flash_seqs="${seq_len:-2048},$(( ${seq_len:-2048} * 2 ))"
if skipped flash; then
  record flash skipped null 0 "--skip"
elif [ ! -x "$flash_bench" ]; then
  record flash failed null 0 "no braid_flash_attention_bench at $flash_bench"
else
  printf '{"batch":%s,"seqs":"%s","heads":%s,"head_dim":%s}\n' "$flash_batch" "$flash_seqs" \
    "$heads" "$head_dim" > "$out/flash/shapes.json"
  run_stage flash 75 "$out/flash/flash.log" bash "$here/flash_vs_sdpa.sh" "$flash_bench" \
    "$python" "$out/flash" "$flash_batch" "$flash_seqs" "$heads" "$head_dim" || true
fi

torch_stage eager 60
torch_stage eager-sdpa 40

# --- 8. Braid's kernel profile -----------------------------------------------
profile_plan="${fused_plan:-$plan}"
if skipped profile || [ -z "$profile_plan" ] || [ ! -x "$braid_run" ]; then
  record braid-profile skipped null 0 "no plan, no braid-run or --skip"
else
  echo "$profile_plan" > "$out/braid/profile-plan.txt"
  make_tokens "$(( fused_plan_mb > 0 ? fused_plan_mb : plan_mb ))"
  run_stage braid-profile 40 "$out/braid/profile.log" bash "$here/braid_step.sh" "$braid_run" \
    "$profile_plan" "$out/work/tokens.u16" off --profile --steps 6 || true
fi

# --- Report ------------------------------------------------------------------
"$python" "$here/report.py" "$out" --spec "$spec" || {
  echo "run.sh: the report failed; stages:" >&2
  cat "$out/stages.jsonl" >&2
}
