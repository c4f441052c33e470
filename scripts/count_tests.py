"""Counts test cases from meson's testlog.json files (one or more, e.g. the
normal and the sanitizer build): GoogleTest cases from each executable's
output, other tests by their result. Prints "N passed, N failed".
A missing file counts as one failure (that part of the suite did not run)."""
import json
import re
import sys

passed = failed = 0
ok_re = re.compile(r"^\[       OK \] (\S+)", re.M)
fail_re = re.compile(r"^\[  FAILED  \] ([A-Za-z0-9_/.]+)(?: \(|$)", re.M)
def lines():
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                yield from f
        except OSError:
            print(f"count_tests: {path}: missing, counted as one failure", file=sys.stderr)
            yield json.dumps({"name": path, "result": "FAIL", "stdout": ""})


for line in lines():
    if not line.strip():
        continue
    t = json.loads(line)
    out = t.get("stdout") or ""
    oks = set(ok_re.findall(out))
    fails = set(f for f in fail_re.findall(out) if "." in f)
    if oks or fails:
        passed += len(oks)
        failed += len(fails)
        if t["result"] not in ("OK", "SKIP", "EXPECTEDFAIL") and not fails:
            failed += 1  # crashed or timed out outside a reported case
    elif t["result"] == "OK":
        passed += 1
    elif t["result"] != "SKIP":
        failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
