#!/usr/bin/env bash
# Builds and runs a libFuzzer target over the JSON layer.
#   scripts/fuzz.sh build                 build all targets into $FUZZ_DIR
#   scripts/fuzz.sh TARGET SECONDS [ARGS]  fuzz TARGET (config|job|safetensors)
#   scripts/fuzz.sh TARGET corpus          run the seed corpus once (regression)
# The JSON parsers depend only on src/json, the job and tensor parsers of
# src/program, src/files.cpp, src/status.cpp,
# src/types.cpp and simdjson, so the targets are compiled directly with clang++ instead of a
# second full Meson configuration.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
FUZZ_DIR=${FUZZ_DIR:-$root/build-fuzz}
CXX=${FUZZ_CXX:-clang++}
targets=(config job safetensors)

build_one() {
  local t=$1 out=$FUZZ_DIR/fuzz_$1
  local srcs=("$root"/src/json/*.cpp "$root"/src/program/{job,safetensors,untrusted_source}.cpp "$root"/src/files.cpp "$root"/src/status.cpp "$root"/src/types.cpp
              "$root/test/fuzz/fuzz_$t.cpp")
  # Rebuild only when a source is newer than the binary.
  if [[ -x $out ]]; then
    local newer=0
    for s in "${srcs[@]}" "$root"/src/json/*.hpp "$root"/src/program/{job,safetensors,untrusted_source}.hpp "$root"/include/uvcl/*.hpp; do
      [[ $s -nt $out ]] && newer=1 && break
    done
    [[ $newer == 0 ]] && return 0
  fi
  mkdir -p "$FUZZ_DIR"
  # shellcheck disable=SC2046
  "$CXX" -std=c++20 -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/include" -I"$root/src" $(pkg-config --cflags simdjson) \
    "${srcs[@]}" $(pkg-config --libs simdjson) -o "$out"
}

if [[ ${1:-} == build || $# == 0 ]]; then
  for t in "${targets[@]}"; do build_one "$t"; done
  exit 0
fi

t=$1; what=${2:-20}; shift 2 || shift $#
[[ " ${targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (config, job, safetensors)" >&2; exit 2; }
build_one "$t"
seeds=$root/test/fuzz/corpus/$t
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
if [[ $what == corpus ]]; then
  # Runs every seed once: a crash on any checked-in input fails.
  exec "$FUZZ_DIR/fuzz_$t" -runs=0 "$@" "$seeds"
fi
# New inputs go to a scratch corpus so the checked-in seeds stay small.
work=$FUZZ_DIR/corpus-$t
mkdir -p "$work"
exec "$FUZZ_DIR/fuzz_$t" -max_total_time="$what" -print_final_stats=1 -max_len=65536 \
  -artifact_prefix="$FUZZ_DIR/crash-$t-" "$@" "$work" "$seeds"
