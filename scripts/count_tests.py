"""Counts test cases from meson's testlog.json: GoogleTest cases from each
executable's output, other tests by their result. Prints "N passed, N failed"."""
import json
import re
import sys

passed = failed = 0
ok_re = re.compile(r"^\[       OK \] (\S+)", re.M)
fail_re = re.compile(r"^\[  FAILED  \] ([A-Za-z0-9_/.]+)(?: \(|$)", re.M)
for line in open(sys.argv[1]):
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
