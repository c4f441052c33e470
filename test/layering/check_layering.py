"""The include graph keeps to the layering docs/architecture.md states.

Each file belongs to a part: a folder of src/ (sched, loop, cl, json,
compiler, engine, capi, program), `base` (src/*.cpp, *.hpp: files, status,
types), `tools` (the uvcl program's commands) or `api` (include/uvcl). An
include names a part the same way ("sched/x.hpp" is sched, "files.hpp"
base); include/uvcl/engine.hpp is `engine-api`, the other public headers
are `api` (vocabulary any part may use); <uv.h> is `libuv`, <CL/...>
`opencl`, <simdjson.h> `simdjson`. Every include must be of the file's own
part or one ALLOWED lists for it.
Usage: check_layering.py SOURCE_ROOT"""
import os
import re
import sys

ALLOWED = {
    "api": {"api"},
    "base": {"api"},
    "sched": {"api"},
    "loop": {"api", "libuv"},
    "json": {"api", "base", "simdjson"},
    "cl": {"api", "base", "json", "opencl"},
    "compiler": {"api", "base", "cl", "opencl"},
    "engine": {"api", "engine-api", "base", "sched", "loop", "cl", "compiler", "json", "libuv", "opencl", "simdjson"},
    "capi": {"api", "engine-api", "libuv"},
    "program": {"api", "engine-api", "base", "json", "cl", "libuv", "simdjson", "opencl", "http"},
    "tools": {"api", "engine-api", "base", "json", "cl", "program", "libuv", "opencl", "tools"},
}
BASE = {"files.hpp", "status.hpp", "types.hpp"}


def part_of(root, path):
    rel = os.path.relpath(path, root).split(os.sep)
    if rel[0] == "include":
        return "api"
    if rel[0] == "tools":
        return "tools"
    if rel[0] == "src":
        return "base" if len(rel) == 2 else rel[1]
    return None


def included_part(name, quoted):
    if not quoted:
        if name == "uv.h":
            return "libuv"
        if name.startswith("CL/"):
            return "opencl"
        if name == "simdjson.h":
            return "simdjson"
        if name == "http_parser.h":
            return "http"
        return None  # the standard library, the system
    if name == "uvcl/engine.hpp":
        return "engine-api"
    if name.startswith("uvcl/"):
        return "api"
    if name in BASE:
        return "base"
    if "/" in name:
        return name.split("/")[0]
    return "local"  # a file beside this one (tools/cli.hpp, a gtest-free header)


root = sys.argv[1]
problems = []
count = 0
for top in ("include", "src", "tools"):
    for folder, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if not f.endswith((".cpp", ".hpp", ".h")):
                continue
            path = os.path.join(folder, f)
            part = part_of(root, path)
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
                if not m:
                    continue
                count += 1
                to = included_part(m.group(2), m.group(1) == '"')
                if to is None or to == part or (to == "local" and part in ("tools", "base")):
                    continue
                if to == "local" or to not in ALLOWED.get(part, set()):
                    problems.append(f"{os.path.relpath(path, root)}:{n}: {part} includes {m.group(2)} ({to})")
print(f"{count} includes checked")
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
