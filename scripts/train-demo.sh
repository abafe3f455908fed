#!/usr/bin/env bash
# The main job from nothing: installs dependencies, builds, compiles
# models/llama-tiny.pbtxt into a self-contained training binary and trains it
# on CPU, printing the loss as it falls.
#
# Corpus: ../shared/data/tinyshakespeare.txt when present; otherwise the
# license texts every Debian system ships in /usr/share/common-licenses, so
# nothing is downloaded.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BRAID_BUILD_DIR:-$root/build}"
out="$root/out"
steps="${BRAID_DEMO_STEPS:-300}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
mkdir -p "$out"

corpus="$root/../shared/data/tinyshakespeare.txt"
if [ ! -f "$corpus" ]; then
  corpus="$out/common-licenses.txt"
  cat /usr/share/common-licenses/* > "$corpus"
fi
echo "corpus: $corpus ($(wc -c < "$corpus") bytes)"

"$build/bin/braidc" "$root/models/llama-tiny.pbtxt" --emit=binary -o "$out/train-llama-tiny" --report-memory
"$out/train-llama-tiny" --data "$corpus" --steps "$steps" \
  --log "$out/llama-tiny.jsonl" --save-dir "$out/checkpoints"
