#!/usr/bin/env bash
# The whole test suite from nothing: installs dependencies, builds, and runs
# ctest (unit tests, lit tests, end-to-end and numerics tests, fuzz-corpus
# replays). Tests that need data read ../shared/data beside the checkout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${BRAID_TEST_JOBS:-$(nproc)}"
