#!/usr/bin/env python3
"""uvcl tune, uvcl run's progress line and options, --help and --version, end to end.

usage: cli_test.py UVCL SAXPY_JOB [VERSION]
"""
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time

UVCL, SAXPY = sys.argv[1], sys.argv[2]
VERSION = sys.argv[3] if len(sys.argv) > 3 else None
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(*args):
    return subprocess.run([UVCL, *args], capture_output=True, text=True, timeout=120)


# --- uvcl tune ------------------------------------------------------------

cands = ["16", "32", "48", "64", "4096", "8x8", "256"]
p = run("tune", SAXPY, "--launch", "0", "--local", ",".join(cands), "--reps", "3")
check(p.returncode == 0, f"tune exit {p.returncode}: {p.stderr}")
lines = p.stdout.splitlines()
print(p.stdout)
check(len(lines) == 3 + len(cands), f"tune prints a title, a column line, {len(cands)} rows and the fastest")
if len(lines) == 3 + len(cands):
    check(lines[0].startswith("launch 0 (kernel saxpy), global 1024, device 0 ("), f"title: {lines[0]!r}")
    check("1 warm-up + 3 timed runs per local size" in lines[0], f"title: {lines[0]!r}")
    check(lines[1].split() == ["local", "median_ns", "min_ns", "max_ns"], f"columns: {lines[1]!r}")
    medians = {}
    for cand, line in zip(cands, lines[2:-1]):
        fields = line.split()
        check(fields[0] == cand, f"row order: {line!r} for {cand}")
        if cand in ("48", "4096", "8x8"):
            check(len(fields) > 1 and fields[1] == "skipped:", f"{cand} is skipped: {line!r}")
        else:
            check(len(fields) == 4 and all(f.isdigit() for f in fields[1:]), f"{cand} has numbers: {line!r}")
            if len(fields) == 4 and all(f.isdigit() for f in fields[1:]):
                med, lo, hi = map(int, fields[1:])
                check(lo <= med <= hi, f"min <= median <= max: {line!r}")
                medians[cand] = med
    check("not a multiple of the local size 48" in lines[4], f"48's reason: {lines[4]!r}")
    check("8x8 has 2 axes, the launch has 1" in lines[7], f"8x8's reason: {lines[7]!r}")
    m = re.fullmatch(r"fastest: (\S+) \(median (\d+) ns\)", lines[-1])
    check(m is not None, f"fastest line: {lines[-1]!r}")
    if m and medians:
        check(m.group(1) in medians and int(m.group(2)) == min(medians.values()),
              f"fastest is the lowest median: {lines[-1]!r} of {medians}")

# No candidate works: exit 1, nothing on stdout, the reasons on stderr.
p = run("tune", SAXPY, "--local", "48,4096")
check(p.returncode == 1, f"all rejected: exit {p.returncode}")
check(p.stdout == "", f"all rejected: stdout {p.stdout!r}")
check(p.stderr.startswith("uvcl: error: InvalidArgument: launches[0] (kernel saxpy): tune: no local size candidate"),
      f"all rejected: stderr {p.stderr!r}")
check("\n  48: " in p.stderr and "\n  4096: " in p.stderr, f"all rejected lists each: {p.stderr!r}")

# Usage and argument errors.
p = run("tune", SAXPY, "--launch", "3")
check(p.returncode == 1 and "--launch 3: " in p.stderr and "has 1 launches" in p.stderr, f"--launch 3: {p.stderr!r}")
p = run("tune", SAXPY, "--local", "16,abc")
check(p.returncode == 1 and 'candidate "abc"' in p.stderr, f"--local abc: {p.stderr!r}")
p = run("tune", SAXPY, "--reps", "0")
check(p.returncode == 1 and "--reps" in p.stderr, f"--reps 0: {p.stderr!r}")
p = run("tune")
check(p.returncode == 2, f"tune without a job: exit {p.returncode}")
p = run("--help")
check("uvcl tune JOB.json" in p.stdout, "usage names tune")

# --- uvcl run: progress only on a terminal -----------------------------------

