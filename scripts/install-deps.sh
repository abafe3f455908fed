#!/usr/bin/env bash
# Installs the Debian 12 packages Braid builds and tests with. Safe to run
# again: packages already present are skipped.
# Pass --bench to add what the benchmarks need (PyTorch), --fuzz for clang's
# libFuzzer.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git ca-certificates
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libprotobuf-dev protobuf-compiler libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libcli11-dev libopenmpi-dev openmpi-bin
)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(python3-torch python3-numpy) ;;
    --fuzz) packages+=(clang-14 libclang-rt-14-dev) ;;  # clang-22 does not link the target_clones kernels
    *) echo "install-deps.sh: unknown option '$arg' (use --bench, --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
