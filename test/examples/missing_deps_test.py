#!/usr/bin/env python3
"""`meson setup` of uvcl where dependencies are missing ends with ONE error
that names each missing one with its Debian package.

The system's packages are hidden from pkg-config (PKG_CONFIG_LIBDIR pointing
nowhere) and from CMake's package search (cmake_prefix_path, CMAKE_PREFIX_PATH
pointing nowhere), and the wraps cannot download (--wrap-mode=nodownload):
libuv and the OpenCL headers (found through pkg-config only) are then
missing, whatever else CMake still finds in its system folders.

Usage: missing_deps_test.py SOURCE_ROOT MESON"""
import os
import re
import shlex
import subprocess
import sys
import tempfile


def main():
    src, meson = sys.argv[1], shlex.split(sys.argv[2])
    env = dict(os.environ, PKG_CONFIG_LIBDIR="/nonexistent", PKG_CONFIG_PATH="", CMAKE_PREFIX_PATH="/nonexistent")
    with tempfile.TemporaryDirectory(prefix="uvcl-missing-") as tmp:
        p = subprocess.run(meson + ["setup", os.path.join(tmp, "b"), src, "--wrap-mode=nodownload",
                                    "-Dcmake_prefix_path=/nonexistent"],
                           capture_output=True, text=True, env=env, timeout=300)
    out = p.stdout + p.stderr
    failures = []
    errors = [l for l in out.splitlines() if "ERROR:" in l]
    if p.returncode == 0:
        failures.append("meson setup succeeded with libuv hidden")
    if len(errors) != 1 or "uvcl: missing dependencies" not in errors[0]:
        failures.append(f"not exactly one error, uvcl's: {errors}")
    for want in ("libuv (Debian: libuv1-dev)", "OpenCL-Headers (Debian: opencl-headers or opencl-c-headers)"):
        if len(re.findall(r"^\s+" + re.escape(want) + r"$", out, re.M)) != 1:
            failures.append(f"the message does not name {want!r} once")
    print(out[out.find("ERROR:"):] if "ERROR:" in out else out[-3000:])
    for f in failures:
        print("missing_deps_test: FAIL:", f)
    print("missing_deps_test:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
