#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on) and runs each for a bounded time:
#   expression  the plan/constraint expression evaluator
#   plan        the launch-plan parser and resolver
#   problem     the problem.json loader (parse + Validate)
# Prints one line per target and exits non-zero when a target crashes, hangs,
# runs out of memory or does not build; the input that did it is kept in
# build-fuzz/crashes/TARGET/ (turn it into a test in tests/core).
#
#   scripts/fuzz.sh                          # every target, 60 s each
#   KSEARCH_FUZZ_SECONDS=10 scripts/fuzz.sh  # shorter
#   scripts/fuzz.sh plan expression          # some targets
#
# Environment: KSEARCH_FUZZ_SECONDS (per target, default 60),
# KSEARCH_FUZZ_BUILD_DIR (default build-fuzz/ in the source tree),
# KSEARCH_FUZZ_CXX (default clang++-14, else clang++).
# The checked-in seeds in tests/fuzz/corpus/TARGET are only read; what the
# fuzzer learns goes to build-fuzz/corpus/TARGET and is reused by later runs.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${KSEARCH_FUZZ_SECONDS:-60}
build=${KSEARCH_FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=("$@")
((${#targets[@]})) || targets=(expression plan problem)

cxx=${KSEARCH_FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
if [[ -z $cxx ]]; then
  echo "fuzz: clang++ not found (scripts/install-deps.sh installs clang-14 and libFuzzer)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

mkdir -p "$build"
if ! { cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" &&
       cmake --build "$build" -j "$(nproc)" --target "${targets[@]/%/_fuzz}"; } >"$build/build.log" 2>&1; then
  tail -n 30 "$build/build.log" >&2
  echo "fuzz: the targets did not build (log: $build/build.log)" >&2
  exit 1
fi

failed=0
for target in "${targets[@]}"; do
  dict=$root/tests/fuzz/json.dict
  [[ $target == expression ]] && dict=$root/tests/fuzz/expression.dict
  corpus=$build/corpus/$target
  crashes=$build/crashes/$target
  log=$build/$target.log
  mkdir -p "$corpus" "$crashes"
  # Standard input is /dev/null so that a problem naming "/dev/stdin" as a
  # source file reads nothing instead of waiting for a terminal.
  status=0
  UBSAN_OPTIONS=print_stacktrace=1 "$build/${target}_fuzz" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -dict="$dict" -artifact_prefix="$crashes/" -print_final_stats=1 \
    "$corpus" "$root/tests/fuzz/corpus/$target" </dev/null >"$log" 2>&1 || status=$?
  # A crash on the first input leaves no statistics: the greps may find nothing.
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2 || true)
  if ((status == 0)); then
    printf 'fuzz: %-10s ok     %s runs in %s s, %s coverage points, %s inputs in the corpus\n' \
      "$target" "${runs:-?}" "$seconds" "${coverage:-?}" "$(find "$corpus" -type f | wc -l)"
  else
    failed=1
    artifact=$(grep -o "Test unit written to .*" "$log" | tail -n 1 | sed 's/Test unit written to //' || true)
    printf 'fuzz: %-10s FAILED (exit %s) input: %s log: %s\n' "$target" "$status" \
      "${artifact:-none}" "$log"
  fi
done
exit "$failed"
