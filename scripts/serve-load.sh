#!/usr/bin/env bash
# Load and soak of `uvcl serve` on 127.0.0.1 (scripts/serve_load.py):
#   scripts/serve-load.sh                      60 s, 64 connections
#   scripts/serve-load.sh --duration 600       the 10-minute soak
#   scripts/serve-load.sh --json out.json ...  also write the report as JSON
# Builds tools/uvcl in $BUILD_DIR (default build) first. Every other argument
# goes to serve_load.py (--help lists them). Exit status 1 if an assertion
# failed (see docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then scripts/setup.sh "$build"; fi
ninja -C "$build" tools/uvcl >/dev/null
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/pocl-cache}
exec python3 scripts/serve_load.py --uvcl "$build/tools/uvcl" --progress 30 "$@"
