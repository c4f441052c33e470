#!/usr/bin/env bash
# Installs what uvcl needs to build and test, if missing (Debian/Ubuntu),
# then configures the build directory. Usage: scripts/setup.sh [BUILD_DIR]
# (scripts/setup.sh --deps-only installs and stops).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

# Building the library and the uvcl program, and running it on PoCL (the CPU
# OpenCL). UVCL_SETUP=run (scripts/run-example.sh) stops there, and
# configures the build directory without tests, examples and benchmarks.
packages=(meson ninja-build g++ pkg-config python3 libuv1-dev libsimdjson-dev opencl-headers
          ocl-icd-libopencl1 pocl-opencl-icd libhttp-parser-dev)
meson_args=()
if [[ ${UVCL_SETUP:-} == run ]]; then
  meson_args=(-Dtests=disabled -Dexamples=disabled -Dbenchmarks=disabled)
else
  # The test suite: GoogleTest, curl (serve tests), Oclgrind (a second platform),
  # CMake (the find_package consumer test).
  packages+=(libgtest-dev libbenchmark-dev curl oclgrind cmake)
  # clang++ and libFuzzer (libclang_rt.fuzzer) for scripts/fuzz.sh, clang-tidy
  # and cppcheck for scripts/lint.sh: the test run uses both unless
  # UVCL_TEST_QUICK=1.
  if [[ ${UVCL_TEST_QUICK:-0} != 1 ]]; then packages+=(clang libclang-rt-14-dev clang-tidy cppcheck); fi
fi
# More packages a caller needs (scripts/bench.sh: pyopencl and matplotlib).
read -r -a extra <<<"${UVCL_SETUP_EXTRA:-}"
packages+=("${extra[@]}")
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

[ "$build" = --deps-only ] && exit 0

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=debugoptimized "${meson_args[@]}" >/dev/null
fi
ninja -C "$build" >/dev/null
