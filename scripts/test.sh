#!/usr/bin/env bash
# Runs the whole uvcl test suite: installs what is missing, builds, runs
# `meson test`, and ends with one line "N passed, N failed" counted from
# meson's results (meson-logs/testlog.json), per GoogleTest case.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
scripts/setup.sh "$build" || exit 1
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/pocl-cache}
meson test -C "$build" --no-rebuild --print-errorlogs "$@"
status=$?
python3 scripts/count_tests.py "$build/meson-logs/testlog.json" || status=1
exit $status
