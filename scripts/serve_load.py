#!/usr/bin/env python3
"""Load, soak and abuse test for `uvcl serve` (Python asyncio, no extra packages).

usage: serve_load.py [--uvcl PATH] [--duration S] [--connections N] [--json FILE] ...

Starts `uvcl serve --listen 127.0.0.1:0 --token-file FILE`, then N concurrent
connections send, for D seconds, a weighted mix of request classes:

  valid           a small job on a keep-alive connection; the result is checked
                  exactly against values computed here
  valid_large     a job with 65536 outputs (about 0.7 MB of JSON), checked
  pipelined       health + two jobs written at once on the keep-alive connection
  malformed       not a job (truncated, garbage, deep nesting, wrong types): 400
  file_key        a job with a "file" / "safetensors" key: 400
  oversized       Content-Length over --max-body: 413
  oversized_chunk a chunked body over --max-body: 413
  no_token        no Authorization header: 401
  wrong_token     a wrong bearer token: 401
  slow            a valid job sent one byte at a time: 200, checked
  abort_request   the client closes (or resets) mid-request
  abort_job       the client closes right after sending a job (mid-job)
  abort_response  the client reads part of a 11 MB answer and resets
  slow_reader     a job with 262144 outputs (about 2.8 MB of JSON) read one
                  chunk per 10 ms through a 4 KiB receive buffer: checked
  octets          a small job with Accept: application/octet-stream: the
                  output's bytes, checked
  routing         unknown path (404), wrong method (405, Allow) on keep-alive
  header_too_large  a 40 KiB header: 431
  too_slow        a request dribbled past --request-timeout-ms: 408
  idle            a connection that sends nothing: closed by --idle-timeout-ms

Asserts: every valid job 200 with the exact result, every bad request its
documented 4xx (docs/serve.md), the server alive throughout, its RSS bounded,
its gauges back to rest after the run (no connection, job or buffer left),
and exit code 0 on SIGTERM. Prints requests/s, latency p50/p99/max per
class, counts and RSS (start/peak/end); --json writes the same as JSON.
Exit status: 0 all assertions held, 1 one failed, 77 no OpenCL device.
"""
import argparse
import asyncio
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "load-test-token-0123456789abcdef"
M32 = 0xFFFFFFFF

# y = a*y + b (mod 2^32), `repeat` times: exact in any order-respecting run.
STEP_SOURCE = (
    "kernel void affine_step(const uint a, const uint b, global uint* y) {\n"
    "  size_t i = get_global_id(0);\n"
    "  y[i] = a * y[i] + b;\n"
    "}\n")

DEFAULT_MIX = {
    "valid": 40, "valid_large": 2, "pipelined": 4, "malformed": 8, "file_key": 6,
    "oversized": 3, "oversized_chunk": 2, "no_token": 4, "wrong_token": 4, "slow": 3,
    "abort_request": 4, "abort_job": 3, "abort_response": 2, "slow_reader": 1, "octets": 3,
    "routing": 3, "header_too_large": 1, "too_slow": 1, "idle": 1,
}
# Classes that expect an answer; the abort_* classes expect none.
ANSWERED = {"valid", "valid_large", "slow_reader", "octets", "pipelined", "malformed", "file_key", "oversized", "oversized_chunk",
            "no_token", "wrong_token", "slow", "routing", "header_too_large", "too_slow", "idle"}


class Failure(Exception):
    pass


# --- jobs and their expected results ---------------------------------------------

def step_expected(values, a, b, repeat):
    out = []
    for v in values:
        for _ in range(repeat):
            v = (a * v + b) & M32
        out.append(v)
    return out


def valid_job(rng, count=None, fill=None):
    """(body bytes, expected y) for a job the client can check exactly."""
    n = count or rng.choice((16, 32, 64, 100, 128, 256, 500, 512))
    a, b = rng.getrandbits(32), rng.getrandbits(32)
    repeat = rng.randint(1, 4)
    if fill is None:
        x = [rng.getrandbits(32) for _ in range(n)]
        init = {"data": x}
        expected = step_expected(x, a, b, repeat)
    else:
        init = {"fill": fill}
        expected = step_expected([fill], a, b, repeat) * n
    job = {
        "buffers": {"y": {"type": "uint", "count": n, "init": init}},
        "kernels": {"affine_step": {"source": STEP_SOURCE}},
        "launches": [{"kernel": "affine_step", "args": [{"uint": a}, {"uint": b}, "y"], "global": [n], "repeat": repeat}],
        "outputs": ["y"],
    }
    return json.dumps(job).encode(), expected