with tempfile.TemporaryDirectory() as d:
    job = {
        "buffers": {"y": {"type": "float", "count": 256, "init": {"fill": 1.0}}},
        "kernels": {"spin": {"source": "kernel void spin(global float* y, const int n) { size_t i = get_global_id(0);"
                                       " float v = y[i]; for (int k = 0; k < n; ++k) v = v * 0.999f + 0.001f;"
                                       " y[i] = v; }"}},
        "launches": [{"kernel": "spin", "args": ["y", {"int": 200000}], "global": [256], "repeat": 40}],
        "outputs": ["y"],
    }
    path = os.path.join(d, "slow.json")
    with open(path, "w") as f:
        json.dump(job, f)

    # stderr is a pipe: no progress at all.
    p = run("run", path)
    check(p.returncode == 0, f"run exit {p.returncode}: {p.stderr}")
    check(p.stderr == "", f"no progress when stderr is not a terminal: {p.stderr!r}")
    check(json.loads(p.stdout)["stats"]["launches"] == 40, "run's stats")

    # stderr is a terminal: a progress line, redrawn in place, cleared at the end.
    master, slave = pty.openpty()
    t0 = time.monotonic()
    proc = subprocess.Popen([UVCL, "run", path], stdout=subprocess.PIPE, stderr=slave, text=False)
    os.close(slave)
    seen = b""
    while True:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read()
    proc.wait()
    os.close(master)
    elapsed = time.monotonic() - t0
    check(proc.returncode == 0, f"run on a terminal: exit {proc.returncode}")
    check(json.loads(out)["stats"]["launches"] == 40, "stdout is untouched by the progress line")
    draws = re.findall(rb"\r\x1b\[Kuvcl: launches (\d+)/40 \(\d+%\), [\d.]+/s", seen)
    print(f"progress: {len(draws)} redraws in {elapsed:.1f} s")
    if elapsed > 1.5:
        check(len(draws) >= 1, f"a progress line on a terminal: {seen[:200]!r}")
    check(len(draws) <= elapsed * 10 + 2, f"at most ~10 redraws a second: {len(draws)} in {elapsed:.1f} s")
    check(all(int(a) <= int(b) for a, b in zip(draws, draws[1:])), "progress never goes back")
    if draws:
        check(seen.endswith(b"\r\x1b[K"), f"the line is cleared at the end: {seen[-40:]!r}")

