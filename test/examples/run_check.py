#!/usr/bin/env python3
"""Runs a program, echoes its output, and checks it: exit status 0 and every
--expect regular expression found in stdout. Usage:
    run_check.py [--expect REGEX]... [--timeout S] -- PROGRAM [ARGS...]"""
import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no program given")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired as e:
        sys.stdout.write(e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))
        print(f"run_check: {cmd[0]} did not finish within {a.timeout} s", file=sys.stderr)
        return 1
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    ok = True
    if p.returncode != 0:
        print(f"run_check: {cmd[0]} exited with {p.returncode}", file=sys.stderr)
        ok = False
    for rx in a.expect:
        if not re.search(rx, p.stdout, re.M):
            print(f"run_check: output lacks /{rx}/", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
