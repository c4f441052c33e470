#!/usr/bin/env python3
"""Requests per second of `uvcl serve` on GET /v1/health and on small jobs.

usage: serve_rps.py UVCL [--what health|jobs] [--seconds S] [--procs P]
                    [--connections C] [--depth D] [--kernels DIR]

Starts `uvcl serve --listen 127.0.0.1:0` (with --kernels, a folder holding
affine.cl, made here), then P client processes, each with C keep-alive
connections that keep D requests pipelined, for S seconds. Every answer is
parsed (Content-Length or chunked) and must be 200; a job's answer must hold
its 16 outputs with the values computed here. Prints one JSON line:
{"what", "requests", "seconds", "req_per_s", "errors", "load_avg"}.
Client and server share the machine: on a small one the clients' own CPU
time lowers the figure; compare runs made the same way.
"""
import argparse
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

AFFINE = "kernel void affine(const uint a, global uint* y) { size_t i = get_global_id(0); y[i] = a * y[i] + 1u; }\n"


def job_request(a):
    x = list(range(16))
    body = json.dumps({
        "buffers": {"y": {"type": "uint", "count": 16, "init": {"data": x}}},
        "launches": [{"kernel": "affine:affine", "args": [{"uint": a}, "y"], "global": [16]}],
        "outputs": ["y"],
    }).encode()
    want = [(a * v + 1) & 0xFFFFFFFF for v in x]
    head = f"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    return head + body, want


HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"


def parse_one(buf, pos):
    """(end, status, body) of the answer at buf[pos:], or None if incomplete."""
    h = buf.find(b"\r\n\r\n", pos)
    if h < 0:
        return None
    head = bytes(buf[pos:h]).decode("latin-1")
    status = int(head[9:12])
    m = re.search(r"(?im)^content-length:\s*(\d+)", head)
    p = h + 4
    if m:
        n = int(m.group(1))
        if len(buf) < p + n:
            return None
        return p + n, status, bytes(buf[p:p + n])
    body = bytearray()
    while True:  # chunked
        e = buf.find(b"\r\n", p)
        if e < 0:
            return None
        size = int(bytes(buf[p:e]), 16)
        if len(buf) < e + 2 + size + 2:
            return None
        body += buf[e + 2:e + 2 + size]
        p = e + 2 + size + 2
        if size == 0:
            return p, status, bytes(body)


def client(port, what, seconds, connections, depth, out):
    requests = [job_request(a) for a in range(3, 3 + 64)] if what == "jobs" else [(HEALTH, None)]
    socks = []
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks.append({"s": s, "buf": bytearray(), "pending": [], "k": 0})
    done = errors = 0
    end = time.monotonic() + seconds
    import selectors
    sel = selectors.DefaultSelector()
    for c in socks:
        sel.register(c["s"], selectors.EVENT_READ, c)

    def fill(c):
        data = b""
        while len(c["pending"]) < depth:
            req, want = requests[c["k"] % len(requests)]
            c["k"] += 1
            data += req
            c["pending"].append(want)
        if data:
            c["s"].sendall(data)

    for c in socks:
        fill(c)
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=1.0):
            c = key.data
            b = c["s"].recv(1 << 20)
            if not b:
                errors += 1
                sel.unregister(c["s"])
                continue
            c["buf"] += b
            pos = 0
            while c["pending"]:
                r = parse_one(c["buf"], pos)
                if r is None:
                    break
                pos, status, body = r
                want = c["pending"].pop(0)
                if status != 200:
                    errors += 1
                elif want is not None and json.loads(body)["outputs"]["y"] != want:
                    errors += 1
                done += 1
            del c["buf"][:pos]
            fill(c)
    out.put((done, errors))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("uvcl")
    ap.add_argument("--what", choices=("health", "jobs"), default="health")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--depth", type=int, default=16)
    args = ap.parse_args()
    lib = tempfile.mkdtemp(prefix="uvcl-rps-")
    with open(os.path.join(lib, "affine.cl"), "w") as f:
        f.write(AFFINE)
    srv = subprocess.Popen([args.uvcl, "serve", "--listen", "127.0.0.1:0", "--kernels", lib,
                            "--max-connections-per-client", "0", "--max-jobs", "100000"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    for line in srv.stderr:
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        print("the server did not start", file=sys.stderr)
        return 1
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
    q = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=client, args=(port, args.what, args.seconds, args.connections,
                                                          args.depth, q)) for _ in range(args.procs)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    results = [q.get(timeout=args.seconds + 120) for _ in procs]
    elapsed = time.monotonic() - t0
    for p in procs:
        p.join()
    srv.send_signal(signal.SIGTERM)
    rc = srv.wait(timeout=60)
    done = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    print(json.dumps({"what": args.what, "requests": done, "seconds": round(elapsed, 2),
                      "req_per_s": round(done / args.seconds, 1), "errors": errors, "exit": rc,
                      "load_avg": os.getloadavg()[0]}))
    return 0 if errors == 0 and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
