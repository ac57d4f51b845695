#!/usr/bin/env bash
# The air-gapped workflow of the exchange provider (docs/llm.md), end to end
# on a GPU host, with the problem-scripted mock as the model:
#   1. run on the GPU until it waits for replies            (exit 9)
#   2. answer the request                                    (ksearch answer)
#   3. resume with the GPU hidden: the model's steps advance (exit 9), the
#      requests name the GPU the run was measured on; answer them; resume
#      again with the GPU hidden: it stops to be judged      (exit 10)
#   4. resume on the GPU: the implementations are judged, the next round's
#      request is written                                    (exit 9)
#   5. answer --watch beside a resume: the run ends with a correct kernel (exit 0)
# Prints one line per step and exits non-zero at the first that fails.
#
#   scripts/exchange-workflow.sh [KSEARCH]   (default: build/tools/ksearch/ksearch)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ksearch=${1:-$root/build/tools/ksearch/ksearch}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/k.db
xchg=$work/xchg
run=(softmax --dims rows=256,cols=4096 --strategy branch --llm "exchange:$xchg" --exchange-wait 2
     --rounds 2 --seeds 1 --ideas 2 --branches 2 --db "$db")
answer=("$ksearch" answer "$xchg" --llm mock --problem softmax)

step() {  # step NAME EXPECTED-EXIT COMMAND…
  local name=$1 expected=$2
  shift 2
  set +e
  "$@" >"$work/log" 2>&1
  local code=$?
  set -e
  if [[ $code != "$expected" ]]; then
    echo "FAIL $name: exit $code, expected $expected"
    tail -20 "$work/log"
    exit 1
  fi
  echo "ok   $name (exit $code)"
}
pending() { comm -23 <(ls "$xchg/requests" | sed 's/\.json$//' | sort) \
                     <(ls "$xchg/replies" | sed 's/\.\(json\|txt\)$//' | sort) | wc -l; }

step "run on the GPU until it waits" 9 "$ksearch" run "${run[@]}"
[[ $(pending) == 1 ]] || { echo "FAIL: expected 1 pending request, found $(pending)"; exit 1; }
step "answer the idea request" 0 "${answer[@]}"
step "resume without a GPU: implementation requests" 9 env CUDA_VISIBLE_DEVICES= "$ksearch" resume 1 --db "$db"
[[ $(pending) == 4 ]] || { echo "FAIL: expected 4 pending requests, found $(pending)"; exit 1; }
device=$("$ksearch" show 1 --db "$db" --json | grep -o '"device_name":"[^"]*"' | head -1 | cut -d'"' -f4)
if [[ -n $device ]] && ! grep -q "$device" "$xchg"/requests/branch-*.json; then
  echo "FAIL: the requests written without the GPU do not name $device"; exit 1
fi
step "answer the implementation requests" 0 "${answer[@]}"
step "resume without a GPU: stops to be judged" 10 env CUDA_VISIBLE_DEVICES= "$ksearch" resume 1 --db "$db"
step "resume on the GPU: judged, next round asked" 9 "$ksearch" resume 1 --db "$db"
"${answer[@]}" --watch --poll-seconds 0.2 >"$work/watch.log" 2>&1 &
watcher=$!
step "resume beside answer --watch: the run ends" 0 "$ksearch" resume 1 --db "$db" --exchange-wait 0
kill -TERM "$watcher"
wait "$watcher" || { echo "FAIL: answer --watch ended with exit $?"; cat "$work/watch.log"; exit 1; }
echo "ok   answer --watch stopped cleanly; $(ls "$xchg/requests" | wc -l) requests, all answered"
