#!/usr/bin/env python3
"""uvcl serve, end to end, with real HTTP clients (curl, http.client, raw sockets).

usage: serve_test.py UVCL SAXPY_JOB.json

Starts `uvcl serve --listen 127.0.0.1:0`, reads the port from its stderr, and
checks the endpoints, the limits, the status codes and a clean SIGTERM. Prints
one line per check and a closing "N passed, N failed" line; exits 1 on any
failure, 77 (skipped) when the machine has no OpenCL device.
"""
import copy
import http.client
import json
import os
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

UVCL, SAXPY = sys.argv[1], sys.argv[2]
CURL = shutil.which("curl")
TOKEN = "s3cret-token-for-the-test"
TMP = tempfile.mkdtemp(prefix="uvcl-serve-test-")
T0 = time.monotonic()

passed = 0
failed = []


def check(cond, what, detail=""):
    global passed
    if cond:
        passed += 1
        print(f"ok   {what} [{time.monotonic() - T0:.1f} s]")
    else:
        failed.append(what)
        print(f"FAIL {what} [{time.monotonic() - T0:.1f} s] {detail}")
    sys.stdout.flush()
    return cond


class Server:
    """A `uvcl serve` process; stderr is drained by a thread (never blocks it)."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([UVCL, "serve", "--listen", "127.0.0.1:0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        ready = queue.Queue()

        def drain():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.match(r"uvcl serve: listening on 127\.0\.0\.1:(\d+)$", line.strip())
                if m:
                    ready.put(int(m.group(1)))
            ready.put(None)

        self.thread = threading.Thread(target=drain, daemon=True)
        self.thread.start()
        try:
            self.port = ready.get(timeout=60)
        except queue.Empty:
            self.port = None
        if self.port is None:
            self.proc.kill()
            self.proc.wait()
            self.thread.join()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "timeout"
        self.thread.join(timeout=5)
        return rc

    def stderr(self):
        return "".join(self.lines)


def request(port, method, path, body=None, headers=None, token=TOKEN, timeout=60, chunked=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    if chunked:
        c.request(method, path, body=iter([body[: len(body) // 2], body[len(body) // 2:]]), headers=h,
                  encode_chunked=True)
    else:
        c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def curl(port, path, data=None, token=TOKEN, extra=()):
    """(status, body) through the curl program."""
    args = [CURL, "-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "60"]
    if token:
        args += ["-H", "Authorization: Bearer " + token]
    if data is not None:
        f = os.path.join(TMP, f"body-{threading.get_ident()}-{time.monotonic_ns()}.json")
        with open(f, "wb") as out:
            out.write(data)
        args += ["-H", "Content-Type: application/json", "--data-binary", "@" + f]
    args += list(extra) + [f"http://127.0.0.1:{port}{path}"]
    p = subprocess.run(args, capture_output=True, timeout=90)
    out = p.stdout.decode("utf-8", "replace")
    body, _, code = out.rpartition("\n")
    return int(code or 0), body


def read_to_close(s, got=b""):
    """Appends what `s` receives until EOF; b"<timeout>" if it times out or is reset first."""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except (socket.timeout, ConnectionResetError):
        got += b"<timeout>"
    return got


def raw(port, data, read_until_close=True, timeout=10):
    """Sends bytes on a fresh socket, returns what comes back until EOF."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    got = read_to_close(s) if read_until_close else b""
    s.close()
    return got


def auth_header():
    return f"Authorization: Bearer {TOKEN}\r\n".encode()


def error_of(body):
    try:
        e = json.loads(body)["error"]
        return e["status"], e["message"]
    except Exception:  # noqa: BLE001 - a test reports, it does not crash
        return None, body


def metrics(port, token=TOKEN):
    status, _, body = request(port, "GET", "/metrics", token=token)
    values = {}
    for line in body.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        values[name] = float(value)
    return status, values


SPIN_SOURCE = (
    "kernel void spin(const uint n, global float* y) {\n"
    "  size_t i = get_global_id(0);\n"
    "  float acc = (float)i;\n"
    "  for (uint k = 0; k < n; ++k) acc = acc * 0.9999999f + 1.0f;\n"
    "  y[i] = acc;\n"
    "}\n")


