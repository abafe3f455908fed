#!/usr/bin/env bash
# Builds Braid with CUDA (Release, sm_90) on this machine and packs what a GPU
# machine without the compiler toolchain needs to run the GPU tests and the
# GPU benchmark (test/bench/gpu/run.sh) into one folder, out/gpu-bundle/:
#
#   bundle.env        the build's absolute paths, revision and date
#   payload.tar.xz    build/bin/: braid-run, braid_flash_attention_bench and
#                     every test binary labelled `gpu` (debug sections
#                     stripped), a braidc stand-in that serves plans compiled
#                     here (plan-cache/), data/ (the test corpus), lib/ (this
#                     machine's libstdc++, used there only if the system's is
#                     too old)
#   plans/            the 1B benchmark plans: unfused (--fusion=none,
#                     micro-batches 1 to 32, plans.tsv) and fused
#                     (--fusion=all, micro-batches 1 to 48, plans-fused.tsv);
#                     each .tsv holds micro-batch, arena bytes, file
#   tests.tsv         the GPU tests as ctest would run them
#   ldd.txt           what each binary loads at run time
#
# Then run on the GPU machine, from the repository root:
#   bash scripts/gpu-check.sh out/gpu-bundle
#
#   scripts/gpu-bundle.sh [--build-dir DIR] [--out DIR] [--jobs N] [--no-build]
#
# --build-dir: the CUDA build to make or reuse (default: build/ when it is a
# Release CUDA build for sm_90, else build-gpu/); --no-build packs what the
# build already holds. Exits non-zero, saying why, when the CUDA build cannot
# be configured or built.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build=""
bundle="$root/out/gpu-bundle"
jobs="${BRAID_JOBS:-$(nproc)}"
do_build=1
limit_bytes=$((64 * 1024 * 1024))

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out) bundle="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "gpu-bundle.sh: $*" >&2; exit 1; }
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$2/CMakeCache.txt" 2>/dev/null | head -n 1; }

# A build dir is usable when it is a Release build with CUDA for sm_90.
cuda_release_build() {
  [ -f "$1/CMakeCache.txt" ] || return 1
  [ "$(cache_value CMAKE_BUILD_TYPE "$1")" = Release ] || return 1
  [ "$(cache_value BRAID_ENABLE_CUDA "$1")" != OFF ] || return 1
  [ -n "$(cache_value CMAKE_CUDA_COMPILER "$1")" ] || return 1
  case ";$(cache_value CMAKE_CUDA_ARCHITECTURES "$1");" in
    *";90;"*|*";90a;"*|*";90-real;"*|*";90a-real;"*) return 0 ;;
    *) return 1 ;;
  esac
}

command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  die "no nvcc here: the CUDA backend cannot be built on this machine"
if [ -z "$build" ]; then
  if cuda_release_build "$root/build"; then build="$root/build"; else build="$root/build-gpu"; fi
fi
mkdir -p "$build"
build="$(cd "$build" && pwd)"
log="$build/gpu-bundle.log"
: > "$log"
echo "gpu-bundle.sh: build $build (log: $log)"

# --- Configure and build -----------------------------------------------------
if [ "$do_build" -eq 1 ]; then
  if ! cuda_release_build "$build" || [ ! -f "$build/build.ninja" ]; then
    if [ -f "$build/CMakeCache.txt" ] && ! cuda_release_build "$build"; then
      die "$build is not a Release CUDA build for sm_90; pass --build-dir to another folder"
    fi
    echo "gpu-bundle.sh: configuring (Release, CUDA, sm_90)"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
      -DBRAID_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >> "$log" 2>&1 ||
      { tail -n 15 "$log" >&2
        die "configuring the CUDA build failed (above; whole log in $log): the CUDA backend does not configure yet"; }
  fi
fi
cuda_release_build "$build" || die "$build is not a configured Release CUDA build for sm_90"

# The GPU tests, as ctest knows them. Before they are built ctest lists no
# command, and each test is named after its target (braid_add_gpu_test).
tests_json="$build/gpu-tests.json"
list_gpu_tests() {
  (cd "$build" && ctest -L gpu --show-only=json-v1) > "$tests_json" 2>> "$log" ||
    die "ctest cannot list the GPU tests of $build (log: $log)"
}
list_gpu_tests
mapfile -t test_targets < <(python3 - "$tests_json" <<'EOF'
import json, os, sys
for t in json.load(open(sys.argv[1]))["tests"]:
    print(os.path.basename(t["command"][0]) if t.get("command") else t["name"])
EOF
)
[ "${#test_targets[@]}" -gt 0 ] || echo "gpu-bundle.sh: warning: $build has no test labelled gpu" >&2

if [ "$do_build" -eq 1 ]; then
  echo "gpu-bundle.sh: building braidc braid-run braid_flash_attention_bench ${test_targets[*]} (-j $jobs)"
  cmake --build "$build" -j "$jobs" --target braidc braid-run braid_flash_attention_bench \
    "${test_targets[@]}" >> "$log" 2>&1 ||
    { grep -E "error|Error|undefined reference" "$log" | tail -n 15 >&2
      die "building the CUDA targets failed (above; whole log in $log): the CUDA backend does not build or link yet"; }
