#!/usr/bin/env bash
# Builds ksearch and runs its test suite (the README's test command).
# GPU tests skip with the reason where no CUDA driver is present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KSEARCH_BUILD_DIR:-$root/build}
echo "test.sh: checking the build and test dependencies (scripts/install-deps.sh --tests)"
"$root/scripts/install-deps.sh" --tests
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
echo "test.sh: configuring the build in $build"
# The tests, examples and benchmarks on: run.sh may have configured the same
# folder without them.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKSEARCH_BUILD_TESTS=ON \
      -DKSEARCH_BUILD_EXAMPLES=ON -DKSEARCH_BUILD_BENCH=ON "${launcher[@]}" >/dev/null
echo "test.sh: building everything (the first build takes a while)"
cmake --build "$build" -j"$(nproc)"
echo "test.sh: running the tests"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 300
