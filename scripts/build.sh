#!/usr/bin/env bash
# Configures and builds Braid into build/ (or $BRAID_BUILD_DIR) with Ninja.
# Extra arguments go to cmake's configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
jobs="${BRAID_JOBS:-$(nproc)}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "$@"
cmake --build "$build" -j "$jobs"