def spin_job(n):
    return json.dumps({
        "buffers": {"y": {"type": "float", "count": 64}},
        "kernels": {"spin": {"source": SPIN_SOURCE}},
        # One work-group: one PoCL thread, the other stays free for other jobs.
        "launches": [{"kernel": "spin", "args": [{"uint": n}, "y"], "global": [64], "local": [64]}],
        "outputs": ["y"],
    }).encode()


def saxpy_with(job, a):
    j = copy.deepcopy(job)
    j["launches"][0]["args"][0] = {"float": float(a)}
    return json.dumps(j).encode()


def wait_for(pred, timeout=30, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def main():
    if not CURL:
        print("curl not found: install it (scripts/setup.sh does)")
        return 1
    with open(SAXPY) as f:
        saxpy = json.load(f)
    saxpy_body = json.dumps(saxpy).encode()
    x = saxpy["buffers"]["x"]["init"]["data"]

    # The reference: what `uvcl run` prints for the same job.
    ref = subprocess.run([UVCL, "run", SAXPY], capture_output=True, text=True, timeout=120)
    if ref.returncode != 0 and ("DyLibNotFound" in ref.stderr or "(0 devices)" in ref.stderr):
        print("no OpenCL here: skipped")
        return 77
    if not check(ref.returncode == 0, "uvcl run saxpy (reference)", ref.stderr):
        return 1
    reference = json.loads(ref.stdout)

    # Usage errors never start a server.
    bad = subprocess.run([UVCL, "serve", "--max-jobs", "0"], capture_output=True, text=True, timeout=30)
    check(bad.returncode == 1 and "--max-jobs" in bad.stderr, "--max-jobs 0 is refused", bad.stderr)
    bad = subprocess.run([UVCL, "serve", "--listen", "nowhere"], capture_output=True, text=True, timeout=30)
    check(bad.returncode == 1 and "--listen" in bad.stderr, "--listen without a port is refused", bad.stderr)

    token_file = os.path.join(TMP, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    # Its jobs carry their sources: --allow-source (the default refuses them).
    srv = Server("--allow-source", "--token-file", token_file, "--max-body", "1M", "--max-header", "8k", "--max-launches", "1000",
                 "--max-work-items", "1000000", "--max-jobs", "32", "--idle-timeout-ms", "700", "--request-timeout-ms", "1000")
    if not check(srv.port is not None, "server prints its port", srv.stderr()):
        return 1
    port = srv.port

    # --- health, auth -------------------------------------------------------------
    status, body = curl(port, "/v1/health")
    check(status == 200 and json.loads(body) == {"status": "ok"}, "GET /v1/health (curl)", f"{status} {body}")
    status, body = curl(port, "/v1/health", token=None)
    check(status == 401 and error_of(body)[0] == "Unauthorized", "no token: 401", f"{status} {body}")
    status, headers, body = request(port, "GET", "/v1/health", token="wrong-token")
    check(status == 401 and headers.get("www-authenticate") == "Bearer", "wrong token: 401", f"{status} {body}")
    status, _, body = request(port, "GET", "/v1/health", token=TOKEN[:-1])
    check(status == 401, "token prefix: 401", f"{status}")
    status, _, _ = request(port, "GET", "/v1/health", token=None, headers={"Authorization": "bearer " + TOKEN})
    check(status == 200, "scheme is case-insensitive", f"{status}")
    status, _, body = request(port, "POST", "/v1/run", body=saxpy_body, token=None)
    check(status == 401, "POST /v1/run without token: 401", f"{status}")

    # --- devices --------------------------------------------------------------------
    status, _, body = request(port, "GET", "/v1/devices")
    devices = json.loads(body) if status == 200 else []
    check(status == 200 and isinstance(devices, list) and len(devices) >= 1 and "name" in devices[0],
          "GET /v1/devices", f"{status} {body[:200]}")
    check(devices and devices[0] == reference["device"], "devices[0] is the device uvcl run reports")

    # --- one job, compared with uvcl run ------------------------------------------------
    status, body = curl(port, "/v1/run", data=saxpy_body)
    result = json.loads(body) if status == 200 else {}
    check(status == 200 and result.get("outputs") == reference["outputs"]
          and result.get("device") == reference["device"], "POST /v1/run equals uvcl run", f"{status} {body[:300]}")
    check(set(result.get("stats", {})) == set(reference["stats"]), "same stats keys as uvcl run")

    # --- 8 clients at once, each its own job ------------------------------------------------
    results = {}

    def one(a):
        results[a] = curl(port, "/v1/run", data=saxpy_with(saxpy, a))

    threads = [threading.Thread(target=one, args=(a,)) for a in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    good = 0
    for a, (status, body) in sorted(results.items()):
        if status == 200 and json.loads(body)["outputs"]["y"] == [a * v + 1.0 for v in x]:
            good += 1
        else:
            print(f"     a={a}: {status} {body[:200]}")
    check(good == 8, "8 concurrent curl clients, each its own answer", f"{good}/8")

    # --- bad jobs ------------------------------------------------------------------------
    status, _, body = request(port, "POST", "/v1/run", body=b'{"buffers": {')
    check(status == 400 and error_of(body)[0] == "InvalidJob", "malformed JSON: 400 InvalidJob", f"{status} {body}")
    status, _, body = request(port, "POST", "/v1/run", body=b"")
    check(status == 400 and error_of(body)[0] == "InvalidJob", "empty body: 400", f"{status} {body}")
    with_file = copy.deepcopy(saxpy)
    with_file["kernels"]["saxpy"] = {"file": "/etc/passwd"}
    status, _, body = request(port, "POST", "/v1/run", body=json.dumps(with_file).encode())
    check(status == 400 and error_of(body)[0] == "InvalidJob" and "file" in error_of(body)[1],
          "kernel \"file\" key: 400", f"{status} {body}")
    with_file = copy.deepcopy(saxpy)
    with_file["buffers"]["y"]["init"] = {"file": "/etc/passwd"}
    status, _, body = request(port, "POST", "/v1/run", body=json.dumps(with_file).encode())
    check(status == 400 and error_of(body)[0] == "InvalidJob", "init \"file\" key: 400", f"{status} {body}")
    broken = copy.deepcopy(saxpy)
    broken["kernels"]["saxpy"]["source"] = "kernel void saxpy(const float a, global float* x, global float* y) { oops }"
    status, _, body = request(port, "POST", "/v1/run", body=json.dumps(broken).encode())
    check(status == 422 and error_of(body)[0] == "KernelCompilation", "compile error: 422 KernelCompilation",
          f"{status} {body[:300]}")
    wrong_args = copy.deepcopy(saxpy)
    wrong_args["launches"][0]["args"] = ["x", "y"]
    status, _, body = request(port, "POST", "/v1/run", body=json.dumps(wrong_args).encode())
    check(status == 422, "wrong argument count: 422", f"{status} {body[:300]}")
    many = copy.deepcopy(saxpy)
    many["launches"][0]["repeat"] = 1001
    status, _, body = request(port, "POST", "/v1/run", body=json.dumps(many).encode())
    check(status == 422 and "limit" in error_of(body)[1], "over --max-launches: 422", f"{status} {body}")
    big = {"buffers": {"b": {"type": "double", "count": 40_000_000}}, "kernels": saxpy["kernels"],
           "launches": [], "outputs": []}
    status, _, body = request(port, "POST", "/v1/run", body=json.dumps(big).encode())
    check(status == 422 and "limit" in error_of(body)[1], "over --max-buffer-bytes: 422", f"{status} {body}")
    # Work-items: the product of the global sizes. One that wraps 2^64 to 0
    # used to reach PoCL, whose scheduler aborts the process on it.
    for sizes, what, needle in (([4294967296, 4294967296], "global product overflowing 64 bits", "overflow"),
                                ([9223372036854775808, 2], "global product of exactly 2^64", "overflow"),
                                ([2048, 1024], "over --max-work-items", "--max-work-items")):
        wide = copy.deepcopy(saxpy)
        wide["launches"][0]["global"] = sizes
        del wide["launches"][0]["local"]
        status, _, body = request(port, "POST", "/v1/run", body=json.dumps(wide).encode())
        st, msg = error_of(body)
        check(status == 422 and st == "InvalidArgument" and needle in msg, f"{what}: 422", f"{status} {body[:300]}")
    status, _, _ = request(port, "GET", "/v1/health")
    check(status == 200 and srv.proc.poll() is None, "the server is alive after huge global sizes", f"{status}")

    # --- sizes ----------------------------------------------------------------------------
    status, _, body = request(port, "POST", "/v1/run", body=b" " * (1536 << 10))
    check(status == 413 and error_of(body)[0] == "PayloadTooLarge", "1.5 MiB body: 413 (http.client)",
          f"{status} {body}")
    status, body = curl(port, "/v1/run", data=b" " * (3 << 20))
    check(status == 413, "3 MiB body: 413 (curl, Expect: 100-continue)", f"{status} {body}")
    got = raw(port, b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"Content-Length: 100000000\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 413 "), "Content-Length 100 MB: 413 before any body", got[:80])
    got = raw(port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"X-Big: " + b"a" * 9000 + b"\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 431 "), "9 kB header: 431", got[:80])

    # --- routing --------------------------------------------------------------------------
    status, _, body = request(port, "GET", "/nope")
    check(status == 404 and error_of(body)[0] == "NotFound", "unknown path: 404", f"{status} {body}")
    status, headers, body = request(port, "GET", "/v1/run")
    check(status == 405 and headers.get("allow") == "POST", "GET /v1/run: 405 with Allow", f"{status} {body}")
    status, _, _ = request(port, "DELETE", "/v1/health")
    check(status == 405, "DELETE /v1/health: 405", f"{status}")
    status, _, _ = request(port, "GET", "/v1/health?verbose=1")
    check(status == 200, "query string ignored", f"{status}")

    # --- HTTP mechanics -------------------------------------------------------------------
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sockets = set()
    statuses = []
    for method, path, body in [("GET", "/v1/health", None), ("POST", "/v1/run", saxpy_body), ("HEAD", "/metrics", None),
                               ("GET", "/v1/devices", None), ("GET", "/nope", None)]:
        c.request(method, path, body=body, headers={"Authorization": "Bearer " + TOKEN})
        r = c.getresponse()
        r.read()
        statuses.append(r.status)
        sockets.add(id(c.sock))
    c.close()
    check(statuses == [200, 200, 200, 200, 404] and len(sockets) == 1, "keep-alive: 5 requests (one HEAD) on one connection",
          f"{statuses} {len(sockets)}")
    got = raw(port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"Connection: close\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 200 ") and b"Connection: close\r\n" in got and not got.endswith(b"<timeout>"),
          "Connection: close is honoured", got[:200])
    got = raw(port, b"GET /v1/health HTTP/1.0\r\n" + auth_header() + b"\r\n")
    check(got.startswith(b"HTTP/1.1 200 ") and not got.endswith(b"<timeout>"), "HTTP/1.0 closes", got[:80])
    two = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"\r\n"
    run = (b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + auth_header() +
           f"Content-Length: {len(saxpy_body)}\r\n\r\n".encode() + saxpy_body)
    last = b"GET /nope HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"Connection: close\r\n\r\n"
    got = raw(port, two + run + two + last)
    codes = re.findall(rb"HTTP/1\.1 (\d+) ", got)
    check(codes == [b"200", b"200", b"200", b"404"], "pipelined requests answered in order", codes)
    status, _, body = request(port, "POST", "/v1/run", body=saxpy_body, chunked=True)
    check(status == 200 and json.loads(body)["outputs"] == reference["outputs"], "chunked request body",
          f"{status} {body[:200]}")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"Expect: 100-continue\r\n" +
              f"Content-Length: {len(saxpy_body)}\r\n\r\n".encode())
    first = s.recv(1000)
    s.sendall(saxpy_body)
    rest = b""
    while b"\r\n\r\n" not in rest or len(rest) < 200:
        b = s.recv(65536)
        if not b:
            break
        rest += b
    s.close()
    check(first.startswith(b"HTTP/1.1 100 Continue") and rest.startswith(b"HTTP/1.1 200 "),
          "Expect: 100-continue", (first[:40], rest[:40]))
    got = raw(port, b"BREW /pot HTCPCP/1.0\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 400 ") and error_of(got.split(b"\r\n\r\n", 1)[1])[0] == "BadRequest",
          "malformed request line: 400 JSON", got[:120])

    # --- timeouts ---------------------------------------------------------------------------
    t = time.monotonic()
    got = raw(port, b"", timeout=10)
    idle = time.monotonic() - t
    check(got == b"" and 0.4 < idle < 5, "idle connection closed after --idle-timeout-ms", f"{idle:.2f}s {got[:50]}")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    t = time.monotonic()
    slow = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + auth_header() + b"X-Slow: " + b"z" * 100
    got = b""
    try:
        for i in range(len(slow)):  # one byte every 50 ms: never done within 1 s
            s.sendall(slow[i:i + 1])
            if select.select([s], [], [], 0.05)[0]:
                break  # the server answered: stop sending, read it
    except (BrokenPipeError, ConnectionResetError):
        pass
    got = read_to_close(s, got)
    s.close()
    took = time.monotonic() - t
    check(got.startswith(b"HTTP/1.1 408 ") and took < 8, "byte-at-a-time client cut off: 408",
          f"{took:.2f}s {got[:60]}")

    # --- a slow job delays nobody else --------------------------------------------------------
    status, _, body = request(port, "POST", "/v1/run", body=spin_job(1000))  # build it once (PoCL cache)
    check(status == 200, "spin job (warm-up)", f"{status} {body[:200]}")
    # Calibrate from the job's own run time (compiling excluded).
    n = 1_000_000
    status, _, body = request(port, "POST", "/v1/run", body=spin_job(n))
    run_s = max(json.loads(body)["stats"]["run_ms"] / 1e3, 0.001) if status == 200 else 1.0

    def spin_n(seconds):
        return max(1000, min(int(n * seconds / run_s), 4_000_000_000))

    slow_done = {}

    def slow_client():
        slow_done["status"] = request(port, "POST", "/v1/run", body=spin_job(spin_n(2.5)))[0]
        slow_done["t"] = time.monotonic()

    st = threading.Thread(target=slow_client)
    st.start()
    running = wait_for(lambda: metrics(port)[1].get("uvcl_jobs_running", 0) >= 1, timeout=20, step=0.005)
    t = time.monotonic()
    answers = [request(port, "GET", "/v1/health")[0] for _ in range(5)]
    quick = request(port, "POST", "/v1/run", body=saxpy_body)[0]
    fast_t = time.monotonic()
    still_running = "t" not in slow_done
    st.join()
    check(running and answers == [200] * 5 and quick == 200 and slow_done.get("status") == 200,
          "other clients answered while a slow job runs", f"{answers} {quick} {slow_done}")
    check(still_running and fast_t < slow_done["t"],
          "... and before it finishes", f"fast {fast_t - t:.3f}s, slow job {slow_done['t'] - t:.3f}s")

    # --- a client that leaves mid-job ---------------------------------------------------------
    _, before = metrics(port)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = spin_job(spin_n(1.0))
    s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + auth_header() + f"Content-Length: {len(body)}\r\n\r\n".encode()
              + body)
    wait_for(lambda: metrics(port)[1].get("uvcl_jobs_running", 0) >= 1, timeout=20, step=0.005)
    s.close()
    done = wait_for(lambda: metrics(port)[1].get("uvcl_jobs_running", 1) == 0, timeout=30, step=0.05)
    status, after = metrics(port)
    check(done and status == 200 and after.get("uvcl_http_responses_dropped_total", 0) >
          before.get("uvcl_http_responses_dropped_total", 0), "client gone mid-job: answer dropped, server fine",
          f"{before.get('uvcl_http_responses_dropped_total')} -> {after.get('uvcl_http_responses_dropped_total')}")

    # --- metrics --------------------------------------------------------------------------------
    status, m = metrics(port)
    names = ["uvcl_jobs_started_total", "uvcl_jobs_succeeded_total", "uvcl_jobs_failed_total", "uvcl_jobs_running",
             "uvcl_launches_total", "uvcl_bytes_to_device_total", "uvcl_bytes_from_device_total",
             "uvcl_queue_in_flight", "uvcl_queue_pending", "uvcl_loop_lag_seconds", "uvcl_loop_lag_max_seconds",
             "uvcl_http_connections_active", 'uvcl_http_responses_total{code="200"}']
    missing = [k for k in names if k not in m]
    check(status == 200 and not missing, "/metrics has the counters", missing)
    check(m.get("uvcl_jobs_succeeded_total", 0) >= 14 and m.get("uvcl_jobs_failed_total", 0) >= 4
          and m.get("uvcl_jobs_started_total") == m.get("uvcl_jobs_succeeded_total", 0) +
          m.get("uvcl_jobs_failed_total", 0) + m.get("uvcl_jobs_running", 0) +
          sum(v for k, v in m.items() if k.startswith("uvcl_jobs_cancelled_total"))
          and m.get("uvcl_launches_total", 0) >= 14 and m.get("uvcl_bytes_from_device_total", 0) >= 10 * 4096
          and m.get('uvcl_jobs_rejected_total{reason="invalid"}', 0) >= 4
          and m.get("uvcl_http_connections_active", 0) >= 1 and m.get('uvcl_http_responses_total{code="401"}', 0) >= 3,
          "/metrics counts what happened", {k: v for k, v in m.items() if "jobs" in k or "launch" in k})

    rc = srv.stop(signal.SIGTERM)
    check(rc == 0 and "uvcl serve: stopped" in srv.stderr(), "SIGTERM: exit 0", f"rc={rc} {srv.stderr()[-500:]}")

    # --- 429 and SIGTERM with a job in flight -----------------------------------------------
    srv = Server("--allow-source", "--max-jobs", "1")
    if not check(srv.port is not None, "second server (--max-jobs 1, no token)", srv.stderr()):
        return 1
    port = srv.port
    slow_done = {}

    def slow_client2():
        try:
            r = request(port, "POST", "/v1/run", body=spin_job(spin_n(1.0)), token=None)
            slow_done["status"], slow_done["body"] = r[0], r[2]
        except Exception as e:  # noqa: BLE001
            slow_done["status"] = repr(e)

    st = threading.Thread(target=slow_client2)
    st.start()
    running = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_jobs_running", 0) >= 1, timeout=30,
                       step=0.005)
    status, headers, body = request(port, "POST", "/v1/run", body=saxpy_body, token=None)
    check(running and status == 429 and headers.get("retry-after") == "1" and error_of(body)[0] == "TooManyRequests",
          "over --max-jobs: 429", f"{status} {body}")
    srv.proc.send_signal(signal.SIGTERM)
    st.join(timeout=60)
    try:
        rc = srv.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        rc = "timeout"
    srv.thread.join(timeout=5)
    ok_body = slow_done.get("status") == 503 and error_of(slow_done["body"])[0] == "Cancelled"
    check(ok_body, "SIGTERM: the job in flight is cancelled and answered 503", str(slow_done.get("status")))
    check(rc == 0 and "stopping, 1 job(s) in flight" in srv.stderr() and "uvcl serve: stopped" in srv.stderr(),
          "SIGTERM with a job in flight: exit 0", f"rc={rc} {srv.stderr()[-500:]}")
    return 0


def run_script(name, main_fn):
    """Runs a serve test script's main and exits: 77 (skipped) as main says, else with the tally line
    "NAME: N passed, N failed" and 1 if any check failed. The temporary folder goes either way."""
    try:
        code = main_fn()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    if code == 77:
        sys.exit(77)
    print(f"took {time.monotonic() - T0:.1f} s")
    print(f"{name}: {passed} passed, {len(failed)} failed")
    sys.exit(1 if failed or code else 0)


if __name__ == "__main__":
    run_script("serve", main)
