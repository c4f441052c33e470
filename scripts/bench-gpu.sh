#!/usr/bin/env bash
# The GPU column in one call, for a machine where GPU time is scarce: the
# whole suite (figure 11 over the three recorded jobs), then each figure
# that has a driver table again through the timing library (host time per
# OpenCL entry point, both sides), then figure 5 with every read submitted
# on its own (opencl.read_burst_us 0) to compare with the suite's default,
# then figures 5 and 6 twice more: their ratios move from run to run.
#
#   scripts/bench-gpu.sh OUT DEVICE [TIMING_LIB] [-- uvcl_bench command...]
#
# Writes OUT/h200.json, OUT/h200-cl-timing.json, OUT/h200-f5-burst0.json,
# OUT/h200-f56-again-{1,2}.json and one log of them all, OUT/bench-gpu.log
# (six files: a machine that returns few files per call gets them all).
# The command defaults to build-bench/bench/uvcl_bench; give
# the one that runs it there (a wrapper that sets the library path).
# Copy OUT/h200.json to bench-results/ and run scripts/bench.sh --doc-only.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: scripts/bench-gpu.sh OUT DEVICE [TIMING_LIB] [-- uvcl_bench command...]" >&2
  exit 2
fi
out=$1 device=$2
shift 2
timing=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then timing=$1; shift; fi
[ "${1:-}" = "--" ] && shift
cmd=("$@")
[ ${#cmd[@]} -eq 0 ] && cmd=(build-bench/bench/uvcl_bench)
mkdir -p "$out"
: >"$out/bench-gpu.log"
jobs=()
for j in bench/jobs/tinygrad-mlp.json bench/jobs/tinygrad-convnet.json bench/jobs/tinygrad-transformer.json; do
  jobs+=(--job "$PWD/$j")
done
status=0
run() {  # name, then uvcl_bench arguments
  local name=$1
  shift
  local t0=$SECONDS rc=0
  echo "== $name: ${cmd[*]} --device $device $* --json $out/$name.json" >>"$out/bench-gpu.log"
  "${cmd[@]}" --device "$device" "$@" --json "$out/$name.json" >>"$out/bench-gpu.log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || status=1
  echo "$name: $((SECONDS - t0)) s, exit $rc"
}
run h200 --growth-launches 2000000 "${jobs[@]}"
[ -n "$timing" ] && run h200-cl-timing --figure 1,2,5,5x,6,10,11 "${jobs[@]}" --cl-library "$timing"
run h200-f5-burst0 --figure 5 --engine-read-burst-us 0
run h200-f56-again-1 --figure 5,6
run h200-f56-again-2 --figure 5,6
exit $status