fi
for t in braidc braid-run braid_flash_attention_bench "${test_targets[@]}"; do
  [ -x "$build/bin/$t" ] || die "$build/bin/$t is missing; build it first (or drop --no-build)"
done
list_gpu_tests
# braid-run must carry the CUDA backend: the static CUDA runtime and the name
# of the cuBLASLt library it loads.
grep -qa "libcublasLt" "$build/bin/braid-run" ||
  die "$build/bin/braid-run has no CUDA backend (no cuBLASLt loader in it)"

# --- Runtime dependencies ----------------------------------------------------
# Allowed: the C and C++ runtime. Anything else (libcudart, libcublas, a
# shared protobuf or abseil) would be missing on the GPU machine.
rm -rf "$bundle"
mkdir -p "$bundle/plans" "$bundle/stage/build/bin" "$bundle/stage/plan-cache" \
  "$bundle/stage/data" "$bundle/stage/lib"
bad=""
for t in braid-run braid_flash_attention_bench "${test_targets[@]}"; do
  echo "== $t" >> "$bundle/ldd.txt"
  ldd "$build/bin/$t" >> "$bundle/ldd.txt" 2>&1 || true
  while read -r lib _; do
    case "$lib" in
      statically|linux-vdso.so.*|/lib64/ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|libdl.so.*|libpthread.so.*|librt.so.*) ;;
      *) bad="$bad $t:$lib" ;;
    esac
  done < <(ldd "$build/bin/$t" 2>/dev/null | sed 's/^[[:space:]]*//')
done
[ -z "$bad" ] || die "binaries load libraries the GPU machine may lack:$bad (see $bundle/ldd.txt)"
newest() { { objdump -T "$build/bin/braid-run" | grep -oE "$1" | sort -uV | tail -n 1; } || true; }
echo "braid-run needs at most $(newest 'GLIBC_[0-9.]+') and $(newest 'GLIBCXX_[0-9.]+')" \
  >> "$bundle/ldd.txt"
libstdcxx="$(ldd "$build/bin/braid-run" | sed -n 's/.*libstdc++.so.6 => \([^ ]*\).*/\1/p')"
[ -z "$libstdcxx" ] || cp -L "$libstdcxx" "$bundle/stage/lib/libstdc++.so.6"

# --- Binaries ----------------------------------------------------------------
for t in braid-run braid_flash_attention_bench "${test_targets[@]}"; do
  objcopy --strip-debug "$build/bin/$t" "$bundle/stage/build/bin/$t"
done

# The tests' own build-time files (plans, weights, token files), if any.
while IFS= read -r -d '' f; do
  rel="${f#"$build"/}"
  mkdir -p "$bundle/stage/build/$(dirname "$rel")"
  cp "$f" "$bundle/stage/build/$rel"
done < <(find "$build/test" -type f \( -name '*.plan' -o -name '*.safetensors' \
  -o -name '*.u16' -o -name '*.i32' \) -size -4M -print0 2>/dev/null)

data_dir="$(cache_value BRAID_DATA_DIR "$build")"
[ -f "$data_dir/tinyshakespeare.txt" ] && cp "$data_dir/tinyshakespeare.txt" "$bundle/stage/data/"

# --- Plans -------------------------------------------------------------------
braidc="$build/bin/braidc"
spec="$root/test/bench/specs/gpu-llama-1b.pbtxt"
# The micro-batches of test/bench/gpu/run.sh. Fused plans keep no
# [B, H, S, S] attention probabilities (flash attention), so larger ones fit.
unfused_mbs="1 2 4 8 12 16 24 32"
fused_mbs="1 2 4 8 12 16 20 24 28 32 40 48"
# compile_plans FUSION TSV NAME MICRO-BATCHES...
compile_plans() {
  local fusion="$1" tsv="$2" name="$3" mb s arena
  shift 3
  : > "$tsv"
  for mb in "$@"; do
    s="$bundle/plans/$name-mb$mb.pbtxt"
    sed -e "s/^\( *micro_batch_size:\) .*/\1 $mb/" -e "s/^\( *global_batch_size:\) .*/\1 $mb/" \
      "$spec" > "$s"
    "$braidc" "$s" --emit=plan --report-memory --fusion="$fusion" \
      -o "$bundle/plans/$name-mb$mb.plan" 2> "$bundle/plans/$name-mb$mb.memory.txt" ||
      die "braidc --fusion=$fusion failed on $s: $(tail -n 3 "$bundle/plans/$name-mb$mb.memory.txt")"
    arena="$(sed -n 's/^ *arena *\([0-9]*\) bytes.*/\1/p' "$bundle/plans/$name-mb$mb.memory.txt")"
    printf '%s\t%s\t%s\n' "$mb" "$arena" "$name-mb$mb.plan" >> "$tsv"
  done
}
# shellcheck disable=SC2086
compile_plans none "$bundle/plans/plans.tsv" gpu-llama-1b $unfused_mbs
# shellcheck disable=SC2086
compile_plans all "$bundle/plans/plans-fused.tsv" gpu-llama-1b-fused $fused_mbs

