#!/usr/bin/env python3
"""uvcl serve: whose kernels run, and how jobs end (issue: a trust model that
holds), over real HTTP against a real server. Every socket has a timeout and
every wait a bound: a hang fails.

usage: trust_test.py UVCL SAXPY_JOB.json

- --kernels DIR: built before listening (a build error stops the start, the
  log on stderr); launches name its kernels FILE:ENTRY; a job's own source is
  403 unless --allow-source.
- --max-response-bytes: a job whose answer could pass it is 413 before it runs.
- --job-timeout-ms: 504 at the deadline, the job's launches stop, its buffers
  are released once the device is done with them.
- a client that closes its connection cancels its job.
- SIGINT/SIGTERM: the first stops listening and cancels running jobs (each
  answered 503 at once; the process exits once they are released), the
  second exits at once with 128 + the signal.

Shares serve_test.py's helpers. Prints one line per check and "N passed, N
failed"; exits 1 on a failure, 77 when the machine has no OpenCL device.
"""
import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (reads UVCL and SAXPY from argv)
from serve_test import Server, check, error_of, metrics, request, wait_for  # noqa: E402

UVCL = st.UVCL


def post(port, body, timeout=60):
    """(status, (error status, message), body); (None, (None, why), b"") on a dropped connection or a hang."""
    try:
        status, _, data = request(port, "POST", "/v1/run", body=body, token=None, timeout=timeout)
    except (OSError, Exception) as e:  # noqa: BLE001  (http.client errors too)
        return None, (None, repr(e)), b""
    return status, error_of(data) if status != 200 else (None, ""), data


