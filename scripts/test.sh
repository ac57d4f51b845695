#!/usr/bin/env bash
# Builds ksearch and runs its test suite (the README's test command).
# GPU tests skip with the reason where no CUDA driver is present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KSEARCH_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 300