def check_job_answer(status, headers, body, expected):
    if status != 200:
        raise Failure(f"valid job answered {status}: {body[:200]!r}")
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise Failure(f"valid job: answer is not JSON ({e}): {body[:200]!r}") from None
    y = doc.get("outputs", {}).get("y")
    if y != expected:
        if not isinstance(y, list) or len(y) != len(expected):
            raise Failure(f"valid job: outputs.y has {len(y) if isinstance(y, list) else y!r} values, "
                          f"expected {len(expected)}")
        i = next(k for k in range(len(y)) if y[k] != expected[k])
        raise Failure(f"valid job: y[{i}] = {y[i]}, expected {expected[i]}")
    if "device" not in doc or "stats" not in doc:
        raise Failure("valid job: answer lacks device or stats")


def malformed_body(rng):
    good, _ = valid_job(rng, count=16)
    kind = rng.randrange(8)
    if kind == 0:
        return good[: rng.randrange(1, len(good) - 1)]  # truncated
    if kind == 1:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))  # garbage, not UTF-8
    if kind == 2:
        return b"[" * 5000 + b"]" * 5000  # deep nesting
    if kind == 3:
        return rng.choice((b"", b"null", b"42", b"[]", b"\"job\"", b"{}"))
    if kind == 4:
        return good.replace(b'"uint"', b'"uint32"', 1)  # unknown type
    if kind == 5:
        return good.replace(b'"launches"', b'"launchez"', 1)  # unknown key
    if kind == 6:
        return good.replace(b'"global": [16]', b'"global": [-16]', 1)
    return b'{"buffers": {"y": {"type": "uint", "count": 4, "init": {"data": [1, 2, 3, 4]}}},' + \
        b' "kernels": {}, "launches": [{"kernel": "nope", "args": [], "global": [4]}]}'


def file_key_body(rng):
    good = json.loads(valid_job(rng, count=16)[0])
    kind = rng.randrange(3)
    if kind == 0:
        good["kernels"]["affine_step"] = {"file": "/etc/passwd"}
    elif kind == 1:
        good["buffers"]["y"]["init"] = {"file": "/etc/shadow"}
    else:
        good["buffers"]["y"]["init"] = {"safetensors": "/proc/self/environ", "tensor": "t"}
    return json.dumps(good).encode()


# --- HTTP -------------------------------------------------------------------------

def request_bytes(method, path, body=b"", token=TOKEN, extra=(), chunked=False, close=False):
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if token is not None:
        head.append("Authorization: Bearer " + token)
    if method == "POST":
        head.append("Content-Type: application/json")
        head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}")
    if close:
        head.append("Connection: close")
    head.extend(extra)
    data = ("\r\n".join(head) + "\r\n\r\n").encode()
    if chunked:
        for i in range(0, len(body), 16384):
            piece = body[i:i + 16384]
            data += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        data += b"0\r\n\r\n"
    else:
        data += body
    return data


