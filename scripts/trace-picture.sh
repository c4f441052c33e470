#!/usr/bin/env bash
# Makes docs/img/trace.png: runs the showcase job (examples/showcase/fanout.json:
# three rounds of a fan-out to four kernels joined by one, then a checksum)
# with `uvcl run --trace`, then renders the Chrome trace JSON with
# scripts/trace_picture.py (matplotlib: installs python3-matplotlib with
# apt-get if no python3 here can import it).
# Usage: scripts/trace-picture.sh [BUILD_DIR]   (default build; builds tools/uvcl)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/build.ninja" ] || scripts/setup.sh "$build"
ninja -C "$build" tools/uvcl >/dev/null

py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import matplotlib" 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "trace-picture: installing python3-matplotlib" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null
  py=/usr/bin/python3
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# PoCL compiles each kernel's work-group function at its first launch (tens of
# ms, docs/architecture.md); a first run fills PoCL's kernel cache so that the
# traced run shows the commands, not the compiler.
export POCL_CACHE_DIR="$tmp/pocl-cache"
"$build/tools/uvcl" run examples/showcase/fanout.json >/dev/null
"$build/tools/uvcl" run examples/showcase/fanout.json --trace "$tmp/trace.json" >/dev/null
cp "$tmp/trace.json" docs/img/trace.json
"$py" scripts/trace_picture.py "$tmp/trace.json" docs/img/trace.png \
  --title "uvcl run --trace examples/showcase/fanout.json (PoCL)"
