#!/usr/bin/env bash
# Runs each test of the concurrent suites (ctest label `concurrent`) N times
# under ThreadSanitizer and prints the failures per test. A test that fails
# once in N runs is a bug in the code or the test: find the cause.
#
#   tests/stress/stress.sh [RUNS] [GTEST_FILTER]     (default: 50, every test)
#
# Builds build-tsan/ through scripts/sanitize.sh's configuration when it is
# missing. Runs two test processes at a time; the table is printed last and
# the exit status is 1 when any run failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-50}
filter=${2:-*}
build=${KSEARCH_STRESS_BUILD:-$root/build-tsan}
jobs=${KSEARCH_JOBS:-2}
if [[ ! -f $build/CTestTestfile.cmake ]]; then
  echo "stress: no build in $build; building the TSan suites first" >&2
  "$root/scripts/sanitize.sh" thread >/dev/null || true
fi
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp"
logs=$(mktemp -d)
# "binary<TAB>Suite.Test" for every concurrent test ctest knows.
(cd "$build" && ctest -L concurrent --show-only=json-v1) | python3 -c '
import fnmatch, json, sys
flt = sys.argv[1]
for t in json.load(sys.stdin)["tests"]:
    cmd = t.get("command") or []
    # The gtest name (ctest names of parameterized tests carry "  # GetParam() = ...").
    name = next((a[len("--gtest_filter="):] for a in cmd if a.startswith("--gtest_filter=")), "")
    if name and fnmatch.fnmatch(name, flt):
        print(cmd[0] + "\t" + name)
' "$filter" > "$logs/tests.tsv"
count=$(wc -l < "$logs/tests.tsv")
echo "stress: $count tests x $runs runs under TSan ($build), $jobs at a time"
one() {  # binary name run logs
  local log="$4/$(printf '%s' "$2" | tr -c 'A-Za-z0-9._-' '_').$3.log"
  if ! (cd "$(dirname "$1")" && timeout 600 "$1" --gtest_filter="$2" >"$log" 2>&1); then
    echo "$2" >> "$4/failures"
  else
    rm -f "$log"
  fi
}
export -f one
while IFS=$'\t' read -r binary name; do
  for ((i = 1; i <= runs; i++)); do printf '%s\t%s\t%s\n' "$binary" "$name" "$i"; done
done < "$logs/tests.tsv" |
  xargs -P "$jobs" -d '\n' -n 1 bash -c 'IFS=$'"'"'\t'"'"' read -r b n i <<< "$0"; one "$b" "$n" "$i" '"$logs"
touch "$logs/failures"
printf '%-70s %s\n' "test" "failed/runs"
failed_any=0
while IFS=$'\t' read -r binary name; do
  n=$(grep -cxF "$name" "$logs/failures" || true)
  printf '%-70s %d/%d\n' "$name" "$n" "$runs"
  ((n > 0)) && failed_any=1
done < "$logs/tests.tsv"
if ((failed_any)); then
  echo "stress: failures; logs of failed runs in $logs"
  exit 1
fi
echo "stress: no failures in $((count * runs)) runs"
rm -rf "$logs"