# Plans for the braidc stand-in, keyed by the spec's sha256: every spec of
# models/ and test/ that compiles.
: > "$bundle/stage/plan-cache/index.tsv"
while IFS= read -r -d '' s; do
  key="$(sha256sum "$s" | cut -c1-64)"
  if "$braidc" "$s" -o "$bundle/stage/plan-cache/$key.plan" 2>/dev/null; then
    printf '%s\t%s\n' "$key" "${s#"$root"/}" >> "$bundle/stage/plan-cache/index.tsv"
  else
    rm -f "$bundle/stage/plan-cache/$key.plan"
  fi
done < <(find "$root/models" "$root/test" -name '*.pbtxt' -not -path '*/corpus/*' -print0)

cat > "$bundle/stage/build/bin/braidc" <<'EOF'
#!/usr/bin/env bash
# braidc stand-in on a machine without the compiler: serves the plan that
# scripts/gpu-bundle.sh compiled for the same spec text (plan-cache/, keyed by
# the spec's sha256). Takes `braidc SPEC [--emit=plan] -o PLAN`.
here="$(cd "$(dirname "$0")" && pwd)"
cache="$here/../../plan-cache"
spec="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--o) out="$2"; shift 2 ;;
    -o=*|--o=*) out="${1#*=}"; shift ;;
    --emit=plan) shift ;;
    -*) echo "braidc (bundle stand-in): '$1' is not supported here; only 'braidc SPEC -o PLAN'" >&2; exit 2 ;;
    *) spec="$1"; shift ;;
  esac
done
if [ -z "$spec" ] || [ -z "$out" ]; then
  echo "braidc (bundle stand-in): usage: braidc SPEC -o PLAN" >&2; exit 2
fi
key="$(sha256sum "$spec" | cut -c1-64)"
if [ ! -f "$cache/$key.plan" ]; then
  echo "braidc (bundle stand-in): no plan was compiled ahead for $spec (sha256 $key);" \
    "scripts/gpu-bundle.sh compiles every spec under models/ and test/" >&2
  exit 1
fi
cp "$cache/$key.plan" "$out" && echo "braidc: wrote $out (compiled ahead by scripts/gpu-bundle.sh)" >&2
EOF
chmod +x "$bundle/stage/build/bin/braidc"

# --- Test list ---------------------------------------------------------------
python3 - "$tests_json" > "$bundle/tests.tsv" <<'EOF'
import json, sys
for t in json.load(open(sys.argv[1]))["tests"]:
    if not t.get("command"):
        sys.exit(f"gpu-bundle.sh: ctest has no command for {t['name']} (not built?)")
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = props.get("ENVIRONMENT", [])
    kind = "gtest" if "gtest" in open(t["command"][0], "rb").read().decode("latin-1") else "other"
    workdir = props.get("WORKING_DIRECTORY", ".")
    command = (["env", *env] if env else []) + t["command"]
    if any("\t" in x or "\n" in x for x in [t["name"], workdir, *command]):
        sys.exit(f"gpu-bundle.sh: test {t['name']} has a tab or newline in its command")
    print("\t".join([t["name"], kind, workdir, *command]))
EOF

# --- Pack --------------------------------------------------------------------
tar -C "$bundle/stage" -cJf "$bundle/payload.tar.xz" .
rm -rf "$bundle/stage"
{
  echo "BUNDLE_SOURCE_DIR='$root'"
  echo "BUNDLE_BINARY_DIR='$build'"
  echo "BUNDLE_DATA_DIR='$data_dir'"
  echo "BUNDLE_DESCRIBE='$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)'"
  echo "BUNDLE_CREATED='$(date -u +%Y-%m-%dT%H:%M:%SZ)'"
  echo "BUNDLE_CUDA_ARCHITECTURES='$(cache_value CMAKE_CUDA_ARCHITECTURES "$build")'"
  echo "BUNDLE_NVCC='$(cache_value CMAKE_CUDA_COMPILER "$build")'"
} > "$bundle/bundle.env"

bundle_bytes="$(du -sb "$bundle" | cut -f1)"
tree_bytes="$(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')"
echo "gpu-bundle.sh: $bundle: $((bundle_bytes / 1048576)) MiB" \
  "(working tree $((tree_bytes / 1048576)) MiB; together at most 64 MiB travel)"
[ $((bundle_bytes + tree_bytes)) -le "$limit_bytes" ] ||
  die "bundle and working tree together exceed 64 MiB"
case "$bundle" in
  "$root"/*) rel="${bundle#"$root"/}" ;;
  *) rel="$bundle"; echo "gpu-bundle.sh: warning: $bundle is outside the repository; carry needs a path inside it" >&2 ;;
esac
cat <<EOF

Device check (one call, about 8 minutes):
  run(carry=["$rel"], timeout_s=560,
      command="bash scripts/gpu-check.sh $rel")
Results come back from \$OUT: summary.txt, summary.json, details.tar.gz, console.log.
EOF
