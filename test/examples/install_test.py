#!/usr/bin/env python3
"""Installs the current build into a temporary DESTDIR and checks it.

`meson install --no-rebuild --destdir TMP` of the build under test, then:
the public headers (include/uvcl/*.hpp), the shared library with its
versioned SONAME, the `uvcl` program (when tools are built), uvcl.pc and the
CMake package files are installed; the installed programs carry a RUNPATH
relative to themselves ($ORIGIN) and run from TMP with no LD_LIBRARY_PATH.
Then one consumer, built against the installed tree and run without
LD_LIBRARY_PATH; it must build its kernel in the installed uvcl-compiler,
found relative to the installed libuvcl (the configured prefix holds none),
not fall back to inline builds:
  --consumer pkgconfig: a tiny program compiled with `pkg-config --cflags
    --libs uvcl` (PKG_CONFIG_PATH pointing into TMP, prefix redefined to
    TMP's; no -std flag of its own: uvcl.pc's Cflags give C++20);
  --consumer cmake: a CMake project with find_package(uvcl) and
    target_link_libraries(app uvcl::uvcl) (CMAKE_PREFIX_PATH = TMP's prefix).

Usage: install_test.py --build-root DIR --source-root DIR [--meson CMD]
                       [--cxx CMD] [--consumer pkgconfig|cmake] [--tools] [--keep]"""
import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from checks import Checks

PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <vector>

#include <uvcl/engine.hpp>

