#!/usr/bin/env bash
# Runs the uvcl benchmark suite on the default PoCL device and regenerates
# its full report (bench-results/report.md) from the results.
#
#   scripts/bench.sh [--quick] [--doc-only] [--h200 FILE] [-- uvcl_bench args...]
#
# Writes bench-results/:
#   pocl-uvcl.json       every figure, one invocation (uvcl_bench)
#   pocl-2dev.json       figure 5x in a second process with POCL_DEVICES="pthread pthread"
#   pocl-1thread.json    figures 1, 3, 4, 10 with POCL_MAX_PTHREAD_COUNT=1 (a core left to the loop)
#   pocl-nokcache.json   figure 7 with POCL_KERNEL_CACHE=0 (PoCL's own kernel cache off)
#   pocl-pyopencl*.json  bench/pyopencl_bench.py (skipped when pyopencl is not importable)
#   pocl.json            all of the above merged (bench/report.py merge)
# then docs/img/*.png (bench/plot.py, if matplotlib is there) and
# bench-results/report.md (bench/report.py doc), adding the GPU columns from
# bench-results/h200.json (or --h200 FILE) when present.
#
# Environment: BUILD_DIR (default build-bench), BENCH_MAX_LOAD (wait up to
# 10 minutes for the 1-minute load average to drop below it; default: the
# number of CPUs), BENCH_NICE (default -10 when run as root: other work on
# the machine disturbs less).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD_DIR:-build-bench}
out=bench-results
quick=()
doc_only=0
h200=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --doc-only) doc_only=1 ;;
    --h200) h200=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# The comparison and the plots: Debian's pyopencl and matplotlib.
UVCL_SETUP_EXTRA="python3-pyopencl python3-matplotlib" scripts/setup.sh --deps-only
# Debian's python3 has pyopencl and matplotlib (python3-pyopencl,
# python3-matplotlib); a python3 earlier on PATH (pyenv) may not.
py=python3
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null && "$cand" -c 'import pyopencl' 2>/dev/null; then py=$cand; break; fi
done
mkdir -p "$out" docs/img
[ -z "$h200" ] && [ -f "$out/h200.json" ] && h200="$out/h200.json"

if [ "$doc_only" = 0 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release >/dev/null
  fi
  # The engine's compiler process too: a stale one that cannot start makes
  # every build inline, and figures 7 and 10 would measure that.
  ninja -C "$build" bench/uvcl_bench src/uvcl-compiler >/dev/null
  bench="$build/bench/uvcl_bench"
  export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/pocl-cache-bench}

  nice_cmd=()
  want_nice=${BENCH_NICE:-}
  [ -z "$want_nice" ] && [ "$(id -u)" -eq 0 ] && want_nice=-10
  [ -n "$want_nice" ] && nice_cmd=(nice -n "$want_nice")

  max_load=${BENCH_MAX_LOAD:-$(nproc)}
  for _ in $(seq 60); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    awk -v l="$load" -v m="$max_load" 'BEGIN { exit !(l < m) }' && break
    echo "bench.sh: load average $load >= $max_load, waiting (other work disturbs the figures)" >&2
    sleep 10
  done

  run() { echo "+ $*" >&2; "${nice_cmd[@]}" "$@"; }
  status=0
  run "$bench" --json "$out/pocl-uvcl.json" "${quick[@]}" "${extra[@]}" || status=1
  POCL_DEVICES="pthread pthread" run "$bench" --figure 5x --json "$out/pocl-2dev.json" "${quick[@]}" || status=1
  POCL_MAX_PTHREAD_COUNT=1 run "$bench" --figure 1,3,4,10 --json "$out/pocl-1thread.json" "${quick[@]}" || status=1
  POCL_KERNEL_CACHE=0 run "$bench" --figure 7 --json "$out/pocl-nokcache.json" "${quick[@]}" || status=1

  # pyopencl uses the same spin calibration and launch count as the uvcl run.
  read -r iters launches < <("$py" -c '
import json, sys
j = json.load(open(sys.argv[1]))
f = j["figures"]
print(f.get("2", {}).get("params", {}).get("spin_iters", 0), f.get("1", {}).get("params", {}).get("launches", 0))
' "$out/pocl-uvcl.json")
  run "$py" bench/pyopencl_bench.py --json "$out/pocl-pyopencl.json" --spin-iters "$iters" --launches "$launches" \
    --figure 1,2,3,5,6,7 "${quick[@]}" || status=1
  POCL_DEVICES="pthread pthread" run "$py" bench/pyopencl_bench.py --json "$out/pocl-pyopencl-2dev.json" \
    --figure 5x "${quick[@]}" || status=1

  "$py" bench/report.py merge --out "$out/pocl.json" --main "$out/pocl-uvcl.json" \
    --pyopencl "$out/pocl-pyopencl.json" --cross "$out/pocl-2dev.json" \
    --cross-pyopencl "$out/pocl-pyopencl-2dev.json" \
    --variant "pocl_1thread=$out/pocl-1thread.json" --variant "pocl_nokcache=$out/pocl-nokcache.json"
else
  status=0
fi

h200_args=()
[ -n "$h200" ] && h200_args=(--h200 "$h200")
"$py" bench/plot.py --pocl "$out/pocl.json" "${h200_args[@]}" --out docs/img || true
gpu_args=("${h200_args[@]}")
[ -f "$out/h100.json" ] && gpu_args+=(--h100 "$out/h100.json")  # a later build, run where only an H100 was lent
"$py" bench/report.py doc --pocl "$out/pocl.json" "${gpu_args[@]}" --img docs/img --out "$out/report.md"
exit $status
