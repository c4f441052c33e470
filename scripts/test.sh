#!/usr/bin/env bash
# Runs the whole uvcl test suite: installs what is missing, builds, runs
# `meson test`, and ends with one line "N passed, N failed" counted from
# meson's results (meson-logs/testlog.json), per GoogleTest case.
# Then, unless UVCL_TEST_QUICK=1: static analysis of src/ (scripts/lint.sh),
# the same suite under ASan+UBSan (scripts/sanitize.sh, build-asan/) and a
# short run of each fuzzer (scripts/fuzz.sh, UVCL_FUZZ_SECONDS each, default
# 20); the closing line counts all of them, the lint and each fuzzer as one
# test. These add two builds and the lint, about 15 minutes on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
scripts/setup.sh "$build" || exit 1
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/pocl-cache}
meson test -C "$build" --no-rebuild --print-errorlogs "$@"
status=$?
logs=("$build/meson-logs/testlog.json")
if [[ ${UVCL_TEST_QUICK:-0} != 1 ]]; then
  echo "== static analysis (clang-tidy, cppcheck)"
  lintlog=$build/meson-logs/lint.json
  result=OK
  scripts/lint.sh "$build" > "$build/meson-logs/lint.txt" 2>&1 || { result=FAIL; status=1; tail -60 "$build/meson-logs/lint.txt"; }
  grep -E '^lint: (clang-tidy took|cppcheck took|0 findings)' "$build/meson-logs/lint.txt"
  printf '{"name": "lint", "result": "%s", "stdout": ""}\n' "$result" > "$lintlog"
  logs+=("$lintlog")
  echo "== ASan+UBSan suite (build-asan)"
  rm -f build-asan/meson-logs/testlog.json
  UVCL_SANITIZE_COUNT=0 POCL_CACHE_DIR= BUILD_DIR=build-asan scripts/sanitize.sh address "$@" || status=1
  logs+=(build-asan/meson-logs/testlog.json)
  echo "== fuzzers, ${UVCL_FUZZ_SECONDS:-20} s each"
  fuzzlog=${FUZZ_DIR:-build-fuzz}/fuzzlog.json
  mkdir -p "$(dirname "$fuzzlog")" && : > "$fuzzlog"
  for t in config job safetensors; do
    result=OK
    scripts/fuzz.sh "$t" corpus > "${fuzzlog%.json}-$t.txt" 2>&1 &&
      scripts/fuzz.sh "$t" "${UVCL_FUZZ_SECONDS:-20}" >> "${fuzzlog%.json}-$t.txt" 2>&1 || result=FAIL
    [[ $result == OK ]] || { status=1; tail -40 "${fuzzlog%.json}-$t.txt"; }
    echo "fuzz $t: $result ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "${fuzzlog%.json}-$t.txt" | grep -o '[0-9]*$') runs)"
    printf '{"name": "fuzz-%s", "result": "%s", "stdout": ""}\n' "$t" "$result" >> "$fuzzlog"
  done
  logs+=("$fuzzlog")
fi
python3 scripts/count_tests.py "${logs[@]}" || status=1
exit $status
