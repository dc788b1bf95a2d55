#!/usr/bin/env bash
# Shared by scripts/test, scripts/run-demo and scripts/package: install what is missing (Debian
# bookworm, as root), then (unless M3IDX_SETUP_ONLY_INSTALL=1) configure and build into build/
# with 2 jobs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# M3IDX_SANITIZE=address,undefined builds into build-sanitize/ with those sanitizers instead.
SANITIZE=${M3IDX_SANITIZE:-}
BUILD=${M3IDX_BUILD_DIR:-$ROOT/build${SANITIZE:+-sanitize}}

PACKAGES=(cmake ninja-build g++ python3 llvm-22-dev libmlir-22-dev mlir-22-tools lld-22 liblld-22-dev clang-22
          libzstd-dev zlib1g-dev
          nlohmann-json3-dev libfmt-dev googletest libgtest-dev libcli11-dev python3-numpy python3-pytest python3-venv
          ccache)

# ccache, in the checkout (.ccache/, git-ignored, so a fresh clone starts empty): build/ and
# build-package/ compile the same sources with the same flags, and paths relative to the checkout
# (CCACHE_BASEDIR) make their commands equal, so the package's build reuses the suite's objects.
export CCACHE_DIR=${CCACHE_DIR:-$ROOT/.ccache} CCACHE_BASEDIR=$ROOT CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}
M3IDX_COMPILER_LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "m3idx setup: installing ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then
      echo "m3idx setup: missing packages and not root; install them: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

build() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DM3IDX_SANITIZE="$SANITIZE" \
    "${M3IDX_COMPILER_LAUNCHER[@]}" >/dev/null
  cmake --build "$BUILD" -j "${M3IDX_JOBS:-2}"
}

install_missing
[[ ${M3IDX_SETUP_ONLY_INSTALL:-0} == 1 ]] || build
