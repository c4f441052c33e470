#!/usr/bin/env python3
"""uvcl serve: how answers are sent, over real HTTP against a real server.
Every socket has a timeout and every wait a bound: a hang fails.

usage: answer_test.py UVCL SAXPY_JOB.json

- A large JSON answer (8M char, about 43 MiB of text) is written as it is
  formatted (chunked): the server's peak RSS grows by well under the
  answer's size (what it holds is the 8 MiB read from the device, and on
  PoCL the 8 MiB device buffer); the answer parses and equals the expected
  values.
- A client that reads its large answer (8M uint, about 94 MiB) slowly does
  not stall others: /v1/health answers quickly meanwhile, and the loop's
  largest lag stays small.
- Accept: application/octet-stream (one output, raw bytes) and
  multipart/mixed (one .npy part per output); 406 for octet-stream of a job
  with two outputs.
- HTTP/1.0 (no chunks: the body ends with the connection); pipelining after
  a streamed answer.
- A client that stops reading a streamed answer is dropped after
  --idle-timeout-ms without progress; its reservation goes back.
- --answer-budget: a job whose outputs do not fit beside answers not yet
  sent is 503 with Retry-After, and runs once they were sent; outputs
  larger than the whole budget are 413.

Prints one line per check and "N passed, N failed"; exits 1 on a failure,
77 when the machine has no OpenCL device.
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (reads UVCL and SAXPY from argv)
from serve_test import Server, check, error_of, metrics, request, wait_for  # noqa: E402

UVCL = st.UVCL
HASH = 2654435761  # y[i] = i * HASH mod 2^32: ten digits mostly, so the text is about 3x the bytes

KERNELS = (
    "kernel void spread(global uint* y) { uint i = get_global_id(0); y[i] = i * 2654435761u; }\n"
    "kernel void spread8(global char* y) { uint i = get_global_id(0); y[i] = (char)((i * 2654435761u) >> 24); }\n"
    "kernel void two(global uint* a, global float* b) {\n"
    "  uint i = get_global_id(0); a[i] = i * 2654435761u; b[i] = (float)i * 0.5f; }\n")


def spread_job(n, kernel="spread", type_="uint"):
    return json.dumps({
        "buffers": {"y": {"type": type_, "count": n}},
        "launches": [{"kernel": "answers:" + kernel, "args": ["y"], "global": [n]}],
        "outputs": ["y"],
    }).encode()


def two_job(n):
    return json.dumps({
        "buffers": {"a": {"type": "uint", "count": n}, "b": {"type": "float", "count": n}},
        "launches": [{"kernel": "answers:two", "args": ["a", "b"], "global": [n]}],
        "outputs": ["a", "b"],
    }).encode()


def chars_job(n):
    return spread_job(n, "spread8", "char")


def expected_chars(n):
    return [v - 256 if v >= 128 else v for v in (((i * HASH) & 0xFFFFFFFF) >> 24 for i in range(n))]


def expected_spread(n):
    return [(i * HASH) & 0xFFFFFFFF for i in range(n)]


def vm(pid, key):
    """A /proc/PID/status value in KiB (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Reply:
    def __init__(self):
        self.status, self.headers, self.body, self.error = None, {}, b"", None


def read_reply(s, pace=None, http10=False):
    """Reads one HTTP answer from socket `s` (Content-Length, chunked, or to the close).
    pace(n_bytes_so_far) may sleep to read slowly."""
    r = Reply()
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            if not b:
                raise OSError("closed before the headers")
            buf += b
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        r.status = int(lines[0].split()[1])
        for line in lines[1:]:
            k, _, v = line.partition(":")
            r.headers[k.strip().lower()] = v.strip()
        body = bytearray()

        def more():
            nonlocal buf
            if pace:
                pace(len(body) + len(buf))
            b = s.recv(65536)
            if not b:
                raise OSError("closed early")
            buf += b

        if "content-length" in r.headers:
            n = int(r.headers["content-length"])
            while len(buf) < n:
                more()
            body += buf[:n]
            buf = buf[n:]
        elif r.headers.get("transfer-encoding") == "chunked":
            while True:
                while b"\r\n" not in buf:
                    more()
                size_line, _, buf = buf.partition(b"\r\n")
                size = int(size_line, 16)
                while len(buf) < size + 2:
                    more()
                if buf[size:size + 2] != b"\r\n":
                    raise OSError("chunk data not followed by CRLF")
                body += buf[:size]
                buf = buf[size + 2:]
                if size == 0:
                    break
        else:
            while True:
                body += buf
                buf = b""
                if pace:
                    pace(len(body))
                b = s.recv(65536)
                if not b:
                    break
                buf = b
        r.body = bytes(body)
        r.rest = buf
    except (OSError, ValueError, IndexError) as e:
        r.error = repr(e)
    return r


def post_raw(port, body, accept=None, http10=False, pace=None, sock_opts=None, timeout=120):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    for level, opt, val in sock_opts or ():
        s.setsockopt(level, opt, val)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    head = f"POST /v1/run HTTP/{'1.0' if http10 else '1.1'}\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    if accept:
        head += f"Accept: {accept}\r\n"
    s.sendall(head.encode() + b"\r\n" + body)
    r = read_reply(s, pace=pace, http10=http10)
    s.close()
    return r


def parse_npy(data):
    if data[:8] != b"\x93NUMPY\x01\x00":
        return None, None
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode("latin-1")
    return header, data[10 + hlen:]


def parse_multipart(content_type, body):
    boundary = content_type.split("boundary=")[1].encode()
    parts = []
    for chunk in body.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        chunk = chunk[2:]  # CRLF after the delimiter
        head, _, data = chunk.partition(b"\r\n\r\n")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        headers = {}
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        parts.append((headers, data))
    return parts


def streamed_json(srv, n):
    """A large JSON answer is streamed: peak RSS grows by well under its size."""
    pid = srv.proc.pid
    # Once through, so that what the first job leaves resident (PoCL's
    # allocations, the kernel's first run) is in the baseline.
    warm = post_raw(srv.port, chars_job(n), accept="application/octet-stream")
    check(warm.status == 200 and len(warm.body) == n, "warm-up job (octet-stream)", warm.error or warm.status)
    base = vm(pid, "VmRSS")
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    r = post_raw(srv.port, chars_job(n))
    peak = vm(pid, "VmHWM")
    size = len(r.body)
    growth = (peak - base) * 1024
    got = json.loads(r.body) if r.status == 200 else {}
    values_ok = got.get("outputs", {}).get("y") == expected_chars(n)
    check(r.status == 200 and r.headers.get("transfer-encoding") == "chunked" and values_ok
          and set(got) == {"device", "outputs", "stats"} and r.body.endswith(b"}\n"),
          f"{n} char as JSON: chunked, {size / 2**20:.1f} MiB, parses, every value right", r.error or r.status)
    check(size > 32 * 2**20 and growth < size / 2,
          f"... the server's peak RSS grew {growth / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB answer "
          f"(bound: half of it)", f"base {base} KiB, peak {peak} KiB")
    return got


def slow_reader(lib, n):
    """A client reading a large answer slowly: health answers quickly meanwhile, the loop never stalls
    (a fresh server: its loop lag maximum is this test's), and the answer is whole."""
    srv = Server("--kernels", lib, "--max-response-bytes", "0", "--max-buffer-bytes", "1G")
    if not check(srv.port is not None, "a fresh server for the slow reader", srv.stderr()):
        return
    port = srv.port
    done = {}

    def pace(nbytes):
        if nbytes < 8 * 2**20:
            time.sleep(0.02)  # 64 KiB per 20 ms for the first 8 MiB: several seconds

    def client():
        done["r"] = post_raw(port, spread_job(n), pace=pace,
                             sock_opts=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)])

    t = threading.Thread(target=client)
    t.start()
    worst, count = 0.0, 0
    streaming = False
    while t.is_alive():
        t0 = time.monotonic()
        status, _, _ = request(port, "GET", "/v1/health", token=None, timeout=30)
        worst = max(worst, time.monotonic() - t0)
        count += 1
        if status != 200:
            worst = 99.0
        time.sleep(0.01)
    t.join()
    r = done.get("r")
    ok = r is not None and r.status == 200 and json.loads(r.body)["outputs"]["y"] == expected_spread(n)
    check(ok, "a slow reader gets its whole answer, every value right", r.error if r else None)
    _, m = metrics(port, token=None)
    lag = m.get("uvcl_loop_lag_max_seconds", 99)
    # Formatting the whole answer at once held the loop for 0.6 s for 6M
    # uint on the project's 2-core machine; a piece takes about a millisecond.
    check(count >= 10 and worst < 0.4 and lag < 0.4,
          f"meanwhile {count} GET /v1/health answered, the slowest in {worst * 1000:.0f} ms; the loop's largest "
          f"lag {lag * 1000:.0f} ms (bound 400 ms each)", f"{worst} {lag}")
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM: exit 0", rc)


