#!/usr/bin/env python3
"""Writes the ```c blocks of a Markdown file (docs/api.md), one after the
other, as one C file: the C API section's example is a whole program, so
the test suite compiles it as C and runs it.

Usage: extract_c.py INPUT.md OUTPUT.c"""
import sys

src, dst = sys.argv[1], sys.argv[2]
out, inside, start = [f"/* Generated from {src} by test/capi/extract_c.py. Do not edit. */"], False, 0
for n, line in enumerate(open(src).read().splitlines(), 1):
    if not inside and line.strip() == "```c":
        inside = True
        out.append(f'#line {n + 1} "{src}"')
    elif inside and line.strip() == "```":
        inside = False
    elif inside:
        out.append(line)
if len(out) == 1:
    sys.exit(f"{src}: no ```c block")
open(dst, "w").write("\n".join(out) + "\n")
