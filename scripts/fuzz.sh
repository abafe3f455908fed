#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and
# runs each for a while, two at a time. Crashes land in fuzz-artifacts/.
#
#   scripts/fuzz.sh [SECONDS per target, default 600] [target ...]
#
# Targets: spec_fuzzer braid_plan_loader_fuzzer braid_safetensors_fuzzer
# braid_token_data_fuzzer braid_resume_fuzzer (all by default).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BRAID_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(spec_fuzzer braid_plan_loader_fuzzer braid_safetensors_fuzzer braid_token_data_fuzzer braid_resume_fuzzer)

clang=""
for c in clang-14 clang clang-22; do command -v "$c" >/dev/null && { clang="$c"; break; }; done
[ -n "$clang" ] || { echo "fuzz.sh: no clang; run scripts/install-deps.sh --fuzz" >&2; exit 1; }
clangxx="${clang/clang/clang++}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$clang" -DCMAKE_CXX_COMPILER="$clangxx" \
  -DBRAID_FUZZ=ON -DBRAID_BUILD_COMPILER=OFF -DBRAID_BUILD_BENCH=OFF \
  -DBRAID_ENABLE_CUDA=OFF >/dev/null # the targets read files on the host
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

artifacts="$root/fuzz-artifacts"
mkdir -p "$artifacts"
corpus_of() {
  case "$1" in
    spec_fuzzer) echo "$root/test/fuzz/spec/corpus" ;;
    braid_plan_loader_fuzzer) echo "$root/test/fuzz/runtime/corpus/plan_loader" ;;
    braid_safetensors_fuzzer) echo "$root/test/fuzz/runtime/corpus/safetensors" ;;
    braid_token_data_fuzzer) echo "$root/test/fuzz/runtime/corpus/token_data" ;;
    braid_resume_fuzzer) echo "$root/test/fuzz/runtime/corpus/resume" ;;
    *) echo "fuzz.sh: unknown target '$1'" >&2; exit 2 ;;
  esac
}
run() {
  local t="$1" work="$artifacts/$1-corpus"
  mkdir -p "$work"
  local extra=()
  [ "$t" = spec_fuzzer ] && extra+=("-dict=$root/test/fuzz/spec/spec.dict")
  "$build/bin/$t" "$work" "$(corpus_of "$t")" -max_total_time="$seconds" \
    -artifact_prefix="$artifacts/$t-" -print_final_stats=1 "${extra[@]}" \
    > "$artifacts/$t.log" 2>&1 && echo "$t: ${seconds}s, no crash ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$artifacts/$t.log" | grep -o '[0-9]*$') runs)" \
    || { echo "$t: FAILED, see $artifacts/$t.log"; return 1; }
}
status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  run "${targets[$i]}" & p1=$!
  p2=""
  if [ $((i + 1)) -lt ${#targets[@]} ]; then run "${targets[$((i + 1))]}" & p2=$!; fi
  wait $p1 || status=1
  [ -z "$p2" ] || wait $p2 || status=1
done
exit $status
