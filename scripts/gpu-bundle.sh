#!/usr/bin/env bash
# Builds a Release bundle for a GPU host: the CLI, the GPU test binaries and
# the evaluator benchmark, with libksearch and the non-system shared libraries
# they need beside them (RPATH $ORIGIN). NVRTC comes from the host's CUDA
# toolkit (/usr/local/cuda/lib64): it is too large to carry.
#
#   scripts/gpu-bundle.sh [OUT_DIR]      (default: .gpu-bundle)
# then on the GPU host, from the repository root:
#   OUT_DIR/run-gpu-tests.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.gpu-bundle}
build=$root/.gpu-build
"$root/scripts/install-deps.sh" >/dev/null
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKSEARCH_BUILD_EXAMPLES=OFF \
      '-DCMAKE_BUILD_RPATH=$ORIGIN;/usr/local/cuda/lib64' >/dev/null
cmake --build "$build" -j"$(nproc)" --target ksearch_cli ksearch_gpu_tests ksearch_problems_gpu_tests \
      ksearch_bench_eval ksearch_worker ksearch_worker_gpu_tests ksearch_bench_worker \
      ksearch_bench_queue ksearch_compile ksearch_cuda_tests
rm -rf "$out"
mkdir -p "$out"
cp "$build/tools/ksearch/ksearch" "$build/tests/eval/ksearch_gpu_tests" \
   "$build/tests/problems/ksearch_problems_gpu_tests" "$build/bench/ksearch_bench_eval" \
   "$build/tools/worker/ksearch-worker" "$build/tests/worker/ksearch_worker_gpu_tests" \
   "$build/tools/compile/ksearch-compile" "$build/tests/cuda/ksearch_cuda_tests" \
   "$build/bench/worker/ksearch_bench_worker" "$build/bench/queue/ksearch_bench_queue" "$out/"
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
cat > "$out/run-gpu-tests.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the GPU tests and the evaluator benchmark from this bundle. Each hang
# fatal-fault test runs in its own process: a dead context or a spinning
# kernel takes the process with it.
here=$(cd "$(dirname "$0")" && pwd)
export KSEARCH_PROBLEMS_DIR=${KSEARCH_PROBLEMS_DIR:-$here/../problems}
export KSEARCH_CACHE_DIR=${KSEARCH_CACHE_DIR:-/tmp/ksearch-cache}
status=0
# The compile confinement on this host (skips, naming the reason, without
# Landlock).
"$here/ksearch_cuda_tests" || status=1
"$here/ksearch_gpu_tests" --gtest_filter='-GpuEvaluatorFatal.*' || status=1
for t in OutOfBoundsWriteIsCrashed TrapIsCrashed InfiniteLoopTimesOut; do
  timeout 120 "$here/ksearch_gpu_tests" --gtest_filter="GpuEvaluatorFatal.$t" || status=1
done
"$here/ksearch_problems_gpu_tests" || status=1
# The worker pool: crashes and hangs in separate processes, so one run.
KSEARCH_WORKER="$here/ksearch-worker" timeout 900 "$here/ksearch_worker_gpu_tests" || status=1
exit $status
RUN
chmod +x "$out/run-gpu-tests.sh"
du -sh "$out"