def serve_refused(*args, timeout=60):
    """(exit code, stderr) of a start that must fail; (None, why) if it started or hung."""
    try:
        p = subprocess.run([UVCL, "serve", "--listen", "127.0.0.1:0", *args], capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return None, f"still running after {timeout} s (it started, or hung)"


def spin_library_job(n, repeat):
    """The spin kernel of the library, `repeat` launches of one work-group."""
    return json.dumps({
        "buffers": {"y": {"type": "float", "count": 64}},
        "launches": [{"kernel": "spin:spin", "args": [{"uint": n}, "y"], "global": [64], "local": [64],
                      "repeat": repeat}],
        "outputs": ["y"],
    }).encode()


def make_library(saxpy):
    lib = os.path.join(st.TMP, "kernels")
    os.mkdir(lib)
    with open(os.path.join(lib, "blas.cl"), "w") as f:
        f.write(saxpy["kernels"]["saxpy"]["source"])
    with open(os.path.join(lib, "spin.cl"), "w") as f:
        f.write(st.SPIN_SOURCE)
    with open(os.path.join(lib, "notes.txt"), "w") as f:
        f.write("not a kernel: ignored\n")
    return lib


def start_errors(saxpy):
    """--kernels problems stop the start, before listening, naming what and where."""
    broken = os.path.join(st.TMP, "broken")
    os.mkdir(broken)
    with open(os.path.join(broken, "good.cl"), "w") as f:
        f.write(saxpy["kernels"]["saxpy"]["source"])
    with open(os.path.join(broken, "bad.cl"), "w") as f:
        f.write("kernel void bad(global float* y) { y[0] = undefined_name; }\n")
    rc, err = serve_refused("--kernels", broken)
    check(rc not in (None, 0) and "bad.cl" in err and "undefined_name" in err and "listening" not in err
          and "KernelCompilation" in err, "--kernels with a kernel that does not build: no start, the log on stderr",
          f"rc={rc} {err[-600:]}")
    rc, err = serve_refused("--kernels", os.path.join(st.TMP, "nowhere"))
    check(rc == 1 and "--kernels" in err and "nowhere" in err, "--kernels naming no folder: refused", err)
    empty = os.path.join(st.TMP, "empty")
    os.mkdir(empty)
    rc, err = serve_refused("--kernels", empty)
    check(rc == 1 and "no .cl files" in err, "--kernels of a folder without .cl files: refused", err)
    colon = os.path.join(st.TMP, "colon")
    os.mkdir(colon)
    with open(os.path.join(colon, "a:b.cl"), "w") as f:
        f.write("kernel void k(global float* y) { y[0] = 1.0f; }\n")
    rc, err = serve_refused("--kernels", colon)
    check(rc == 1 and "a:b.cl" in err and "FILE:ENTRY" in err, "a kernel file named a:b.cl: refused", err)
    for flag, value in (("--job-timeout-ms", "0"), ("--max-response-bytes", "17179869184G")):
        rc, err = serve_refused(flag, value)
        check(rc == 1 and flag in err and "out of range" in err, f"{flag} {value}: refused", err)


def library(srv, saxpy, reference):
    port = srv.port
    lib_job = copy.deepcopy(saxpy)
    del lib_job["kernels"]
    lib_job["launches"][0]["kernel"] = "blas:saxpy"
    status, (_, msg), body = post(port, json.dumps(lib_job).encode())
    got = json.loads(body) if status == 200 else {}
    check(status == 200 and got.get("outputs") == reference["outputs"],
          "a launch naming blas:saxpy of --kernels: the answer of uvcl run", f"{status} {msg}")
    status, (st_, msg), _ = post(port, json.dumps(saxpy).encode())
    check(status == 403 and st_ == "Forbidden" and "kernels.saxpy" in msg and "--allow-source" in msg,
          "a job carrying its source: 403 naming --allow-source", f"{status} {st_} {msg}")
    for kernel, needles, what in (("blas:nope", ["launches[0].kernel", "\"nope\"", "blas.cl"], "unknown entry"),
                                  ("linalg:saxpy", ["launches[0].kernel", "linalg.cl", "blas, spin"], "unknown file")):
        j = copy.deepcopy(lib_job)
        j["launches"][0]["kernel"] = kernel
        status, (st_, msg), _ = post(port, json.dumps(j).encode())
        check(status == 422 and st_ == "InvalidJob" and all(n in msg for n in needles),
              f"{kernel} ({what}): 422 naming the launch and what there is", f"{status} {msg}")
    j = copy.deepcopy(saxpy)
    j["kernels"] = {"blas:saxpy": j["kernels"]["saxpy"]}
    j["launches"][0]["kernel"] = "blas:saxpy"
    status, (st_, msg), _ = post(port, json.dumps(j).encode())
    check(status == 400 and "may not contain ':'" in msg, "a job kernel named blas:saxpy: 400", f"{status} {msg}")


def response_limit(saxpy):
    lib = os.path.join(st.TMP, "kernels")
    srv = Server("--kernels", lib, "--max-response-bytes", "16k")
    if not check(srv.port is not None, "server with --max-response-bytes 16k", srv.stderr()):
        return
    lib_job = copy.deepcopy(saxpy)
    del lib_job["kernels"]
    lib_job["launches"][0]["kernel"] = "blas:saxpy"
    status, (st_, msg), _ = post(srv.port, json.dumps(lib_job).encode())
    check(status == 413 and st_ == "ResponseTooLarge" and "y: 1024 float" in msg and "16384" in msg
          and "--max-response-bytes" in msg, "1024 floats past --max-response-bytes 16k: 413 naming both",
          f"{status} {msg}")
    _, m = metrics(srv.port, token=None)
    check(m.get("uvcl_jobs_started_total") == 0 and m.get('uvcl_jobs_rejected_total{reason="response_too_large"}') == 1,
          "... refused before it ran", m.get("uvcl_jobs_started_total"))
    small = copy.deepcopy(lib_job)
    for b in ("x", "y"):
        small["buffers"][b]["init"] = {"data": small["buffers"][b]["init"]["data"][:64]} \
            if "data" in small["buffers"][b].get("init", {}) else small["buffers"][b].get("init", {"fill": 0})
        small["buffers"][b]["count"] = 64
        if not small["buffers"][b]["init"]:
            del small["buffers"][b]["init"]
    small["launches"][0]["global"] = [64]
    status, (_, msg), _ = post(srv.port, json.dumps(small).encode())
    check(status == 200, "64 floats under it: 200", f"{status} {msg}")
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM: exit 0", rc)


def job_ends(saxpy):
    """--job-timeout-ms and a client that leaves: the job stops, its slot and buffers come back."""
    lib = os.path.join(st.TMP, "kernels")
    srv = Server("--kernels", lib, "--job-timeout-ms", "1500", "--max-launches", "0", "--max-jobs", "1")
    if not check(srv.port is not None, "server with --job-timeout-ms 1500", srv.stderr()):
        return
    port = srv.port
    # Launches of a few ms each, 10^6 of them: hours if nothing stopped them.
    # After a cancel, what is already enqueued (2 chunks of 256) still runs.
    long_job = spin_library_job(20_000, 1_000_000)
    t = time.monotonic()
    status, (st_, msg), _ = post(port, long_job, timeout=60)
    took = time.monotonic() - t
    check(status == 504 and st_ == "JobTimeout" and "1500 ms" in msg and 1.4 < took < 15,
          f"a job past --job-timeout-ms: 504 JobTimeout after {took:.2f} s", f"{status} {msg}")
    ended = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_jobs_running", 1) == 0, timeout=60, step=0.1)
    _, m = metrics(port, token=None)
    check(ended and m.get("uvcl_live_buffers") == 0 and m.get('uvcl_jobs_cancelled_total{reason="timeout"}') == 1,
          "... its launches stop: the slot and the buffers come back", {k: v for k, v in m.items() if "jobs" in k})
    status, _, _ = post(port, spin_library_job(1000, 1))
    check(status == 200, "the next job runs (the slot of --max-jobs 1 was freed)", status)

    # A client that leaves: its job is cancelled, not run to its end.
    body = long_job
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    running = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_jobs_running", 0) >= 1, timeout=20,
                       step=0.01)
    time.sleep(0.3)
    t = time.monotonic()
    s.close()
    ended = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_jobs_running", 1) == 0, timeout=60, step=0.05)
    took = time.monotonic() - t
    _, m = metrics(port, token=None)
    check(running and ended and m.get('uvcl_jobs_cancelled_total{reason="client_gone"}') == 1
          and m.get("uvcl_live_buffers") == 0 and m.get('uvcl_jobs_cancelled_total{reason="timeout"}') == 1,
          f"a client that closes its connection: its job cancelled, done {took:.2f} s later, buffers released",
          {k: v for k, v in m.items() if "jobs" in k or "buffers" in k})
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0 and "uvcl serve: stopped" in srv.stderr(), "SIGTERM: exit 0", f"rc={rc}")