async def read_response(reader, pace_s=0.0):
    """(status, headers, body); skips 1xx answers. pace_s: see read_chunked."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3}) ", lines[0] + " ")
        if not m:
            raise Failure(f"bad status line {lines[0]!r}")
        status = int(m.group(1))
        headers = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        if 100 <= status < 200:
            continue
        if headers.get("transfer-encoding") == "chunked":  # job answers, streamed as formatted
            return status, headers, await read_chunked(reader, pace_s)
        if "content-length" not in headers:
            raise Failure(f"{status} answer without Content-Length or chunks")
        body = await reader.readexactly(int(headers["content-length"]))
        return status, headers, body


async def read_chunked(reader, pace_s=0.0):
    """A chunked body; with pace_s, sleeps that long after each chunk (a slow reader)."""
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line[:-2], 16)
        except ValueError:
            raise Failure(f"bad chunk size line {size_line[:40]!r}") from None
        data = await reader.readexactly(size + 2)
        if data[-2:] != b"\r\n":
            raise Failure("chunk data not followed by CRLF")
        body += data[:-2]
        if size == 0:
            return bytes(body)
        if pace_s:
            await asyncio.sleep(pace_s)


def expect_error(status, headers, body, code, name):
    if status != code:
        raise Failure(f"expected {code} {name}, got {status}: {body[:200]!r}")
    try:
        got = json.loads(body)["error"]["status"]
    except (ValueError, KeyError, TypeError):
        raise Failure(f"{code}: the body is not a JSON error: {body[:200]!r}") from None
    if got != name:
        raise Failure(f"{code}: error status {got!r}, expected {name!r}")


async def open_conn(port, rcvbuf=None):
    if rcvbuf is None:
        return await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=s, limit=1 << 16)


def reset(writer):
    """Closes with a TCP RST (SO_LINGER 0) instead of a FIN."""
    sock = writer.get_extra_info("socket")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


async def close(writer):
    writer.close()
    try:
        await writer.wait_closed()
    except (ConnectionError, OSError):
        pass


async def expect_eof(reader, what):
    """After a Connection: close answer the server must close the connection."""
    try:
        rest = await asyncio.wait_for(reader.read(1), 5)
    except (ConnectionError, OSError):
        return
    except asyncio.TimeoutError:
        raise Failure(f"{what}: the connection stayed open after Connection: close") from None
    if rest:
        raise Failure(f"{what}: bytes after the answer: {rest!r}")


# --- the workers --------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.lat = {c: [] for c in DEFAULT_MIX}  # seconds, answered requests
        self.count = {c: 0 for c in DEFAULT_MIX}
        self.ok = {c: 0 for c in DEFAULT_MIX}
        self.codes = {c: {} for c in DEFAULT_MIX}
        self.errors = {}  # message -> count
        self.error_count = 0
        self.keepalive_reuses = 0
        self.connections_opened = 0


class Worker:
    def __init__(self, ident, args, port, stats, deadline):
        self.rng = random.Random(args.seed * 1000003 + ident)
        self.args, self.port, self.stats, self.deadline = args, port, stats, deadline
        self.conn = None  # (reader, writer, last use)
        self.classes = list(args.mix)
        self.weights = [args.mix[c] for c in self.classes]

    async def keepalive(self):
        # The server closes a keep-alive connection idle for
        # --idle-timeout-ms: one idle for half of that is not reused.
        if self.conn is not None and time.monotonic() - self.conn[2] > self.args.idle_timeout_ms / 2000.0:
            await self.drop_keepalive()
        if self.conn is not None:
            self.stats.keepalive_reuses += 1
            r, w, _ = self.conn
        else:
            r, w = await open_conn(self.port)
            self.stats.connections_opened += 1
        self.conn = (r, w, time.monotonic())
        return r, w

    async def drop_keepalive(self):
        if self.conn is not None:
            await close(self.conn[1])
            self.conn = None

    async def fresh(self, rcvbuf=None):
        self.stats.connections_opened += 1
        return await open_conn(self.port, rcvbuf)

    async def exchange_keepalive(self, data):
        r, w = await self.keepalive()
        w.write(data)
        await w.drain()
        status, headers, body = await read_response(r)
        if headers.get("connection", "").lower() == "close":
            await self.drop_keepalive()
        elif self.conn is not None:
            self.conn = (r, w, time.monotonic())
        return status, headers, body

    def code(self, cls, status):
        self.stats.codes[cls][status] = self.stats.codes[cls].get(status, 0) + 1

    async def run(self):
        while time.monotonic() < self.deadline:
            cls = self.rng.choices(self.classes, self.weights)[0]
            self.stats.count[cls] += 1
            t0 = time.monotonic()
            try:
                await asyncio.wait_for(getattr(self, "do_" + cls)(cls), self.args.request_timeout)
                self.stats.ok[cls] += 1
                if cls in ANSWERED:
                    self.stats.lat[cls].append(time.monotonic() - t0)
            except asyncio.TimeoutError:
                self.fail(cls, f"no answer within {self.args.request_timeout} s (hang)")
            except Failure as e:
                self.fail(cls, str(e))
            except (ConnectionError, OSError, asyncio.IncompleteReadError) as e:
                self.fail(cls, f"connection error: {type(e).__name__}: {e}")
        await self.drop_keepalive()

    def fail(self, cls, msg):
        self.stats.error_count += 1
        key = f"{cls}: {msg}"
        key = re.sub(r"\d{3,}", "N", key)[:300]  # group messages that differ only in numbers
        self.stats.errors[key] = self.stats.errors.get(key, 0) + 1
        self.conn_broken()

    def conn_broken(self):
        if self.conn is not None:
            self.conn[1].transport.abort()
            self.conn = None

    # --- classes on the keep-alive connection ---

    async def do_valid(self, cls):
        body, expected = valid_job(self.rng)
        status, headers, answer = await self.exchange_keepalive(request_bytes("POST", "/v1/run", body))
        self.code(cls, status)
        check_job_answer(status, headers, answer, expected)

    async def do_valid_large(self, cls):
        body, expected = valid_job(self.rng, count=65536, fill=self.rng.getrandbits(32))
        status, headers, answer = await self.exchange_keepalive(request_bytes("POST", "/v1/run", body))
        self.code(cls, status)
        check_job_answer(status, headers, answer, expected)

    async def do_pipelined(self, cls):
        j1, e1 = valid_job(self.rng)
        j2, e2 = valid_job(self.rng)
        r, w = await self.keepalive()
        w.write(request_bytes("GET", "/v1/health") + request_bytes("POST", "/v1/run", j1) +
                request_bytes("POST", "/v1/run", j2))
        await w.drain()
        answers = [await read_response(r) for _ in range(3)]
        self.conn = (r, w, time.monotonic())
        for status, _, _ in answers:
            self.code(cls, status)
        if answers[0][0] != 200 or json.loads(answers[0][2]) != {"status": "ok"}:
            raise Failure(f"pipelined health: {answers[0][0]} {answers[0][2][:100]!r}")
        check_job_answer(*answers[1], e1)
        check_job_answer(*answers[2], e2)

    async def do_malformed(self, cls):
        status, headers, body = await self.exchange_keepalive(
            request_bytes("POST", "/v1/run", malformed_body(self.rng)))
        self.code(cls, status)
        expect_error(status, headers, body, 400, "InvalidJob")

    async def do_file_key(self, cls):
        status, headers, body = await self.exchange_keepalive(request_bytes("POST", "/v1/run", file_key_body(self.rng)))
        self.code(cls, status)
        expect_error(status, headers, body, 400, "InvalidJob")
        if b"file" not in body:
            raise Failure(f"file key: the message does not name the file key: {body[:200]!r}")

    # --- classes on a fresh connection (the server closes it after the answer) ---

    async def one_shot(self, cls, data, code, name):
        r, w = await self.fresh()
        try:
            w.write(data)
            await w.drain()
            status, headers, body = await read_response(r)
            self.code(cls, status)
            expect_error(status, headers, body, code, name)
            if headers.get("connection", "").lower() != "close":
                raise Failure(f"{code} without Connection: close")
            await expect_eof(r, cls)
            return headers
        finally:
            await close(w)

    async def do_oversized(self, cls):
        size = self.args.max_body + 1 + self.rng.randrange(3 * self.args.max_body)
        await self.one_shot(cls, request_bytes("POST", "/v1/run", b"x" * size), 413, "PayloadTooLarge")

    async def do_oversized_chunk(self, cls):
        size = self.args.max_body + 1 + self.rng.randrange(self.args.max_body)
        await self.one_shot(cls, request_bytes("POST", "/v1/run", b"[" * size, chunked=True), 413,
                            "PayloadTooLarge")

    async def do_no_token(self, cls):
        body, _ = valid_job(self.rng, count=16)
        data = request_bytes("POST", "/v1/run", body, token=None) if self.rng.random() < 0.5 else \
            request_bytes("GET", "/v1/health", token=None)
        headers = await self.one_shot(cls, data, 401, "Unauthorized")
        if headers.get("www-authenticate") != "Bearer":
            raise Failure("401 without WWW-Authenticate: Bearer")

    async def do_wrong_token(self, cls):
        body, _ = valid_job(self.rng, count=16)
        token = self.rng.choice((TOKEN[:-1], TOKEN + "x", "x" * len(TOKEN), TOKEN.upper(), ""))
        extra = () if token else ("Authorization: Basic dXNlcjpwYXNz",)
        data = request_bytes("POST", "/v1/run", body, token=token if token else None, extra=extra)
        await self.one_shot(cls, data, 401, "Unauthorized")

    async def do_slow(self, cls):
        body, expected = valid_job(self.rng, count=16)
        data = request_bytes("POST", "/v1/run", body, close=True)
        r, w = await self.fresh()
        try:
            # Byte by byte, in a paced burst, so that it takes about slow_ms whatever its length.
            delay = self.args.slow_ms / 1000.0 / len(data)
            next_t = time.monotonic()
            for i in range(len(data)):
                w.write(data[i:i + 1])
                await w.drain()
                next_t += delay
                pause = next_t - time.monotonic()
                await asyncio.sleep(pause if pause > 0 else 0)
            status, headers, answer = await read_response(r)
            self.code(cls, status)
            check_job_answer(status, headers, answer, expected)
            await expect_eof(r, cls)
        finally:
            await close(w)

    # --- clients that leave ---

    async def do_abort_request(self, cls):
        body, _ = valid_job(self.rng, count=64)
        data = request_bytes("POST", "/v1/run", body)
        cut = self.rng.randrange(1, len(data) - 1)
        r, w = await self.fresh()
        w.write(data[:cut])
        await w.drain()
        await asyncio.sleep(self.rng.random() * 0.02)
        if self.rng.random() < 0.5:
            reset(w)
        else:
            await close(w)

    async def do_abort_job(self, cls):
        body, _ = valid_job(self.rng)
        r, w = await self.fresh()
        w.write(request_bytes("POST", "/v1/run", body))
        await w.drain()
        await asyncio.sleep(self.rng.random() * 0.005)
        if self.rng.random() < 0.5:
            reset(w)
        else:
            await close(w)

    async def do_abort_response(self, cls):
        # A large answer (about 11 MB) to a client with a small receive
        # buffer: the server is still writing it when the client resets.
        body, _ = valid_job(self.rng, count=1 << 20, fill=self.rng.getrandbits(32))
        r, w = await self.fresh(rcvbuf=4096)
        w.write(request_bytes("POST", "/v1/run", body))
        await w.drain()
        line = await r.readuntil(b"\r\n")
        if not line.startswith(b"HTTP/1.1 200 "):
            raise Failure(f"large job answered {line!r}")
        await r.readexactly(self.rng.randint(1, 65536))
        await asyncio.sleep(self.rng.random() * 0.05)
        reset(w)

    async def do_slow_reader(self, cls):
        body, expected = valid_job(self.rng, count=1 << 18, fill=self.rng.getrandbits(32))
        r, w = await self.fresh(rcvbuf=4096)
        w.write(request_bytes("POST", "/v1/run", body, close=True))
        await w.drain()
        status, headers, answer = await read_response(r, pace_s=0.01)
        await close(w)
        self.code(cls, status)
        if headers.get("transfer-encoding") != "chunked":
            raise Failure("a job's JSON answer was not chunked")
        check_job_answer(status, headers, answer, expected)

    async def do_octets(self, cls):
        body, expected = valid_job(self.rng)
        status, headers, answer = await self.exchange_keepalive(
            request_bytes("POST", "/v1/run", body, extra=("Accept: application/octet-stream",)))
        self.code(cls, status)
        if status != 200:
            raise Failure(f"octet-stream job answered {status}: {answer[:200]!r}")
        if headers.get("content-type") != "application/octet-stream" or len(answer) != 4 * len(expected):
            raise Failure(f"octet-stream job: {headers.get('content-type')}, {len(answer)} bytes")
        if list(struct.unpack(f"<{len(expected)}I", answer)) != expected:
            raise Failure("octet-stream job: wrong values")

    # --- more error paths ---

    async def do_routing(self, cls):
        if self.rng.random() < 0.5:
            status, headers, body = await self.exchange_keepalive(request_bytes("GET", "/v1/nothing-here?x=1"))
            self.code(cls, status)
            expect_error(status, headers, body, 404, "NotFound")
        else:
            status, headers, body = await self.exchange_keepalive(request_bytes("GET", "/v1/run"))
            self.code(cls, status)
            expect_error(status, headers, body, 405, "MethodNotAllowed")
            if headers.get("allow") != "POST":
                raise Failure(f"405 with Allow {headers.get('allow')!r}")

    async def do_header_too_large(self, cls):
        await self.one_shot(cls, request_bytes("GET", "/v1/health", extra=("X-Big: " + "b" * (40 << 10),)),
                            431, "HeaderTooLarge")

    async def do_too_slow(self, cls):
        # Dribbles the headers for longer than --request-timeout-ms: 408.
        data = request_bytes("GET", "/v1/health")
        r, w = await self.fresh()
        try:
            limit = self.args.request_timeout_ms / 1000.0
            t0 = time.monotonic()
            i = 0
            answer = asyncio.ensure_future(read_response(r))
            while not answer.done() and i < len(data) - 4:
                w.write(data[i:i + 1])
                i += 1
                await asyncio.wait([answer], timeout=limit / 40)
            status, headers, body = await asyncio.wait_for(answer, limit + 10)
            waited = time.monotonic() - t0
            self.code(cls, status)
            expect_error(status, headers, body, 408, "RequestTimeout")
            if waited < limit * 0.9:
                raise Failure(f"408 after {waited:.2f} s, the limit is {limit} s")
            await expect_eof(r, cls)
        finally:
            await close(w)

    async def do_idle(self, cls):
        # Sends nothing: the server closes it after --idle-timeout-ms.
        r, w = await self.fresh()
        try:
            limit = self.args.idle_timeout_ms / 1000.0
            t0 = time.monotonic()
            try:
                got = await asyncio.wait_for(r.read(1), limit + 10)
            except (ConnectionError, OSError):
                got = b""
            waited = time.monotonic() - t0
            self.code(cls, 0)
            if got:
                raise Failure(f"an idle connection received {got!r}")
            if waited < limit * 0.9:
                raise Failure(f"an idle connection closed after {waited:.2f} s, the limit is {limit} s")
        finally:
            await close(w)


# --- the server ----------------------------------------------------------------------

class Server:
    def __init__(self, uvcl, args, token_file, env):
        # Its jobs carry their sources: --allow-source.
        cmd = [uvcl, "serve", "--listen", "127.0.0.1:0", "--allow-source", "--token-file", token_file,
               "--max-body", str(args.max_body), "--max-jobs", str(args.max_jobs),
               "--idle-timeout-ms", str(args.idle_timeout_ms), "--request-timeout-ms", str(args.request_timeout_ms),
               # Every client of the load runs on this machine: one address.
               "--max-connections-per-client", "0",
               ] + args.server_arg
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines = []
        self.port = None
        ready = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.match(r"uvcl serve: listening on 127\.0\.0\.1:(\d+)$", line.strip())
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.thread = threading.Thread(target=drain, daemon=True)
        self.thread.start()
        ready.wait(120)

    def rss_kib(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def stderr(self):
        return "".join(self.lines)


async def simple_get(port, path, token=TOKEN):
    r, w = await open_conn(port)
    try:
        w.write(request_bytes("GET", path, token=token, close=True))
        await w.drain()
        return await asyncio.wait_for(read_response(r), 30)
    finally:
        await close(w)


async def metrics(port):
    status, _, body = await simple_get(port, "/metrics")
    if status != 200:
        raise Failure(f"/metrics answered {status}")
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(p / 100.0 * len(sorted_values)) - 1))  # nearest rank
    return sorted_values[k]


async def load(args, srv, report, failures):
    port = srv.port
    # Warm-up: the kernel is built once (the engine memoises programs), and
    # one checked job shows the device works.
    rng = random.Random(args.seed)
    for _ in range(3):
        body, expected = valid_job(rng)
        r, w = await open_conn(port)
        w.write(request_bytes("POST", "/v1/run", body, close=True))
        await w.drain()
        status, headers, answer = await asyncio.wait_for(read_response(r), 120)
        await close(w)
        check_job_answer(status, headers, answer, expected)
    base = await metrics(port)

    samples = []
    rss_start = srv.rss_kib()
    samples.append((0.0, rss_start))
    stats = Stats()
    t_start = time.monotonic()
    deadline = t_start + args.duration
    stop_sampling = asyncio.Event()

    async def sampler():
        next_print = t_start + args.progress
        while not stop_sampling.is_set():
            try:
                await asyncio.wait_for(stop_sampling.wait(), args.rss_interval)
            except asyncio.TimeoutError:
                pass
            now = time.monotonic()
            if srv.proc.poll() is not None:
                failures.append(f"the server exited during the run (code {srv.proc.returncode})")
                return
            rss = srv.rss_kib()
            if rss is not None:
                samples.append((now - t_start, rss))
            if args.progress and now >= next_print:
                next_print += args.progress
                done = sum(stats.count.values())
                print(f"  {now - t_start:6.0f} s  {done} requests  {stats.error_count} errors  "
                      f"RSS {rss / 1024:.1f} MiB", flush=True)

    sampler_task = asyncio.create_task(sampler())
    workers = [Worker(i, args, port, stats, deadline) for i in range(args.connections)]
    await asyncio.gather(*(w.run() for w in workers))
    elapsed = time.monotonic() - t_start

    # After the run: every connection closed, no job running, no buffer
    # alive. Lingering connections (401/413) close within a second.
    settled = None
    end_wait = time.monotonic() + 15
    while time.monotonic() < end_wait:
        m = await metrics(port)
        settled = m
        if m.get("uvcl_http_connections_active") == 1 and m.get("uvcl_jobs_running") == 0 and \
                m.get("uvcl_live_buffers") == 0 and m.get("uvcl_queue_in_flight") == 0:
            break
        await asyncio.sleep(0.2)
    stop_sampling.set()
    await sampler_task
    rss_end = srv.rss_kib()
    samples.append((time.monotonic() - t_start, rss_end))

    m = settled or {}
    for name, want in (("uvcl_http_connections_active", 1), ("uvcl_jobs_running", 0), ("uvcl_live_buffers", 0),
                       ("uvcl_queue_in_flight", 0), ("uvcl_queue_pending", 0)):
        if m.get(name) != want:
            failures.append(f"after the run {name} = {m.get(name)}, expected {want}")
    started = m.get("uvcl_jobs_started_total", 0)
    # Vanishing clients cancel their jobs: those end cancelled, not failed.
    cancelled = sum(v for k, v in m.items() if k.startswith("uvcl_jobs_cancelled_total"))
    if started != m.get("uvcl_jobs_succeeded_total", 0) + m.get("uvcl_jobs_failed_total", 0) + cancelled:
        failures.append(f"jobs started {started} != succeeded + failed + cancelled "
                        f"({m.get('uvcl_jobs_succeeded_total')} + {m.get('uvcl_jobs_failed_total')} + {cancelled})")
    if m.get("uvcl_jobs_failed_total", 0) != base.get("uvcl_jobs_failed_total", 0):
        failures.append(f"{m.get('uvcl_jobs_failed_total', 0) - base.get('uvcl_jobs_failed_total', 0):.0f} "
                        "jobs failed on the server (every job sent was valid)")
    busy = m.get('uvcl_jobs_rejected_total{reason="busy"}', 0)
    if busy:
        failures.append(f"{busy:.0f} jobs answered 429 (--max-jobs {args.max_jobs})")
    for code in (500, 503):
        n = m.get(f'uvcl_http_responses_total{{code="{code}"}}', 0)
        if n:
            failures.append(f"the server answered {code} {n:.0f} times")

    rss_values = [s[1] for s in samples if s[1] is not None]
    rss_peak = max(rss_values) if rss_values else None
    # Growth over the second half of the run: a leak keeps growing, a
    # warmed-up allocator does not.
    half = [s for s in samples if s[0] >= elapsed / 2 and s[1] is not None]
    late_growth = (half[-1][1] - half[0][1]) if len(half) >= 2 else None
    if rss_start is not None and rss_peak is not None and (rss_peak - rss_start) / 1024 > args.max_rss_growth_mib:
        failures.append(f"RSS grew by {(rss_peak - rss_start) / 1024:.1f} MiB (limit {args.max_rss_growth_mib} MiB)")
    if late_growth is not None and late_growth / 1024 > args.max_late_growth_mib:
        failures.append(f"RSS grew by {late_growth / 1024:.1f} MiB over the second half of the run "
                        f"(limit {args.max_late_growth_mib} MiB): a leak?")

    total = sum(stats.count.values())
    classes = {}
    for c in args.mix:
        lat = sorted(stats.lat[c])
        classes[c] = {
            "count": stats.count[c], "ok": stats.ok[c], "errors": stats.count[c] - stats.ok[c],
            "codes": {str(k): v for k, v in sorted(stats.codes[c].items())},
            "p50_ms": None if not lat else round(percentile(lat, 50) * 1000, 2),
            "p99_ms": None if not lat else round(percentile(lat, 99) * 1000, 2),
            "max_ms": None if not lat else round(lat[-1] * 1000, 2),
        }
    # Overall latency leaves out the classes that are slow on purpose.
    answered = sorted(x for c in args.mix if c not in ("slow", "too_slow", "idle") for x in stats.lat[c])
    valid_jobs = (stats.ok["valid"] + stats.ok["valid_large"] + stats.ok["slow"] + 2 * stats.ok["pipelined"]
                  + stats.ok["slow_reader"] + stats.ok["octets"])
    for c in args.mix:
        if stats.count[c] == 0 and args.mix[c] > 0 and args.duration >= 5:
            failures.append(f"class {c} never ran (raise --duration)")
    if stats.error_count:
        failures.append(f"{stats.error_count} requests got a wrong answer or none")
    report.update({
        "duration_s": round(elapsed, 2),
        "connections": args.connections,
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "valid_jobs_checked": valid_jobs,
        "valid_jobs_per_s": round(valid_jobs / elapsed, 1),
        "latency_all_ms": {"p50": round(percentile(answered, 50) * 1000, 2) if answered else None,
                           "p99": round(percentile(answered, 99) * 1000, 2) if answered else None,
                           "max": round(answered[-1] * 1000, 2) if answered else None},
        "errors": stats.error_count,
        "error_messages": dict(sorted(stats.errors.items(), key=lambda kv: -kv[1])[:30]),
        "keepalive_reuses": stats.keepalive_reuses,
        "connections_opened": stats.connections_opened,
        "classes": classes,
        "rss_kib": {"start": rss_start, "peak": rss_peak, "end": rss_end,
                    "second_half_growth": late_growth,
                    "samples": [[round(t, 1), v] for t, v in samples[:: max(1, len(samples) // 200)]]},
        "server_metrics_end": {k: v for k, v in m.items() if not k.startswith("uvcl_loop_lag_seconds")},
    })


def print_report(r):
    print(f"uvcl serve load: {r['connections']} connections, {r['duration_s']} s, {r['requests']} requests, "
          f"{r['requests_per_s']} req/s, {r['valid_jobs_checked']} valid jobs checked "
          f"({r['valid_jobs_per_s']}/s), {r['errors']} errors")
    print(f"  {'class':16} {'count':>7} {'errors':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  codes")
    for c, s in r["classes"].items():
        f = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        codes = " ".join(f"{k}:{v}" for k, v in s["codes"].items())
        print(f"  {c:16} {s['count']:7} {s['errors']:6} {f(s['p50_ms']):>8} {f(s['p99_ms']):>8} "
              f"{f(s['max_ms']):>8}  {codes}")
    la = r["latency_all_ms"]
    print(f"  all answered (not slow/too_slow/idle): p50 {la['p50']} ms, p99 {la['p99']} ms, max {la['max']} ms; "
          f"{r['keepalive_reuses']} keep-alive reuses, {r['connections_opened']} connections opened")
    rss = r["rss_kib"]
    mib = lambda v: "?" if v is None else f"{v / 1024:.1f}"  # noqa: E731
    print(f"  server RSS: start {mib(rss['start'])} MiB, peak {mib(rss['peak'])} MiB, end {mib(rss['end'])} MiB, "
          f"second-half growth {mib(rss['second_half_growth'])} MiB")
    m = r.get("server_metrics_end", {})
    print(f"  server: {m.get('uvcl_jobs_started_total', 0):.0f} jobs started, "
          f"{m.get('uvcl_http_responses_dropped_total', 0):.0f} answers dropped (client gone), "
          f"loop lag max {m.get('uvcl_loop_lag_max_seconds', 0) * 1000:.1f} ms, "
          f"exit code {r.get('server_exit_code')}")
    for msg, n in r["error_messages"].items():
        print(f"  error x{n}: {msg}")


def parse_mix(text):
    mix = dict(DEFAULT_MIX)
    if text:
        for part in text.split(","):
            k, _, v = part.partition("=")
            if k not in DEFAULT_MIX:
                raise SystemExit(f"--mix: unknown class {k!r} (known: {', '.join(DEFAULT_MIX)})")
            mix[k] = float(v)
    return {k: v for k, v in mix.items() if v > 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uvcl", default=os.path.join(ROOT, "build", "tools", "uvcl"))
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mix", default="", help="class=weight,... over the defaults (weight 0 drops a class)")
    ap.add_argument("--max-body", type=int, default=64 << 10, help="the server's --max-body")
    ap.add_argument("--max-jobs", type=int, default=0,
                    help="the server's --max-jobs (default: 8 x connections: jobs of clients that left still run)")
    ap.add_argument("--idle-timeout-ms", type=int, default=3000, help="the server's --idle-timeout-ms")
    ap.add_argument("--request-timeout-ms", type=int, default=5000, help="the server's --request-timeout-ms")
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for uvcl serve")
    ap.add_argument("--slow-ms", type=float, default=1500, help="time a slow client takes to send its request")
    ap.add_argument("--request-timeout", type=float, default=60, help="seconds before a request counts as hung")
    ap.add_argument("--rss-interval", type=float, default=0.5)
    ap.add_argument("--max-rss-growth-mib", type=float, default=256, help="peak RSS minus start RSS")
    ap.add_argument("--max-late-growth-mib", type=float, default=32, help="RSS growth over the second half")
    ap.add_argument("--progress", type=float, default=0, help="print a progress line every S seconds")
    ap.add_argument("--json", help="write the report as JSON here")
    args = ap.parse_args()
    args.mix = parse_mix(args.mix)
    args.max_jobs = args.max_jobs or max(16, 8 * args.connections)
    if args.slow_ms >= args.request_timeout_ms * 0.75:
        raise SystemExit("--slow-ms must stay well under --request-timeout-ms")
    args.server_arg = [a for s in args.server_arg for a in s.split()]

    tmp = tempfile.mkdtemp(prefix="uvcl-serve-load-")
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    env = dict(os.environ)
    env.setdefault("POCL_CACHE_DIR", os.path.join(tmp, "pocl-cache"))

    probe = subprocess.run([args.uvcl, "devices", "--json"], capture_output=True, text=True, timeout=120, env=env)
    if (probe.returncode != 0 and "DyLibNotFound" in probe.stderr) or \
            (probe.returncode == 0 and probe.stdout.strip() in ("[]", "")):
        print("no OpenCL here: skipped")
        shutil.rmtree(tmp, ignore_errors=True)
        return 77

    srv = Server(args.uvcl, args, token_file, env)
    failures = []
    report = {"server_args": srv.proc.args[1:]}
    try:
        if srv.port is None:
            failures.append("the server did not start: " + srv.stderr()[-1000:])
        else:
            try:
                asyncio.run(load(args, srv, report, failures))
            except Failure as e:
                failures.append(f"warm-up: {e}")
    finally:
        if srv.proc.poll() is None:
            srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            rc = "hung on SIGTERM (killed)"
        srv.thread.join(timeout=5)
        shutil.rmtree(tmp, ignore_errors=True)
    report["server_exit_code"] = rc
    if rc != 0:
        failures.append(f"server exit code {rc} after SIGTERM: {srv.stderr()[-1000:]}")
    elif "uvcl serve: stopped" not in srv.stderr():
        failures.append("the server did not print 'uvcl serve: stopped'")
    report["failures"] = failures
    report["passed"] = not failures
    if "classes" in report:
        print_report(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    for f_ in failures:
        print("FAIL " + f_)
    print("serve-load: " + ("passed" if not failures else f"FAILED ({len(failures)} assertions)"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
