#!/usr/bin/env python3
"""Builds and runs examples/consumer — a separate Meson project that uses uvcl
as a subproject — in a temporary directory, offline.

The consumer is copied to TMP/consumer and the uvcl source tree is placed at
TMP/consumer/subprojects/uvcl (a symlink to this repository), next to the
consumer's own subprojects/uvcl.wrap, whose [provide] section maps
dependency('uvcl') to the subproject. Meson uses the existing directory and
never downloads (--wrap-mode=nodownload).

Checks: the consumer configures and builds; uvcl built as a subproject
defines no test, tool, example or benchmark target (nor the uvcl program's
internal library); the consumer's main.cpp carries the README's example
verbatim; the program runs (without LD_LIBRARY_PATH) and prints
"consumer: ok"; no compiler warning in the consumer's own code. And under a
debug parent (a second, configure-only build directory), libuvcl and
uvcl-compiler are compiled with -O2 (subproject_optimization's default) while
the consumer's own code keeps -O0.

The kept build passes -Duvcl:subproject_optimization=inherit so that its
buildtype (plain by default: no optimisation, no debug info) applies to uvcl
too and compiling it stays fast.

Speed: nearly all of the test's time is compiling uvcl once more as the
consumer's subproject (about 60 s of a 64 s run on a 2-core machine; setup
1.4 s, the program 1.5 s). With --work-dir DIR (the Meson test passes a
folder in uvcl's build directory) the consumer's copy and build directory
are kept there between runs: the next run does not reconfigure and ninja
recompiles only the uvcl sources that changed. The consumer's own main.cpp
is recompiled every run, so its warnings are still checked. Without
--work-dir, everything happens in a fresh temporary directory.

Usage: consumer_test.py --source-root DIR [--work-dir DIR] [--meson CMD]
                        [--ninja CMD] [--buildtype T] [--keep]"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time


class Stop(Exception):
    """A step failed; later steps cannot run."""


def run(cmd, **kw):
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.monotonic() - t
    print(f"$ {' '.join(cmd)}  ({dt:.1f} s, exit {p.returncode})")
    return p


def readme_block(source_root):
    text = open(os.path.join(source_root, "README.md")).read()
    m = re.search(r"^## In C\+\+.*?```cpp\n(.*?)```", text, re.S | re.M)
    if not m:
        return None
    return [l.strip() for l in m.group(1).splitlines() if l.strip() and not l.startswith("#include")]


def main_block(main_cpp):
    text = open(main_cpp).read()
    m = re.search(r"// --- README example begins ---\n(.*?)\n\s*// --- README example ends ---", text, re.S)
    if not m:
        return None
    return [l.strip() for l in m.group(1).splitlines() if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--meson", default="meson")
    ap.add_argument("--ninja", default="ninja")
    ap.add_argument("--buildtype", default="plain")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--work-dir", help="kept between runs: the consumer's copy and its build directory")
    a = ap.parse_args()
    src = os.path.realpath(a.source_root)
    meson = shlex.split(a.meson)
    ninja = shlex.split(a.ninja)
    failures = []

    # The README's example is what main.cpp runs.
    want = readme_block(src)
    have = main_block(os.path.join(src, "examples", "consumer", "main.cpp"))
    if want is None:
        failures.append("README.md: no ```cpp block under '## In C++'")
    elif have is None:
        failures.append("examples/consumer/main.cpp: README example markers missing")
    elif want != have:
        failures.append("examples/consumer/main.cpp does not carry the README's example verbatim; "
                        "copy README.md's '## In C++' block between the markers")

    keep_work = a.work_dir is not None
    if keep_work:
        tmp = os.path.abspath(a.work_dir)
        os.makedirs(tmp, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="uvcl-consumer-")
    try:
        proj = os.path.join(tmp, "consumer")
        build = os.path.join(tmp, "build")
        # A fresh copy each run; copytree keeps the files' times, so an
        # unchanged meson.build does not make ninja reconfigure.
        shutil.rmtree(proj, ignore_errors=True)
        shutil.copytree(os.path.join(src, "examples", "consumer"), proj,
                        ignore=shutil.ignore_patterns("build*", "uvcl"))
        os.symlink(src, os.path.join(proj, "subprojects", "uvcl"))
        env = dict(os.environ)
        env.pop("MESON_TESTTHREADS", None)
        env.pop("LD_LIBRARY_PATH", None)

        # Under a debug parent, uvcl's library is still optimized.
        flags_dir = os.path.join(tmp, "flags")
        shutil.rmtree(flags_dir, ignore_errors=True)
        p = run(meson + ["setup", flags_dir, proj, "--wrap-mode=nodownload", "--force-fallback-for=uvcl",
                         "--buildtype=debug"], env=env)
        if p.returncode != 0:
            print(p.stdout[-6000:], p.stderr[-6000:])
            failures.append("meson setup of the consumer (buildtype debug) failed")
            raise Stop()
        opt = {}
        for c in json.load(open(os.path.join(flags_dir, "compile_commands.json"))):
            where = "consumer" if c["file"].endswith("main.cpp") and "subprojects" not in c["file"] else (
                "uvcl-compiler" if "uvcl_compiler.cpp" in c["file"] else "libuvcl")
            levels = [w for w in shlex.split(c["command"]) if re.fullmatch(r"-O[0-3sg]", w)]
            opt.setdefault(where, set()).add(levels[-1] if levels else "none")
        print("optimization under a debug parent:", {k: sorted(v) for k, v in opt.items()})
        if opt.get("libuvcl") != {"-O2"} or opt.get("uvcl-compiler") != {"-O2"}:
            failures.append(f"under a debug parent, uvcl is not compiled with -O2: {opt}")
        if opt.get("consumer") != {"-O0"}:
            failures.append(f"the debug parent's own code is not -O0: {opt.get('consumer')}")
        shutil.rmtree(flags_dir, ignore_errors=True)

        setup = meson + ["setup", build, proj, "--wrap-mode=nodownload", "--force-fallback-for=uvcl",
                         f"--buildtype={a.buildtype}", "-Duvcl:subproject_optimization=inherit"]
        if os.path.exists(os.path.join(build, "build.ninja")):
            # Kept from an earlier run: ninja reconfigures by itself if a
            # meson.build changed. The options must still be these.
            opts = run(meson + ["introspect", "--buildoptions", build])
            current = {o["name"]: o["value"] for o in json.loads(opts.stdout)} if opts.returncode == 0 else {}
            if (current.get("buildtype") != a.buildtype or current.get("wrap_mode") != "nodownload"
                    or current.get("uvcl:subproject_optimization") != "inherit"):
                shutil.rmtree(build)
        if not os.path.exists(os.path.join(build, "build.ninja")):
            p = run(setup, env=env)
            if p.returncode != 0:
                print(p.stdout[-6000:], p.stderr[-6000:])
                failures.append("meson setup of the consumer failed")
                raise Stop()
        info = run(meson + ["introspect", "--projectinfo", build])
        subs = [sp.get("name") for sp in json.loads(info.stdout).get("subprojects", [])] if info.returncode == 0 else []
        if "uvcl" not in subs:
            print(info.stdout[-3000:])
            failures.append(f"the consumer's build does not have uvcl as a subproject (subprojects: {subs})")
        # The consumer's own code is compiled every run: its warnings are checked.
        shutil.rmtree(os.path.join(build, "consumer.p"), ignore_errors=True)

        intro = run(meson + ["introspect", "--targets", build])
        targets = {t["name"] for t in json.loads(intro.stdout)} if intro.returncode == 0 else set()
        print("targets:", " ".join(sorted(targets)))
        # uvcl-compiler is part of the library (the engine builds programs in it);
        # so are the archives libuvcl is linked from (src/meson.build).
        extra = targets - {"uvcl", "uvcl-compiler", "uvcl_core", "uvcl_compiler_path_library", "consumer"}
        if "uvcl" not in targets or "consumer" not in targets or extra:
            failures.append(f"unexpected targets for a consumer build: {sorted(targets)} "
                            "(uvcl's tests, tools, examples and benchmarks must be off as a subproject)")

        p = run(ninja + ["-C", build], env=env)
        out = p.stdout + p.stderr
        if p.returncode != 0:
            print(out[-8000:])
            failures.append("building the consumer failed")
            raise Stop()
        warnings = [l for l in out.splitlines() if "warning:" in l]
        own = [l for l in warnings if "main.cpp" in l and "subprojects" not in l]
        for l in warnings:
            print("  " + l)
        if own:
            failures.append(f"{len(own)} compiler warnings in the consumer's main.cpp")
        if len(warnings) > len(own):
            print(f"note: {len(warnings) - len(own)} compiler warnings in uvcl built as a subproject")

        exe = os.path.join(build, "consumer")
        p = run([exe], env=env, timeout=120)
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        if p.returncode != 0 or "consumer: ok" not in p.stdout:
            failures.append(f"the consumer program failed (exit {p.returncode})")
        if "x[0] = 2" not in p.stdout:
            failures.append("the README example's callback did not print x[0] = 2")
    except Stop:
        pass
    finally:
        if a.keep or keep_work:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    for f in failures:
        print("consumer_test: FAIL:", f, file=sys.stderr)
    if not failures:
        print("consumer_test: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
