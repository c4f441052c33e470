#!/usr/bin/env python3
"""uvcl serve under attack: each request that crashed, froze or fooled the
server (issue: a trust model that holds), over real HTTP against a real
server. Every socket has a timeout and every wait a bound: a hang fails.

usage: attack_test.py UVCL SAXPY_JOB.json

Shares serve_test.py's helpers (a Server on port 0, request, raw, check).
Prints one line per check and "N passed, N failed"; exits 1 on a failure,
77 when the machine has no OpenCL device.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (reads UVCL and SAXPY from argv)
from serve_test import Server, auth_header, check, error_of, raw, request  # noqa: E402

UVCL, TOKEN = st.UVCL, st.TOKEN


def job(kernel_source, args, outputs=("y",), options=None, buffers=None):
    k = {"source": kernel_source}
    if options is not None:
        k["options"] = options
    return json.dumps({
        "buffers": buffers or {"y": {"type": "float", "count": 64}, "b": {"type": "float", "count": 64}},
        "kernels": {"k": k},
        "launches": [{"kernel": "k", "args": args, "global": [64]}],
        "outputs": list(outputs),
    }).encode()


def post(port, body, token=TOKEN):
    """(status, (error status, message)); a dropped connection (a crashed server) or a hang is status None."""
    try:
        status, _, data = request(port, "POST", "/v1/run", body=body, token=token, timeout=60)
    except (OSError, http.client.HTTPException) as e:
        return None, (None, repr(e))
    return status, error_of(data)


def alive(srv):
    try:
        status, _, _ = request(srv.port, "GET", "/v1/health", timeout=20)
    except (OSError, http.client.HTTPException):
        return False
    return status == 200 and srv.proc.poll() is None


def serve_refused(*args):
    """(exit code, stderr) of a server start that must fail at once; (None, why) if it started or hung."""
    try:
        p = subprocess.run([UVCL, "serve", "--listen", "127.0.0.1:0", *args], capture_output=True, text=True,
                           timeout=15)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return None, "still running after 15 s (it started, or hung reading)"


def usage_errors():
    """Flags out of range, and token files that are not regular files, stop the start at once."""
    for flag, value in (("--max-buffer-bytes", "17179869184G"), ("--max-launches", "18446744073709551616"),
                        ("--max-jobs", "99999999999999999999"), ("--idle-timeout-ms", "0")):
        rc, err = serve_refused(flag, value)
        check(rc == 1 and flag in err and value in err and "out of range" in err,
              f"{flag} {value}: refused, naming the option and the value", err)
    fifo = os.path.join(st.TMP, "token.fifo")
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
        rc, err = serve_refused("--token-file", path)
        check(rc == 1 and what in err and path in err, f"--token-file {path}: refused ({what})", err)


def kernels_and_limits(srv):
    port = srv.port
    image = "kernel void k(read_only image2d_t img, global float* y) { y[get_global_id(0)] = read_imagef(img, (int2)(0, 0)).x; }"
    status, (st_, msg) = post(port, job(image, ["b", "y"]))
    check(status == 422 and st_ == "IncorrectKernelArg" and "image2d_t img" in msg and "image" in msg,
          "a buffer for an image2d_t parameter: 422 IncorrectKernelArg", f"{status} {msg}")
    struct = ("typedef struct { float a; float b; float c; float d; } quad_t;\n"
              "kernel void k(quad_t q, global float* y) { y[get_global_id(0)] = q.a + q.d; }")
    status, (st_, msg) = post(port, job(struct, [{"uint": 1}, "y"]))
    check(status == 422 and st_ == "IncorrectKernelArg" and "quad_t q" in msg and "size" in msg,
          "a 4-byte scalar for a struct parameter: 422 IncorrectKernelArg", f"{status} {msg}")
    check(alive(srv), "the server is alive after both")

    inc = "kernel void k(global float* y) { y[get_global_id(0)] += 1.0f; }"
    wraps = json.loads(job(inc, ["y"]))
    wraps["launches"] = [dict(wraps["launches"][0], repeat=9223372036854775808) for _ in range(2)]
    status, (st_, msg) = post(port, json.dumps(wraps).encode())
    check(status == 422 and st_ == "InvalidJob" and "2^64" in msg, "repeat 2^63 twice: refused, not wrapped to 0",
          f"{status} {msg}")
    bytes_wrap = {"buffers": {"a": {"type": "char", "count": 9223372036854775808},
                              "b": {"type": "char", "count": 9223372036854775808}},
                  "kernels": {}, "launches": [], "outputs": []}
    status, (st_, msg) = post(port, json.dumps(bytes_wrap).encode())
    check(status == 422 and "2^64" in msg, "buffer sizes summing to 2^64: refused", f"{status} {msg}")

    # 200 000 outputs, the last a duplicate: the check was quadratic (11 s
    # with the loop held); now linear.
    n = 200_000
    buffers = ", ".join(f'"b{i}": {{"type": "char", "count": 1}}' for i in range(n))
    outputs = ", ".join(f'"b{i}"' for i in range(n)) + ', "b0"'
    body = f'{{"buffers": {{{buffers}}}, "kernels": {{}}, "launches": [], "outputs": [{outputs}]}}'.encode()
    t = time.monotonic()
    status, (st_, msg) = post(port, body)
    took = time.monotonic() - t
    # A guard against minutes, not a timing target (sanitizer builds are slow).
    check(status == 400 and "duplicate output" in msg and took < 60, f"200k outputs with a duplicate: 400 in {took:.2f} s",
          f"{status} {msg[:200]}")
    check(alive(srv), "the server is alive after the limits")


def sources(srv):
    port = srv.port
    printing = 'kernel void k(global float* y) { printf("%d\\n", 1); y[0] = 1.0f; }'
    status, (st_, msg) = post(port, job(printing, ["y"]))
    check(status == 400 and "printf" in msg and "kernels.k.source" in msg, "printf in a kernel: 400 naming it",
          f"{status} {msg}")
    pasted = ('#define CAT(a, b) a##b\n'
              'kernel void k(global float* y) { CAT(pr, intf)("x\\n"); y[0] = 1.0f; }')
    status, (st_, msg) = post(port, job(pasted, ["y"]))
    # It gets past the check (a -D cannot rename printf): the server's
    # stdout is /dev/null, so it prints nowhere, and the server carries on.
    check(status == 200 and alive(srv), "printf pasted together with ##: prints nowhere, the server carries on",
          f"{status} {msg[:300]}")
    for src, what in (('#include "/etc/passwd"\nkernel void k(global float* y) { y[0] = 1.0f; }', "#include"),
                      ('#pragma OPENCL EXTENSION all : enable\nkernel void k(global float* y) { y[0] = 1.0f; }',
                       "#pragma"),
                      ('_Pragma("clang diagnostic ignored \\"-Wall\\"")\nkernel void k(global float* y) { y[0] = 1; }',
                       "_Pragma"),
                      ('#inc\\\nlude "/etc/passwd"\nkernel void k(global float* y) { y[0] = 1.0f; }',
                       "#include split by a line splice"),
                      ('#if __has_include("/etc/passwd")\n#endif\nkernel void k(global float* y) { y[0] = 1; }',
                       "__has_include")):
        status, (st_, msg) = post(port, job(src, ["y"]))
        check(status == 400 and st_ == "InvalidJob" and "kernels.k.source" in msg, f"{what} in a source: 400",
              f"{status} {msg}")
    ok = "kernel void k(global float* y) { y[get_global_id(0)] = X; }"
    for options in ("-I/etc", "-include /etc/passwd", "-Xclang -load", "-DX=1\n#include", "-Dprintf=puts"):
        status, (st_, msg) = post(port, job(ok, ["y"], options=options))
        check(status == 400 and "kernels.k.options" in msg, f"build options {options!r}: 400", f"{status} {msg}")
    status, _, _ = request(port, "POST", "/v1/run", body=job(ok, ["y"], options="-D X=2.0f -cl-mad-enable -w"))
    check(status == 200, "allowed build options still work", status)
    broken = "kernel void k(global float* y) {\n  y[0] = oops / 2;\n}\n"
    status, (st_, msg) = post(port, job(broken, ["y"]))
    check(status == 422 and "oops" in msg and "<source>" in msg and os.getcwd() not in msg and "/tmp/" not in msg
          and "pocl" not in msg.lower().split("device")[0], "a build log names no server path", f"{status} {msg}")


def strict_http(srv):
    port = srv.port
    for version in (b"HTTP/2.0", b"HTTP/9.9", b"HTTP/0.9"):
        got = raw(port, b"GET /v1/health " + version + b"\r\nHost: x\r\n" + auth_header() + b"\r\n")
        check(got.startswith(b"HTTP/1.1 505 "), f"{version.decode()}: 505", got[:80])
    got = raw(port, b"GET /v1/health HTTP/1.1\r\nHost : x\r\n" + auth_header() + b"\r\n")
    check(got.startswith(b"HTTP/1.1 400 ") and b"header name" in got, "whitespace before a header colon: 400", got[:200])
    got = raw(port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization : Bearer " + TOKEN.encode() + b"\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 400 "), "\"Authorization :\" is not taken as the token either", got[:80])
    head = (b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"Transfer-Encoding: chunked\r\n\r\n")
    got = raw(port, head + b"5\r\nhelloXY0\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 400 ") and b"CRLF" in got, "chunk data followed by XY: 400", got[:200])
    # The chunk ends exactly where a read ends: its CRLF is checked in the next one.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head + b"5\r\nhello")
    time.sleep(0.3)
    s.sendall(b"\rX0\r\n\r\n")
    got = st.read_to_close(s)
    s.close()
    check(got.startswith(b"HTTP/1.1 400 ") and b"CRLF" in got, "chunk data followed by CR X across two reads: 400",
          got[:200])
    status, _, data = request(port, "POST", "/v1/run", body=job(
        "kernel void k(global float* y) { y[get_global_id(0)] = 2.0f; }", ["y"]), chunked=True)
    check(status == 200 and json.loads(data)["outputs"]["y"] == [2.0] * 64, "a well-formed chunked body still works",
          f"{status} {data[:200]}")


def connections():
    """Per-client cap, header deadline, early authentication."""
    token_file = os.path.join(st.TMP, "attack-token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    srv = Server("--allow-source", "--token-file", token_file, "--max-connections-per-client", "3", "--header-timeout-ms", "1000",
                 "--request-timeout-ms", "20000", "--idle-timeout-ms", "20000")
    if not check(srv.port is not None, "server with --max-connections-per-client 3", srv.stderr()):
        return
    port = srv.port
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
    time.sleep(0.3)
    extra = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        closed = extra.recv(100) == b""
    except (socket.timeout, ConnectionResetError):
        closed = False
    extra.close()
    check(closed, "a 4th connection from the same address is closed at once")
    held.pop().close()
    time.sleep(0.3)
    status, _, _ = request(port, "GET", "/v1/health", timeout=10)
    check(status == 200, "a slot freed by a closed connection is usable again", status)

    # Header deadline: a client trickling header bytes is cut off after
    # --header-timeout-ms (1 s here), not --request-timeout-ms (20 s).
    s = held.pop()
    t = time.monotonic()
    got = b""
    try:
        for ch in b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 200:
            s.sendall(bytes([ch]))
            time.sleep(0.05)
            s.setblocking(False)
            try:
                got = s.recv(65536)
            except BlockingIOError:
                pass
            s.setblocking(True)
            if got:
                break
        s.settimeout(10)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    s.close()
    took = time.monotonic() - t
    check(got.startswith(b"HTTP/1.1 408 ") and b"headers" in got and took < 6,
          f"headers trickled past --header-timeout-ms: 408 after {took:.1f} s", got[:200])

    # Authentication as soon as the Authorization header is complete: a
    # wrong token is answered although the headers never end.
    s = held.pop()
    s.settimeout(5)
    t = time.monotonic()
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nX-More: ")
    try:
        got = s.recv(65536)
    except socket.timeout:
        got = b"<timeout>"
    s.close()
    took = time.monotonic() - t
    check(got.startswith(b"HTTP/1.1 401 ") and took < 0.9, f"a wrong token is refused before the headers end ({took:.2f} s)",
          got[:80])
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM: exit 0", rc)


def main():
    ref = subprocess.run([UVCL, "devices"], capture_output=True, text=True, timeout=60)
    if ref.returncode != 0:
        print("no OpenCL here: skipped")
        return 77
    usage_errors()
    # A server per part, so that a failure (a crash) in one leaves the others
    # to report. These run without a token: request() sends one, ignored.
    for part in (kernels_and_limits, sources, strict_http):
        srv = Server("--allow-source", "--max-body", "32M", "--max-launches", "1000", "--max-jobs", "8")
        if not check(srv.port is not None, f"server starts ({part.__name__})", srv.stderr()):
            return 1
        part(srv)
        check(alive(srv), f"the server is alive at the end ({part.__name__})")
        rc = srv.stop(signal.SIGTERM)
        check(rc == 0, "SIGTERM: exit 0", rc)
    connections()
    return 0


if __name__ == "__main__":
    st.run_script("serve-attack", main)
