# Sourced by the CPU benchmark scripts (so far the expert-parallel ones):
# where the build and the data are, the options, and the checks made
# before anything runs.

bench_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bench_build="${BRAID_BUILD_DIR:-$bench_root/build}"
bench_data="${BRAID_DATA_DIR:-$bench_root/../shared/data}/tinyshakespeare.txt"

# bench_options NAME "FLAG:VAR ..." ARGS...: each `--FLAG VALUE` of ARGS
# sets the variable VAR; anything else stops NAME with the flags it takes.
bench_options() {
  local name="$1" flags="$2" pair var
  shift 2
  while [ $# -gt 0 ]; do
    var=""
    for pair in $flags; do
      [ "--${pair%%:*}" = "$1" ] && var="${pair#*:}"
    done
    if [ -z "$var" ] || [ $# -lt 2 ]; then
      echo "$name: unknown option or missing value '$1' (use$(for pair in $flags; do printf ' --%s' "${pair%%:*}"; done))" >&2
      exit 2
    fi
    printf -v "$var" '%s' "$2"
    shift 2
  done
}

# bench_compile DIR LAYOUT [BRAIDC ARGS...]: compiles DIR/LAYOUT.pbtxt into
# DIR/LAYOUT.plan, its memory report in DIR/LAYOUT.report (printed on
# failure, which stops the script).
bench_compile() {
  local dir="$1" layout="$2"
  shift 2
  "$bench_build/bin/braidc" "$dir/$layout.pbtxt" "$@" --report-memory \
    -o "$dir/$layout.plan" > "$dir/$layout.report" 2>&1 || {
    cat "$dir/$layout.report" >&2; exit 1; }
}

# Two ranks of one kernel thread each.
bench_mpi2=(mpirun --oversubscribe --bind-to none -x BRAID_NUM_THREADS=1 -np 2)

# bench_need_mpi_build NAME: braidc is built and mpirun is on the PATH.
bench_need_mpi_build() {
  [ -x "$bench_build/bin/braidc" ] || {
    echo "$1: no $bench_build/bin/braidc; build first (scripts/build.sh)" >&2; exit 1; }
  command -v mpirun > /dev/null || {
    echo "$1: needs mpirun (scripts/install-deps.sh installs Open MPI)" >&2; exit 1; }
  [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  return 0
}
