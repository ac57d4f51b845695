#!/usr/bin/env bash
# Builds a Release bundle for a GPU host: the CLI, the GPU test binaries, the
# evaluator benchmark and the engine example (bench/layer_vs_torch.py runs
# it), with libksearch and the non-system shared libraries
# they need beside them (RPATH $ORIGIN). NVRTC comes from the host's CUDA
# toolkit (/usr/local/cuda/lib64): it is too large to carry.
#
#   scripts/gpu-bundle.sh [OUT_DIR]      (default: .gpu-bundle)
# then on the GPU host, from the root of a ksearch repository (any path):
#   OUT_DIR/run-gpu-tests.sh
# The tests read their data from $KSEARCH_TEST_SOURCE_DIR when set, else from
# the repository beside the bundle, else from the current folder
# (docs/gpu-testing.md).
# It builds in .gpu-build (Release); KSEARCH_BUNDLE_BUILD_DIR names another
# build folder to reuse (its build type kept), e.g. the tests' build/: the
# host code's optimisation level does not change a kernel's time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.gpu-bundle}
build=${KSEARCH_BUNDLE_BUILD_DIR:-$root/.gpu-build}
build_type=Release
if [[ -n ${KSEARCH_BUNDLE_BUILD_DIR:-} ]]; then
  build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
  build_type=${build_type:-Release}
fi
"$root/scripts/install-deps.sh" --tests >/dev/null
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="$build_type" -DKSEARCH_BUILD_EXAMPLES=ON \
      '-DCMAKE_BUILD_RPATH=$ORIGIN;/usr/local/cuda/lib64' >/dev/null
# Every gpu-labelled test binary (tests/CMakeLists.txt lists them in
# gpu-tests.txt), the CLI, the worker, the compile helper, the compiler tests
# (the confinement on the GPU host) and the GPU benchmarks.
cmake --build "$build" -j"$(nproc)" --target ksearch_cli ksearch_worker ksearch_compile \
      ksearch_gpu_test_binaries ksearch_cuda_tests ksearch_bench_eval ksearch_bench_worker \
      ksearch_bench_queue example_engine_autotune
rm -rf "$out"
mkdir -p "$out"
while read -r binary; do cp "$binary" "$out/"; done < "$build/gpu-tests.txt"
cp "$build/tools/ksearch/ksearch" "$build/bench/ksearch_bench_eval" \
   "$build/tools/worker/ksearch-worker" "$build/tools/compile/ksearch-compile" \
   "$build/tests/cuda/ksearch_cuda_tests" \
   "$build/bench/worker/ksearch_bench_worker" "$build/bench/queue/ksearch_bench_queue" \
   "$build/examples/example_engine_autotune" "$out/"
cp -L "$build/lib/libksearch.so.0.1" "$out/"
for lib in libboost_json.so.1.81.0 libsimdjson.so.14 libhiredis.so.0.14; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$out/"
done
strip --strip-unneeded "$out"/*
# The GPU host has no Redis: bench/queue/gpu_compare.sh runs this one, with
# the libraries it links beside it, used only where the host lacks them.
mkdir -p "$out/redis/lib"
cp -L /usr/bin/redis-server "$out/redis/"
for lib in $(ldd /usr/bin/redis-server | awk '$3 ~ /^\// {print $3}'); do
  case $(basename "$lib") in libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*) ;; *) cp -L "$lib" "$out/redis/lib/" ;; esac
done
cp "$root/bench/queue/gpu_compare.sh" "$out/"
cp "$root/scripts/run-gpu-tests.py" "$out/"
sed 's|.*/||' "$build/gpu-tests.txt" > "$out/gpu-tests.txt"
cat > "$out/run-gpu-tests.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every GPU-labelled test of this bundle (run-gpu-tests.py: fatal-fault
# tests each in a process of its own) and prints one pass/fail count.
here=$(cd "$(dirname "$0")" && pwd)
export KSEARCH_CACHE_DIR=${KSEARCH_CACHE_DIR:-/tmp/ksearch-cache}
export KSEARCH_WORKER=${KSEARCH_WORKER:-$here/ksearch-worker}
# The tests' data (problems/, tests/*/data): the repository beside the bundle
# (the path compiled into the tests is the build machine's), else the current
# folder when it is a ksearch repository (the bundle copied elsewhere).
if [[ -z ${KSEARCH_TEST_SOURCE_DIR:-} ]]; then
  if [[ -d $here/../tests/eval/data ]]; then
    KSEARCH_TEST_SOURCE_DIR=$(cd "$here/.." && pwd)
  elif [[ -d $PWD/tests/eval/data ]]; then
    KSEARCH_TEST_SOURCE_DIR=$PWD
  else
    echo "run-gpu-tests: no ksearch repository beside the bundle or here; set KSEARCH_TEST_SOURCE_DIR" >&2
    exit 2
  fi
fi
export KSEARCH_TEST_SOURCE_DIR
export KSEARCH_PROBLEMS_DIR=${KSEARCH_PROBLEMS_DIR:-$KSEARCH_TEST_SOURCE_DIR/problems}
echo "run-gpu-tests: test data from $KSEARCH_TEST_SOURCE_DIR"
# The compile confinement on this host first (its tests skip, naming the
# reason, without Landlock), then every GPU test.
status=0
"$here/ksearch_cuda_tests" --gtest_brief=1 || status=1
python3 "$here/run-gpu-tests.py" --bundle "$here" "$@" || status=1
exit $status
RUN
chmod +x "$out/run-gpu-tests.sh"
du -sh "$out"
