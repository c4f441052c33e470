#!/usr/bin/env bash
# Installs what uvcl needs to build and test, if missing (Debian/Ubuntu),
# then configures the build directory. Usage: scripts/setup.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

packages=(meson ninja-build g++ pkg-config python3 libuv1-dev libsimdjson-dev opencl-headers
          ocl-icd-libopencl1 pocl-opencl-icd libgtest-dev libbenchmark-dev
          libhttp-parser-dev curl oclgrind)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "uvcl setup: installing ${missing[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=debugoptimized >/dev/null
fi
ninja -C "$build" >/dev/null
