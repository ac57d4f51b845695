#!/usr/bin/env bash
# Candidates per minute through the local worker pool vs through Redis with
# `ksearch worker` processes, on one GPU host, for the same fixed softmax
# template points (docs/queue.md, docs/PERFORMANCE.md).
#
# In the GPU bundle (scripts/gpu-bundle.sh), from the repository root:
#   .gpu-bundle/gpu_compare.sh                  one worker on GPU 0
#   .gpu-bundle/gpu_compare.sh --gpus "0 1"     one worker per GPU vs a 2-GPU pool
# Without a GPU, to check the plumbing (fake GPU workers, no CUDA):
#   KSEARCH_BIN_DIR=build-queue bench/queue/gpu_compare.sh --fake
# Options: --gpus "0 1 …" (default "0"), --arch sm_NN (default: nvidia-smi's
# compute capability, else sm_90), --candidates N (default 64), --fake.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gpus="0"
arch=""
candidates=64
fake=()
while (($#)); do
  case $1 in
    --gpus) gpus=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --candidates) candidates=$2; shift 2 ;;
    --fake) fake=(--fake); shift ;;
    *) echo "gpu_compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# Binaries: beside this script (the bundle) or in KSEARCH_BIN_DIR (a build
# folder, where they sit in tools/ and bench/ subfolders).
find_bin() {
  local name=$1 dir=${KSEARCH_BIN_DIR:-$here}
  for p in "$dir/$name" "$dir/tools/ksearch/$name" "$dir/tools/worker/$name" "$dir/bench/queue/$name"; do
    if [[ -x $p && ! -d $p ]]; then echo "$p"; return; fi
  done
  echo "gpu_compare.sh: $name not found under $dir" >&2
  exit 1
}
ksearch=$(find_bin ksearch)
bench=$(find_bin ksearch_bench_queue)
export KSEARCH_WORKER=${KSEARCH_WORKER:-$(find_bin ksearch-worker)}
if [[ -z ${KSEARCH_PROBLEMS_DIR:-} ]]; then
  for d in "$here/../problems" "$here/../../problems"; do
    if [[ -f $d/softmax/problem.json ]]; then export KSEARCH_PROBLEMS_DIR=$(cd "$d" && pwd); break; fi
  done
fi

redis=$here/redis/redis-server
[[ -x $redis ]] || redis=$(command -v redis-server || true)
if [[ -z $redis ]]; then echo "gpu_compare.sh: no redis-server (bundle redis/ or PATH)" >&2; exit 1; fi
redis_env=()
# The bundled libraries only where the host lacks some: the host's own win.
if ldd "$redis" | grep -q "not found" && [[ -d $(dirname "$redis")/lib ]]; then
  redis_env=(env "LD_LIBRARY_PATH=$(dirname "$redis")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi

if [[ -z $arch ]]; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
  arch=sm_${cc:-90}
fi

tmp=$(mktemp -d /tmp/ksearch-gpu-compare-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

port=""
for p in $(seq 16379 16479); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n $port ]] || { echo "gpu_compare.sh: no free port in 16379..16479" >&2; exit 1; }
"${redis_env[@]}" "$redis" --port "$port" --bind 127.0.0.1 --dir "$tmp" --appendonly yes \
  --appendfsync everysec --save "" --daemonize no --logfile "$tmp/redis.log" &
pids+=($!)
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'PING\r\n' >&3 && read -r -t 1 reply <&3 &&
      [[ $reply == +PONG* ]]) 2>/dev/null; then break; fi
  sleep 0.1
done
url=redis://127.0.0.1:$port
echo "gpu_compare: Redis $url, arch $arch, GPUs: $gpus, $candidates candidates ${fake[*]}"

# One worker per GPU, each with a fresh compile cache of its own; the local
# pool gets a fresh one too, so that both paths compile everything.
for g in $gpus; do
  KSEARCH_CACHE_DIR=$tmp/cache-worker-$g "$ksearch" worker --queue "$url" --arch "$arch" \
    --gpus "$g" --name "gpu$g" "${fake[@]}" 2> "$tmp/worker-$g.log" &
  pids+=($!)
done
gpu_list=$(echo "$gpus" | tr ' ' ',')
status=0
KSEARCH_CACHE_DIR=$tmp/cache-local "$bench" --compare --url "$url" --arch "$arch" \
  --gpus "$gpu_list" --candidates "$candidates" "${fake[@]}" || status=$?
for g in $gpus; do
  echo "--- worker gpu$g log (last lines)"
  tail -3 "$tmp/worker-$g.log"
done
exit $status
