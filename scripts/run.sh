#!/usr/bin/env bash
# Builds ksearch and runs the main job: an offline tuning search on a built-in
# problem (softmax by default). Extra arguments go to `ksearch run`.
#   scripts/run.sh                      # ksearch run softmax
#   scripts/run.sh matmul --rounds 10
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KSEARCH_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh" >/dev/null
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target ksearch_cli >/dev/null
problem=${1:-softmax}
shift || true
exec "$build/tools/ksearch/ksearch" run "$problem" "$@"