def binary_formats(srv):
    port = srv.port
    n = 100_000
    r = post_raw(port, spread_job(n), accept="application/octet-stream")
    vals = list(struct.unpack(f"<{n}I", r.body)) if r.status == 200 and len(r.body) == 4 * n else None
    check(r.status == 200 and r.headers.get("content-type") == "application/octet-stream"
          and r.headers.get("content-length") == str(4 * n) and r.headers.get("uvcl-output-name") == '"y"'
          and r.headers.get("uvcl-output-type") == "uint" and r.headers.get("uvcl-output-count") == str(n)
          and vals == expected_spread(n),
          "Accept: application/octet-stream: the output's bytes, Content-Length, name, type and count headers",
          f"{r.status} {r.headers} {r.error}")
    r = post_raw(port, two_job(1000), accept="application/octet-stream")
    st_, msg = error_of(r.body)
    check(r.status == 406 and st_ == "NotAcceptable" and "multipart/mixed" in msg and "2" in msg,
          "octet-stream of a job with two outputs: 406 naming multipart/mixed", f"{r.status} {msg}")
    r = post_raw(port, two_job(1000), accept="multipart/mixed, application/json;q=0.5")
    ok = False
    detail = f"{r.status} {r.headers} {r.error}"
    if r.status == 200 and r.headers.get("content-type", "").startswith("multipart/mixed; boundary="):
        parts = parse_multipart(r.headers["content-type"], r.body)
        if len(parts) == 3:
            meta = json.loads(parts[0][1])
            ha, da = parse_npy(parts[1][1])
            hb, db = parse_npy(parts[2][1])
            ok = (set(meta) == {"device", "outputs", "stats"} and meta["outputs"] == {}
                  and parts[0][0].get("content-type") == "application/json"
                  and parts[1][0].get("content-type") == "application/x-npy"
                  and 'filename="a.npy"' in parts[1][0].get("content-disposition", "")
                  and "'descr': '<u4'" in ha and "'shape': (1000,)" in ha
                  and list(struct.unpack("<1000I", da)) == expected_spread(1000)
                  and "'descr': '<f4'" in hb and list(struct.unpack("<1000f", db)) == [i * 0.5 for i in range(1000)]
                  and (10 + len(ha)) % 64 == 0)
            detail = f"{parts[0][1][:200]} {ha} {hb}"
        else:
            detail = f"{len(parts)} parts"
    check(ok, "Accept: multipart/mixed: a JSON part (device, stats) and one .npy part per output, values right",
          detail)
    # curl, as docs/serve.md shows it.
    out = os.path.join(st.TMP, "y.bin")
    p = subprocess.run([st.CURL, "-sS", "-H", "Accept: application/octet-stream", "--data-binary",
                        spread_job(1000).decode(), "-o", out, f"http://127.0.0.1:{port}/v1/run"],
                       capture_output=True, timeout=60)
    with open(out, "rb") as f:
        data = f.read()
    check(p.returncode == 0 and list(struct.unpack("<1000I", data)) == expected_spread(1000),
          "curl -H 'Accept: application/octet-stream' -o y.bin: the bytes", p.stderr)