int main() {
  uvcl::Config config;
  config.debug_backends = true;  // names the uvcl-compiler it starts
  auto engine = uvcl::Engine::create(config);
  if (!engine) { std::fprintf(stderr, "%s\n", engine.error().to_string().c_str()); return 1; }
  uvcl::Engine& e = *engine.value();
  auto p = e.compile_sync(0, "__kernel void iota(__global uint* x) { x[get_global_id(0)] = get_global_id(0) * 3u; }");
  if (!p) { std::fprintf(stderr, "%s\n", p.error().to_string().c_str()); return 1; }
  auto k = e.kernel(p.value(), "iota");
  auto b = e.allocate(0, 256 * sizeof(unsigned));
  if (!k || !b) return 1;
  if (!e.launch({k.value(), {uvcl::KernelArg::of(b.value())}, {256}, {}, 0})) return 1;
  auto r = e.read_sync(b.value(), 0, 256 * sizeof(unsigned));
  if (!r) { std::fprintf(stderr, "%s\n", r.error().to_string().c_str()); return 1; }
  std::vector<unsigned> v(256);
  std::memcpy(v.data(), r->data(), r->size());
  for (unsigned i = 0; i < 256; ++i)
    if (v[i] != i * 3u) { std::fprintf(stderr, "x[%u] = %u\n", i, v[i]); return 1; }
  const uvcl::EngineStats s = e.stats();
  std::printf("installed uvcl: ok (%zu devices)\n", e.device_count());
  std::printf("builds: %llu in the compiler process, %llu inline\n",
              static_cast<unsigned long long>(s.process_builds), static_cast<unsigned long long>(s.inline_builds));
  return 0;
}
"""


def run(cmd, **kw):
    print("$", " ".join(cmd))
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


CMAKE_LISTS = """cmake_minimum_required(VERSION 3.16)
project(uvcl_cmake_consumer CXX)
find_package(uvcl 0.1 REQUIRED)
add_executable(hello hello.cpp)
target_link_libraries(hello PRIVATE uvcl::uvcl)
"""


def check_compiler_process(r, dest, check):
    """The installed tree, run from where it was put, builds in its own
    uvcl-compiler: found from libuvcl's folder, not from the configured
    prefix (where nothing is installed), and with no fallback to inline
    builds."""
    started = re.search(r"uvcl: device 0: started (\S+) \(pid", r.stderr)
    check(started is not None and started.group(1).startswith(dest + "/"),
          f"the installed uvcl-compiler is started, from the relocated tree "
          f"({started.group(1) if started else 'none started'})")
    check("builds: 1 in the compiler process, 0 inline" in r.stdout,
          "the program's build ran in the compiler process, not inline")
    check("cannot be used" not in r.stderr, "no fallback to inline builds is reported")


def cmake_consumer(a, dest, prefix, tmp, find, check, env):
    """find_package(uvcl) from the installed tree, then the program runs."""
    configs = find(r"/cmake/uvcl/uvclConfig\.cmake$")
    versions = find(r"/cmake/uvcl/uvclConfigVersion\.cmake$")
    if not check(bool(configs) and bool(versions), "uvclConfig.cmake and uvclConfigVersion.cmake installed"):
        return 1
    proj = os.path.join(tmp, "cmake-consumer")
    build = os.path.join(tmp, "cmake-build")
    os.makedirs(proj)
    open(os.path.join(proj, "CMakeLists.txt"), "w").write(CMAKE_LISTS)
    open(os.path.join(proj, "hello.cpp"), "w").write(PROGRAM)
    cxx = shlex.split(a.cxx)
    c = run(["cmake", "-S", proj, "-B", build, "-DCMAKE_PREFIX_PATH=" + dest + prefix,
             "-DCMAKE_CXX_COMPILER=" + shutil.which(cxx[0]), "-DCMAKE_BUILD_TYPE=Release"], env=env)
    if not check(c.returncode == 0, "cmake configures a project with find_package(uvcl 0.1 REQUIRED)"):
        print(c.stdout[-4000:], c.stderr[-4000:])
        return 1
    b = run(["cmake", "--build", build], env=env)
    if not check(b.returncode == 0, "it builds against uvcl::uvcl (C++20 from the target)"):
        print(b.stdout[-4000:], b.stderr[-4000:])
        return 1
    exe = os.path.join(build, "hello")
    ldd = run(["ldd", exe], env=env)
    check(any(dest in l for l in ldd.stdout.splitlines() if "libuvcl" in l), "it loads the installed libuvcl")
    r = run([exe], timeout=120, env=env)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0 and "installed uvcl: ok" in r.stdout, "the CMake consumer runs a kernel")
    check_compiler_process(r, dest, check)
    return check.exit_code()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-root", required=True)
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--meson", default="meson")
    ap.add_argument("--cxx", default="c++")
    ap.add_argument("--tools", action="store_true")
    ap.add_argument("--consumer", choices=["pkgconfig", "cmake"], default="pkgconfig")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    check = Checks("install_test")

    tmp = tempfile.mkdtemp(prefix="uvcl-install-")
    dest = os.path.join(tmp, "dest")
    try:
        p = run(shlex.split(a.meson) + ["install", "-C", a.build_root, "--no-rebuild", "--destdir", dest])
        if not check(p.returncode == 0, "meson install --destdir succeeds"):
            print(p.stdout[-4000:], p.stderr[-4000:])
            return 1

        files = [os.path.relpath(f, dest) for f in glob.glob(os.path.join(dest, "**"), recursive=True)
                 if os.path.isfile(f) or os.path.islink(f)]
        for f in sorted(files):
            print("  installed:", "/" + f)

        def find(pattern):
            return [f for f in files if re.search(pattern, f)]

        headers = sorted(os.path.basename(h) for h in glob.glob(os.path.join(a.source_root, "include", "uvcl", "*.hpp")))
        for h in headers:
            check(find(r"(^|/)include/uvcl/" + re.escape(h) + "$"), f"header include/uvcl/{h}")
        check(find(r"(^|/)lib[^/]*/(.*/)?libuvcl\.so"), "shared library libuvcl.so*")
        check(find(r"(^|/)libexec/uvcl-compiler$"), "the compiler process (libexec/uvcl-compiler)")
        if a.tools:
            check(find(r"(^|/)bin/uvcl$"), "the uvcl program (bin/uvcl)")
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)  # everything below runs without it
        libs = find(r"(^|/)lib[^/]*/(.*/)?libuvcl\.so\.[0-9]+\.[0-9]+\.[0-9]+$")
        if check(len(libs) == 1, f"one versioned libuvcl.so.X.Y.Z ({libs})"):
            d = run(["readelf", "-d", os.path.join(dest, libs[0])])
            soname = re.search(r"\(SONAME\).*\[(.*)\]", d.stdout)
            check(soname is not None and re.fullmatch(r"libuvcl\.so\.[0-9]+", soname.group(1)) is not None,
                  f"SONAME libuvcl.so.N ({soname.group(1) if soname else 'none'})")
            check(os.path.islink(os.path.join(dest, libs[0][:libs[0].rindex(".so.")] + ".so")),
                  "libuvcl.so is a link to it (for -luvcl)")
        programs = find(r"(^|/)libexec/uvcl-compiler$") + (find(r"(^|/)bin/uvcl$") if a.tools else [])
        for prog in programs:
            d = run(["readelf", "-d", os.path.join(dest, prog)])
            runpath = re.search(r"\(RUNPATH\).*\[(.*)\]", d.stdout)
            check(runpath is not None and runpath.group(1).startswith("$ORIGIN/"),
                  f"{prog}: RUNPATH relative to the program ({runpath.group(1) if runpath else 'none'})")
        if a.tools and find(r"(^|/)bin/uvcl$"):
            v = run([os.path.join(dest, find(r"(^|/)bin/uvcl$")[0]), "--version"], env=env)
            check(v.returncode == 0 and "uvcl" in v.stdout,
                  f"the installed uvcl runs without LD_LIBRARY_PATH ({v.stdout.strip()} {v.stderr.strip()[:200]})")
        pcs = find(r"/pkgconfig/uvcl\.pc$")
        if not check(bool(pcs), "pkg-config file uvcl.pc"):
            return 1
        pc_path = os.path.join(dest, pcs[0])
        pc = open(pc_path).read()
        check(re.search(r"^Requires:.*\blibuv\b", pc, re.M) is not None, "uvcl.pc requires libuv")
        check(not re.search(r"^Libs:.*-lOpenCL", pc, re.M), "uvcl.pc does not link -lOpenCL (it is loaded at run time)")
        check(not re.search(r"^Requires(\.private)?:.*(OpenCL|simdjson)", pc, re.M),
              "uvcl.pc requires neither OpenCL-Headers nor simdjson (both internal)")
        prefix = re.search(r"^prefix=(.*)$", pc, re.M).group(1).strip()

        if a.consumer == "cmake":
            return cmake_consumer(a, dest, prefix, tmp, find, check, env)

        # Compile and run a tiny program against the installed tree.
        env["PKG_CONFIG_PATH"] = os.path.dirname(pc_path) + os.pathsep + env.get("PKG_CONFIG_PATH", "")
        flags = run(["pkg-config", "--define-variable=prefix=" + dest + prefix, "--cflags", "--libs", "uvcl"], env=env)
        if not check(flags.returncode == 0, "pkg-config --cflags --libs uvcl"):
            print(flags.stderr)
            return 1
        print("  flags:", flags.stdout.strip())
        check("SIMDJSON" not in flags.stdout, "no simdjson compile flags reach consumers")
        static = run(["pkg-config", "--define-variable=prefix=" + dest + prefix, "--static", "--libs", "uvcl"], env=env)
        print("  --static --libs:", static.stdout.strip())
        # libuvcl.so links libsimdjson.so and libuv: a static link needs both.
        check(static.returncode == 0 and all(f in shlex.split(static.stdout) for f in ("-luvcl", "-luv", "-lsimdjson")),
              "pkg-config --static --libs uvcl names -luvcl, -luv and -lsimdjson")
        check(dest in flags.stdout, "pkg-config points into the installed tree")
        check("-std=c++20" in shlex.split(flags.stdout), "pkg-config --cflags gives -std=c++20")
        libdirs = [f[2:] for f in shlex.split(flags.stdout) if f.startswith("-L")]
        src = os.path.join(tmp, "hello.cpp")
        exe = os.path.join(tmp, "hello")
        open(src, "w").write(PROGRAM)
        rpath = [f"-Wl,-rpath,{d}" for d in libdirs]
        c = run(shlex.split(a.cxx) + ["-Wall", "-Wextra", "-Wpedantic", src, "-o", exe]
                + shlex.split(flags.stdout) + rpath, env=env)
        if not check(c.returncode == 0, "a program compiles and links against the installed uvcl"):
            print(c.stdout, c.stderr)
            return 1
        check("warning:" not in c.stderr, "no warnings from the installed headers")
        ldd = run(["ldd", exe])
        check(any(dest in l for l in ldd.stdout.splitlines() if "libuvcl" in l), "it loads the installed libuvcl")
        r = run([exe], timeout=120, env=env)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        check(r.returncode == 0 and "installed uvcl: ok" in r.stdout, "the program runs a kernel")
        check_compiler_process(r, dest, check)
    finally:
        if a.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
