#!/usr/bin/env bash
# Installs the Debian 12 packages ksearch needs, then checks for the CUDA 13
# toolkit, which apt cannot install (README.md, "Before the first run").
#
#   scripts/install-deps.sh            what building and running ksearch needs
#   scripts/install-deps.sh --tests    that, and what only the tests need
#                                      (scripts/test.sh, .ci/run, gpu-bundle.sh)
#
# Idempotent: packages already present are left alone, and apt is not touched
# at all when nothing is missing. apt's own progress is shown.
set -euo pipefail

for_tests=0
case "${1:-}" in
  --tests) for_tests=1 ;;
  "") ;;
  *) echo "install-deps: unknown argument '$1' (expected --tests or nothing)" >&2; exit 2 ;;
esac

packages=(
  cmake g++ make pkg-config ccache
  libboost1.81-dev libboost-json1.81-dev
  libsimdjson-dev libssl-dev libsqlite3-dev libcli11-dev
  libhiredis-dev  # the Redis work queue (lib/queue)
  ca-certificates
)
if ((for_tests)); then
  packages+=(
    libgtest-dev libgmock-dev
    python3       # tools/problem_check, the static check of every problem folder (a test)
    redis-server  # the Redis queue's tests start their own server
    chromium      # headless rendering check of the HTML report (tests/store)
    clang-14 libclang-rt-14-dev libfuzzer-14-dev  # scripts/fuzz.sh: libFuzzer with ASan and UBSan
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  echo "install-deps: apt-get update"
  "${sudo_cmd[@]}" apt-get update
  echo "install-deps: apt-get install (a few minutes on a fresh machine)"
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# NVRTC and the CUDA headers come from NVIDIA's toolkit, not from Debian.
cuda=${CUDAToolkit_ROOT:-/usr/local/cuda}  # where CMake looks for it too
if [[ ! -f $cuda/include/nvrtc.h ]]; then
  cat >&2 <<EOF
install-deps: the CUDA 13 toolkit was not found in $cuda (ksearch needs its NVRTC
  library and headers to build). apt cannot install it from Debian: add NVIDIA's
  repository, then install the toolkit (README.md, "Before the first run"):
    wget https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
    sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt-get update
    sudo apt-get install cuda-toolkit-13-0
  (a toolkit installed elsewhere: set CUDAToolkit_ROOT to its folder).
EOF
  exit 1
fi
if ((for_tests)); then
  echo "install-deps: all dependencies present (the tests' included)"
else
  echo "install-deps: all dependencies present"
fi
