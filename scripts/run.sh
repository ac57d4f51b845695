#!/usr/bin/env bash
# Builds ksearch and runs the main job: an offline tuning search on a built-in
# problem (softmax by default). Extra arguments go to `ksearch run`.
#   scripts/run.sh                      # ksearch run softmax
#   scripts/run.sh matmul --rounds 10
# Needs the NVIDIA driver and the CUDA 13 toolkit (README.md, "Before the first
# run"); installs the Debian packages the build needs, not the tests'. Each
# step says what it does; the first build takes several minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KSEARCH_BUILD_DIR:-$root/build}
echo "run.sh: checking the build dependencies (scripts/install-deps.sh)"
"$root/scripts/install-deps.sh"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
echo "run.sh: configuring the build in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKSEARCH_BUILD_TESTS=OFF \
      -DKSEARCH_BUILD_EXAMPLES=OFF -DKSEARCH_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
# ksearch_cli builds what the CLI starts with it: the GPU worker and the
# compile helper (tests/install checks that a build of this target has both).
echo "run.sh: building ksearch, its worker and its compile helper"
cmake --build "$build" -j"$(nproc)" --target ksearch_cli
problem=${1:-softmax}
shift || true
echo "run.sh: ksearch run $problem${*:+ $*}"
exec "$build/tools/ksearch/ksearch" run "$problem" "$@"
