#!/usr/bin/env bash
# Installs the Debian packages ksearch builds against. Idempotent: packages that
# are already present are left alone and apt is not touched at all.
set -euo pipefail

packages=(
  cmake g++ make pkg-config ccache
  libboost1.81-dev libboost-json1.81-dev
  libsimdjson-dev libssl-dev libsqlite3-dev
  libgtest-dev libgmock-dev libcli11-dev
  ca-certificates
  python3  # tools/problem_check, the static check of every problem folder (a test)
  redis-server libhiredis-dev  # the Redis work queue (lib/queue) and its tests
  chromium  # headless rendering check of the HTML report (tests/store)
  clang-14 libclang-rt-14-dev libfuzzer-14-dev  # scripts/fuzz.sh: libFuzzer with ASan and UBSan
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -x /usr/local/cuda/bin/nvcc && ! -f /usr/local/cuda/include/nvrtc.h ]]; then
  echo "install-deps: the CUDA 13 toolkit was not found in /usr/local/cuda (NVRTC headers and library are required)" >&2
  exit 1
fi
echo "install-deps: all dependencies present"