# --- uvcl run: files and --out ----------------------------------------------
# Only regular files are read (a FIFO hung, /dev/zero grew memory without
# bound), --out DIR is made, and an output that is not a plain file name is
# refused before anything runs (a buffer "../../x" was written outside DIR).
with tempfile.TemporaryDirectory() as tmp:
    def run_with_timeout(*args):
        try:
            return subprocess.run([UVCL, *args], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            return None

    fifo = os.path.join(tmp, "job.fifo")
    os.mkfifo(fifo)
    p = run_with_timeout("run", fifo)
    check(p is not None and p.returncode == 1 and f"{fifo}: cannot read: not a regular file (a FIFO)" in p.stderr,
          f"a FIFO as the job file is refused at once: {p and p.stderr}")
    p = run_with_timeout("run", "/dev/zero")
    check(p is not None and p.returncode == 1 and "not a regular file (a character device)" in p.stderr,
          f"/dev/zero as the job file is refused: {p and p.stderr}")

    zero_init = os.path.join(tmp, "zero.json")
    with open(zero_init, "w") as f:
        json.dump({"buffers": {"a": {"type": "float", "count": 4, "init": {"file": "/dev/zero"}}},
                   "kernels": {}, "launches": [], "outputs": ["a"]}, f)
    p = run_with_timeout("run", zero_init)
    check(p is not None and p.returncode == 1 and "buffers.a.init.file: /dev/zero" in p.stderr,
          f'"file": "/dev/zero" is refused: {p and p.stderr}')

    escape = os.path.join(tmp, "escape.json")
    with open(escape, "w") as f:
        json.dump({"buffers": {"ok": {"type": "int", "count": 2}, "../../x": {"type": "int", "count": 2}},
                   "kernels": {}, "launches": [], "outputs": ["ok", "../../x"]}, f)
    out_dir = os.path.join(tmp, "a", "b", "out")
    p = run_with_timeout("run", escape, "--out", out_dir)
    check(p is not None and p.returncode == 1 and '"../../x" is not a plain file name' in (p.stderr or ""),
          f"--out refuses an output name with a slash: {p and p.stderr}")
    check(not os.path.exists(os.path.join(tmp, "a", "x.npy")) and not os.path.exists(os.path.join(out_dir, "ok.npy")),
          "nothing was written for a refused --out")
    os.rename(escape, escape + ".old")
    with open(escape, "w") as f:
        json.dump({"buffers": {"ok": {"type": "int", "count": 2, "init": {"fill": 7}}},
                   "kernels": {}, "launches": [], "outputs": ["ok"]}, f)
    p = run_with_timeout("run", escape, "--out", out_dir)
    check(p is not None and p.returncode == 0 and os.path.isfile(os.path.join(out_dir, "ok.npy")),
          f"--out DIR is made when missing: {p and p.stderr}")

# --- uvcl run --kernels DIR: launches name FILE:ENTRY of a library folder ---------

with tempfile.TemporaryDirectory() as tmp, open(SAXPY) as f:
    saxpy = json.load(f)
    lib = os.path.join(tmp, "kernels")
    os.mkdir(lib)
    with open(os.path.join(lib, "blas.cl"), "w") as k:
        k.write(saxpy["kernels"]["saxpy"]["source"])
    lib_job = dict(saxpy)
    del lib_job["kernels"]
    lib_job["launches"] = [dict(saxpy["launches"][0], kernel="blas:saxpy")]
    lib_path = os.path.join(tmp, "saxpy-library.json")
    with open(lib_path, "w") as k:
        json.dump(lib_job, k)
    ref = run("run", SAXPY)
    p = run("run", lib_path, "--kernels", lib)
    check(p.returncode == 0 and ref.returncode == 0
          and json.loads(p.stdout)["outputs"] == json.loads(ref.stdout)["outputs"],
          f"run --kernels DIR: blas:saxpy gives the answer of the job's own saxpy: {p.stderr}")
    p = run("run", lib_path)
    check(p.returncode == 1 and "launches[0]" in p.stderr and "FILE:ENTRY" in p.stderr,
          f"run of a FILE:ENTRY job without --kernels: an error naming the launch: {p.stderr!r}")
    with open(os.path.join(lib, "bad.cl"), "w") as k:
        k.write("kernel void bad(global float* y) { y[0] = undefined_name; }\n")
    p = run("run", lib_path, "--kernels", lib)
    check(p.returncode == 1 and p.stdout == "" and "bad.cl" in p.stderr and "undefined_name" in p.stderr
          and "KernelCompilation" in p.stderr, f"run --kernels with a file that does not build: {p.stderr!r}")
    p = run("run", lib_path, "--kernels", os.path.join(tmp, "nowhere"))
    check(p.returncode == 1 and "--kernels" in p.stderr and "nowhere" in p.stderr,
          f"run --kernels naming no folder: {p.stderr!r}")

# --- --version and COMMAND --help ---------------------------------------------

p = run("--version")
check(p.returncode == 0 and re.fullmatch(r"uvcl \d+\.\d+\.\d+\n", p.stdout) is not None,
      f"--version: exit {p.returncode}, {p.stdout!r}")
if VERSION:
    check(p.stdout == f"uvcl {VERSION}\n", f"--version is the project's version {VERSION}: {p.stdout!r}")

# Every command of `uvcl --help`, and every option its usage line names, is
# described by `uvcl COMMAND --help` (exit 0, on stdout, nothing on stderr).
p = run("--help")
check(p.returncode == 0 and "uvcl COMMAND --help" in p.stdout and "uvcl --version" in p.stdout,
      f"--help names COMMAND --help and --version: {p.stdout!r}")
usage = {}
command = None
for line in p.stdout.splitlines():
    m = re.match(r"^(?:usage:)?\s+uvcl (\w+)", line)
    if m and m.group(1) != "COMMAND":
        command = m.group(1)
        usage[command] = []
    if command and not re.search(r"uvcl (COMMAND|--version)", line):
        usage[command] += re.findall(r"\[(--[a-z-]+)", line)
check(sorted(usage) == ["devices", "run", "serve", "tune"], f"the commands of --help: {sorted(usage)}")
for cmd, options in usage.items():
    for args in ([cmd, "--help"], [cmd, "-h"], [cmd, "--device", "x", "--help"]):
        h = run(*args)
        check(h.returncode == 0 and h.stderr == "", f"{' '.join(args)}: exit {h.returncode}, {h.stderr!r}")
        check(h.stdout.startswith(f"usage: uvcl {cmd}"), f"{' '.join(args)} starts with its usage: {h.stdout[:80]!r}")
    described = {m for m in re.findall(r"^\s+(--[a-z-]+)", h.stdout, re.M)}
    check(len(options) >= 1, f"{cmd}: options in its usage line")
    for o in options + ["--help"]:
        check(o in described, f"uvcl {cmd} --help describes {o}")
    for o in described:
        check(o in options or o == "--help", f"uvcl {cmd} --help describes {o}, which its usage line lacks")
h = run("run", "--help")
check("DIR/NAME.npy" in h.stdout and "made if missing" in h.stdout, "run --help says what --out writes")
check("one object per command" in h.stdout and "waits" in h.stdout, "run --help says what --schedule writes")
h = run("nope", "--help")
check(h.returncode == 2 and "unknown command 'nope'" in h.stderr, f"an unknown command's --help: {h.stderr!r}")

# --- uvcl run: --no-outputs, --quiet, --out ------------------------------------

p = run("run", SAXPY)
check(p.returncode == 0, f"run saxpy: {p.stderr}")
full = json.loads(p.stdout) if p.returncode == 0 else {}
check(len(full.get("outputs", {})) >= 1, "run prints the outputs")
for flag in ("--no-outputs", "--quiet"):
    p = run("run", SAXPY, flag)
    check(p.returncode == 0, f"run {flag}: exit {p.returncode}: {p.stderr}")
    if p.returncode == 0:
        out = json.loads(p.stdout)
        check(out["outputs"] == {}, f"run {flag}: no outputs printed: {p.stdout[:200]!r}")
        check(out["stats"]["launches"] == full.get("stats", {}).get("launches"), f"run {flag}: the stats stay")
        check("device" in out, f"run {flag}: the device stays")
with tempfile.TemporaryDirectory() as tmp:
    out_dir = os.path.join(tmp, "new", "dir")
    p = run("run", SAXPY, "--no-outputs", "--out", out_dir)
    check(p.returncode == 0 and os.path.isdir(out_dir), f"--out makes DIR: {p.stderr}")
    names = {f"{name}.npy" for name in full.get("outputs", {})}
    check(names and set(os.listdir(out_dir)) == names, f"--out writes NAME.npy per output: {os.listdir(out_dir)}")
    for n in names:
        with open(os.path.join(out_dir, n), "rb") as f:
            check(f.read(6) == b"\x93NUMPY", f"{n} is a .npy file")
    blocker = os.path.join(tmp, "file")
    open(blocker, "w").close()
    p = run("run", SAXPY, "--out", os.path.join(blocker, "sub"))
    check(p.returncode == 1 and "--out" in p.stderr and p.stdout == "", f"--out under a file: {p.stderr!r}")

# --- uvcl tune --json ---------------------------------------------------------

p = run("tune", SAXPY, "--local", "16,48,64", "--reps", "2", "--json")
check(p.returncode == 0, f"tune --json: exit {p.returncode}: {p.stderr}")
if p.returncode == 0:
    rep = json.loads(p.stdout)
    check(rep["launch"] == 0 and rep["kernel"] == "saxpy" and rep["global"] == [1024], f"tune --json head: {rep}")
    check(rep["reps"] == 2 and rep["warmup"] == 1 and isinstance(rep["device_name"], str), f"tune --json: {rep}")
    rows = rep["rows"]
    check([r["local"] for r in rows] == [[16], [48], [64]], f"tune --json rows: {rows}")
    check("skipped" in rows[1] and "multiple" in rows[1]["skipped"], f"48 is skipped: {rows[1]}")
    timed = [r for r in rows if "median_ns" in r]
    check(len(timed) == 2 and all(len(r["device_ns"]) == 2 and r["min_ns"] <= r["median_ns"] <= r["max_ns"]
                                  for r in timed), f"timed rows: {timed}")
    if timed:
        best = min(timed, key=lambda r: r["median_ns"])
        check(rep["fastest"] == {"local": best["local"], "median_ns": best["median_ns"]}, f"fastest: {rep['fastest']}")

if failures:
    print(f"{len(failures)} failure(s)", file=sys.stderr)
    sys.exit(1)
print("ok")