def http_versions(srv):
    port = srv.port
    r = post_raw(port, spread_job(50_000), http10=True)
    got = json.loads(r.body) if r.status == 200 else {}
    check(r.status == 200 and "transfer-encoding" not in r.headers and r.headers.get("connection") == "close"
          and got.get("outputs", {}).get("y") == expected_spread(50_000),
          "HTTP/1.0: no chunks, the body ends with the connection", f"{r.status} {r.headers} {r.error}")
    # Pipelined: a streamed answer, then health on the same connection, in order.
    body = spread_job(200_000)
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(f"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
              + b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
    first = read_reply(s)
    second = Reply()
    if first.error is None:
        # What the first read took past its answer belongs to the second.
        class Pre:
            def __init__(self, pre, sock):
                self.pre, self.sock = pre, sock

            def recv(self, n):
                if self.pre:
                    b, self.pre = self.pre, b""
                    return b
                return self.sock.recv(n)
        second = read_reply(Pre(first.rest, s))
    s.close()
    check(first.status == 200 and json.loads(first.body)["outputs"]["y"] == expected_spread(200_000)
          and second.status == 200 and json.loads(second.body) == {"status": "ok"},
          "pipelined after a streamed answer: both answered, in order", f"{first.error} {second.error}")


def budget(lib):
    srv = Server("--kernels", lib, "--answer-budget", "12M", "--max-response-bytes", "0")
    if not check(srv.port is not None, "server with --answer-budget 12M", srv.stderr()):
        return
    port = srv.port
    n = 2 * 2**20  # 8 MiB of uint: more than the sockets' buffers take
    r = post_raw(port, spread_job(4 * n), accept="application/octet-stream")
    st_, msg = error_of(r.body)
    check(r.status == 413 and st_ == "ResponseTooLarge" and "--answer-budget" in msg,
          "outputs larger than the whole budget: 413 naming --answer-budget", f"{r.status} {msg}")
    # A client that asks and does not read: its answer holds its reservation.
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(60)
    s.connect(("127.0.0.1", port))
    body = spread_job(n)
    s.sendall(f"POST /v1/run HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    held = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_jobs_running", 1) == 0
                    and metrics(port, token=None)[1].get("uvcl_answer_bytes_held", 0) > 4 * n, timeout=60, step=0.05)
    r = post_raw(port, spread_job(n), accept="application/octet-stream")
    st_, msg = error_of(r.body)
    check(held and r.status == 503 and st_ == "AnswerBudgetFull" and r.headers.get("retry-after") == "1"
          and "--answer-budget" in msg,
          "a second such job while the first answer is unsent: 503 AnswerBudgetFull, Retry-After",
          f"held={held} {r.status} {msg}")
    first = read_reply(s)
    s.close()
    ok_first = first.status == 200 and len(first.body) == 4 * n
    released = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_answer_bytes_held", 1) == 0, timeout=30)
    r = post_raw(port, spread_job(n), accept="application/octet-stream")
    _, m = metrics(port, token=None)
    check(ok_first and released and r.status == 200 and len(r.body) == 4 * n
          and m.get('uvcl_jobs_rejected_total{reason="answer_budget"}') == 1,
          "once the first answer was read: the budget is free, the job runs", f"{first.error} {r.status}")
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM: exit 0", rc)