def signals(saxpy, reference):
    lib = os.path.join(st.TMP, "kernels")
    # Both: the operator's kernels and, with --allow-source, the client's.
    srv = Server("--kernels", lib, "--allow-source", "--job-timeout-ms", "30000", "--max-launches", "0")
    if not check(srv.port is not None, "server with --kernels and --allow-source", srv.stderr()):
        return
    port = srv.port
    status, (_, msg), body = post(port, json.dumps(saxpy).encode())
    check(status == 200 and json.loads(body)["outputs"] == reference["outputs"],
          "--allow-source: a job's own source runs", f"{status} {msg}")
    # One signal: stop listening, the job in flight is cancelled and answered
    # 503 at once (not at its 30 s timeout), exit 0 once it is released.
    result = {}

    def client():
        result["r"] = post(port, spin_library_job(20_000, 1_000_000), timeout=60)
        result["t"] = time.monotonic()

    c = threading.Thread(target=client)
    c.start()
    running = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_jobs_running", 0) >= 1, timeout=20, step=0.01)
    t = time.monotonic()
    srv.proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        listening = True
    except OSError:
        listening = False
    c.join(timeout=60)
    try:
        rc = srv.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        rc = "hung"
    took = time.monotonic() - t
    srv.thread.join(timeout=5)
    status, (st_, msg), _ = result.get("r", (None, (None, None), b""))
    answered = result.get("t", t + 99) - t
    check(running and not listening and status == 503 and st_ == "Cancelled" and "SIGINT" in msg and answered < 5
          and rc == 0 and "stopping, 1 job(s) in flight" in srv.stderr(),
          f"SIGINT with a job in flight: no new connections, the job cancelled and answered 503 after "
          f"{answered:.2f} s (its timeout: 30 s), exit 0 after {took:.1f} s",
          f"listening={listening} status={status} {st_} {msg} rc={rc} {srv.stderr()[-400:]}")

    # Two signals: the second exits at once, nonzero, whatever runs.
    srv = Server("--kernels", lib, "--max-launches", "0")
    if not check(srv.port is not None, "server for two signals", srv.stderr()):
        return
    port = srv.port
    result = {}
    c = threading.Thread(target=client)
    c.start()
    running = wait_for(lambda: metrics(port, token=None)[1].get("uvcl_jobs_running", 0) >= 1, timeout=20, step=0.01)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    t = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        rc = srv.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        rc = "hung"
    took = time.monotonic() - t
    c.join(timeout=30)
    srv.thread.join(timeout=5)
    check(running and rc == 128 + signal.SIGTERM and took < 5 and "SIGTERM again: exiting now" in srv.stderr(),
          f"a second SIGTERM with a job running: exit {rc} after {took:.2f} s",
          f"rc={rc} {srv.stderr()[-400:]}")
    # The first signal answered the job (503) and cancelled it; the second
    # came while the launches it had enqueued still ran, and did not wait.
    check(result.get("r", (0,))[0] == 503 and "abandoning 1 job(s)" in srv.stderr(),
          "... the client had its 503 from the first; the second abandoned the cancelled job still on the device",
          f"{result.get('r')} {srv.stderr()[-300:]}")


def main():
    with open(st.SAXPY) as f:
        saxpy = json.load(f)
    ref = subprocess.run([UVCL, "run", st.SAXPY], capture_output=True, text=True, timeout=120)
    if ref.returncode != 0 and ("DyLibNotFound" in ref.stderr or "(0 devices)" in ref.stderr):
        print("no OpenCL here: skipped")
        return 77
    if not check(ref.returncode == 0, "uvcl run saxpy (reference)", ref.stderr):
        return 1
    reference = json.loads(ref.stdout)
    lib = make_library(saxpy)
    start_errors(saxpy)
    srv = Server("--kernels", lib)
    if not check(srv.port is not None and "built blas spin" in srv.stderr(),
                 "server with --kernels (blas.cl, spin.cl; notes.txt ignored)", srv.stderr()):
        return 1
    library(srv, saxpy, reference)
    rc = srv.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM: exit 0", rc)
    response_limit(saxpy)
    job_ends(saxpy)
    signals(saxpy, reference)
    return 0


if __name__ == "__main__":
    st.run_script("serve-trust", main)
