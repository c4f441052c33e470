#!/usr/bin/env bash
# Static analysis of uvcl's library sources: clang-tidy (.clang-tidy) and
# cppcheck (.cppcheck-suppressions) over src/ and include/uvcl, using the
# compile database of the build directory. Exits non-zero on any finding.
# scripts/test.sh runs it (unless UVCL_TEST_QUICK=1); about 3 min on 2 cores.
# Usage: scripts/lint.sh [BUILD_DIR]   (default: build; LINT_JOBS=N, default 2)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-${BUILD_DIR:-build}}
jobs=${LINT_JOBS:-2}
db=$build/compile_commands.json
if [ ! -f "$db" ]; then
  echo "lint: $db not found: configure first (scripts/setup.sh $build)" >&2
  exit 2
fi
for tool in clang-tidy cppcheck; do
  command -v "$tool" >/dev/null || { echo "lint: $tool not found (apt-get install clang-tidy cppcheck)" >&2; exit 2; }
done

# The library's translation units, as the compile database names them.
mapfile -t files < <(python3 - "$db" "$root" <<'PY'
import json, os, sys
db, root = sys.argv[1], sys.argv[2]
seen = set()
for e in json.load(open(db)):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if f.startswith(os.path.join(root, "src") + os.sep) and f not in seen:
        seen.add(f)
        print(f)
PY
)
if [ ${#files[@]} -eq 0 ]; then
  echo "lint: no files of src/ in $db" >&2
  exit 2
fi

status=0
start=$(date +%s)
echo "lint: clang-tidy $(clang-tidy --version | sed -n 's/.*LLVM version \([0-9.]*\).*/\1/p') on ${#files[@]} files, $jobs jobs"
tidy_out=$(printf '%s\n' "${files[@]}" |
           xargs -P "$jobs" -n 1 clang-tidy -p "$build" --quiet --use-color=false 2>&1)
tidy_rc=$?
# Every warning and error line with its context; a failed clang-tidy process
# (WarningsAsErrors: '*' turns any finding into a failure) fails the lint.
if grep -E -A3 ': (warning|error):' <<<"$tidy_out"; then status=1; fi
if [ $tidy_rc -ne 0 ]; then
  status=1
  echo "lint: clang-tidy failed (exit $tidy_rc)" >&2
  grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Use -system-headers' <<<"$tidy_out" | tail -n 40 >&2
fi
tidy_end=$(date +%s)
echo "lint: clang-tidy took $((tidy_end - start)) s"

echo "lint: $(cppcheck --version)"
if ! cppcheck --project="$db" --file-filter="*src/*" \
     --enable=warning,performance,portability,style --std=c++20 --inline-suppr \
     --suppressions-list=.cppcheck-suppressions --error-exitcode=1 --quiet -j "$jobs" \
     --template='{file}:{line}:{column}: {severity}: {message} [{id}]'; then
  status=1
fi
echo "lint: cppcheck took $(( $(date +%s) - tidy_end )) s"
if [ $status -eq 0 ]; then echo "lint: 0 findings"; else echo "lint: findings above" >&2; fi
exit $status