def stalled_reader(lib):
    """A client that stops reading its streamed answer is dropped after --idle-timeout-ms without
    progress, and what its answer held goes back to the budget."""
    srv = Server("--kernels", lib, "--idle-timeout-ms", "1000", "--max-response-bytes", "0")
    if not check(srv.port is not None, "server with --idle-timeout-ms 1000", srv.stderr()):
        return
    port = srv.port
    n = 2 * 2**20
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    body = spread_job(n)
    s.sendall(f"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    t = time.monotonic()
    cut = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_http_streams_cut_total", 0) == 1, timeout=30,
                   step=0.1)
    took = time.monotonic() - t
    _, m = metrics(port, token=None)
    s.close()
    check(cut and m.get("uvcl_answer_bytes_held") == 0 and m.get("uvcl_jobs_running") == 0,
          f"a client that stops reading its {n}-uint JSON answer: dropped {took:.1f} s after it asked, "
          f"its reservation released", {k: v for k, v in m.items() if "answer" in k or "stream" in k})
    status, _, _ = request(port, "GET", "/v1/health", token=None)
    check(status == 200, "... the server serves on", status)
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM: exit 0", rc)


def main():
    probe = subprocess.run([UVCL, "devices"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0 or "(0 devices)" in probe.stderr + probe.stdout:
        print("no OpenCL here: skipped")
        return 77
    lib = os.path.join(st.TMP, "kernels")
    os.mkdir(lib)
    with open(os.path.join(lib, "answers.cl"), "w") as f:
        f.write(KERNELS)
    srv = Server("--kernels", lib, "--max-response-bytes", "0", "--max-buffer-bytes", "1G")
    if not check(srv.port is not None, "server with --kernels", srv.stderr()):
        return 1
    streamed_json(srv, 8 * 2**20)
    slow_reader(lib, 8 * 2**20)
    binary_formats(srv)
    http_versions(srv)
    _, m = metrics(srv.port, token=None)
    check(m.get("uvcl_answer_bytes_held") == 0, "every answer sent: nothing held", m.get("uvcl_answer_bytes_held"))
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0 and "uvcl serve: stopped" in srv.stderr(), "SIGTERM: exit 0", rc)
    budget(lib)
    stalled_reader(lib)
    return 0


if __name__ == "__main__":
    st.run_script("serve-answers", main)
