#!/usr/bin/env bash
# The sanitizer jobs of CI:
#   address  AddressSanitizer + UndefinedBehaviorSanitizer over the whole CPU
#            suite (build-asan/)
#   thread   ThreadSanitizer over the concurrent suites: worker pool, LLM
#            client and mock server, search loop, store, queue (build-tsan/)
# Every report aborts its test (-fno-sanitize-recover, halt_on_error), so a
# report is a failed test. Suppressions live in tests/sanitizers/, each with
# a comment naming the third-party code at fault.
#
#   scripts/sanitize.sh [address|thread ...]    (default: both)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${KSEARCH_JOBS:-$(nproc)}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

# The suites that run threads against each other carry the ctest label
# `concurrent` (tests/*/CMakeLists.txt); these are their binaries and the
# programs they start.
concurrent_targets=(ksearch_worker_tests ksearch_worker llm_unit_test llm_client_test
                    search_generators_test search_loop_test store_test store_resume_test
                    ksearch_queue_tests ksearch_queue_fake_worker)

configure() {  # DIR SANITIZERS
  cmake -S "$root" -B "$1" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-O1 -g" \
        -DKSEARCH_SANITIZE="$2" -DKSEARCH_BUILD_EXAMPLES=OFF -DKSEARCH_BUILD_BENCH=OFF \
        -DKSEARCH_BUILD_GPU_TESTS=OFF \
        "${launcher[@]}" >/dev/null
}

run_address() {
  local build=$root/build-asan
  configure "$build" address,undefined
  cmake --build "$build" -j"$jobs"
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=1:suppressions=$root/tests/sanitizers/asan.supp"
  export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$root/tests/sanitizers/ubsan.supp"
  echo "sanitize: address,undefined over the CPU suite"
  # The install test builds an outside consumer without the sanitizer
  # runtime, which an ASan libksearch cannot be loaded into: it tests the
  # package, not memory, and runs in the README's test command.
  (cd "$build" && ctest -L cpu -E '^install\.' -j"$jobs" --timeout 900 --output-on-failure)
}

run_thread() {
  local build=$root/build-tsan
  configure "$build" thread
  cmake --build "$build" -j"$jobs" --target "${concurrent_targets[@]}"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp"
  echo "sanitize: thread over the concurrent suites"
  (cd "$build" && ctest -L concurrent -j"$jobs" --timeout 900 --output-on-failure)
}

which=("$@")
if ((${#which[@]} == 0)); then which=(address thread); fi
for w in "${which[@]}"; do
  case $w in
    address) run_address ;;
    thread) run_thread ;;
    *) echo "sanitize.sh: unknown job '$w' (address or thread)" >&2; exit 2 ;;
  esac
done
