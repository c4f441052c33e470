#!/usr/bin/env python3
"""Longest loop stall of `uvcl serve` while it runs one job of many launches.

Starts `uvcl serve` on a free loopback port, runs a warm-up job (builds the
kernel), then POSTs a job of N launches (`repeat`) of a tiny kernel while a
second client polls GET /v1/health. Reports:

  - uvcl_loop_lag_max_seconds from /metrics (how late the server's own 10 ms
    timer fired at worst: the longest the loop was blocked);
  - the slowest /v1/health answer seen while the job ran.

Usage: loop_stall.py UVCL_BINARY [--launches N] [--runs R]
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

SRC = "__kernel void inc(__global uint* x) { x[get_global_id(0)] += 1u; }"


def job(launches):
    return json.dumps({
        "kernels": {"inc": {"source": SRC}},
        "buffers": {"x": {"type": "uint", "count": 64}},
        "launches": [{"kernel": "inc", "args": ["x"], "global": [64], "repeat": launches}],
        "outputs": ["x"],
    }).encode()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get(url, timeout=600):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def lag_max(base):
    m = re.search(r"^uvcl_loop_lag_max_seconds ([0-9.eE+-]+)$", get(base + "/metrics"), re.M)
    return float(m.group(1))


def one_run(binary, launches):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--allow-source", "--max-launches", "0",
                            "--request-timeout-ms", "600000"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            try:
                get(base + "/v1/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        post(base + "/v1/run", job(10))  # builds the kernel
        before = lag_max(base)
        idle = []
        for _ in range(20):  # /v1/health with nothing running: the floor
            t = time.monotonic()
            get(base + "/v1/health")
            idle.append(time.monotonic() - t)
        during = []
        stop = threading.Event()

        def poll_health():
            while not stop.is_set():
                t = time.monotonic()
                get(base + "/v1/health")
                during.append(time.monotonic() - t)
                time.sleep(0.01)

        th = threading.Thread(target=poll_health)
        th.start()
        t = time.monotonic()
        r = post(base + "/v1/run", job(launches))
        wall = time.monotonic() - t
        stop.set()
        th.join()
        x = r["outputs"]["x"]
        assert x == [launches] * 64, x[:4]
        during.sort()
        return {"lag_max_s": lag_max(base), "lag_max_before_s": before, "health_worst_s": during[-1],
                "health_median_s": during[len(during) // 2], "health_n": len(during),
                "health_idle_s": sorted(idle)[len(idle) // 2], "job_wall_s": wall}
    finally:
        srv.terminate()
        srv.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--launches", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    for i in range(a.runs):
        r = one_run(os.path.abspath(a.binary), a.launches)
        print(f"run {i + 1}: {a.launches} launches: loop lag max {r['lag_max_s'] * 1e3:.1f} ms "
              f"(before the job {r['lag_max_before_s'] * 1e3:.1f} ms); /v1/health during the job: "
              f"slowest {r['health_worst_s'] * 1e3:.1f} ms, median {r['health_median_s'] * 1e3:.1f} ms "
              f"of {r['health_n']} (idle median {r['health_idle_s'] * 1e3:.1f} ms); job {r['job_wall_s']:.2f} s")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
