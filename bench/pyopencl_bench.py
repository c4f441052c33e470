#!/usr/bin/env python3
"""pyopencl side of the uvcl benchmarks (figures 1, 2, 3, 5, 5x, 6, 7).

Same kernels, sizes and row keys as bench/uvcl_bench.cpp, so bench/report.py
can put the numbers in the same tables. Writes a JSON file:
    {"meta": {...}, "figures": {"1": {"rows": [{"key": ..., "pyopencl": ...}]}}}

Optional by design: when pyopencl (Debian: python3-pyopencl) cannot be
imported, it writes {"skipped": "..."} and exits 0.

    pyopencl_bench.py --json OUT [--device N] [--quick] [--smoke]
                      [--figure 1,2,...] [--launches N] [--spin-iters N]
"""
import argparse
import json
import os
import random
import sys
import tempfile
import time

KERNELS = r"""
__kernel void tiny(__global float* x) { x[get_global_id(0)] += 1.0f; }
__kernel void tiny_add(__global float* x, float a) { x[get_global_id(0)] += a; }
__kernel void spin(__global float* x, int iters) {
  const size_t i = get_global_id(0);
  float v = x[i];
  for (int k = 0; k < iters; ++k) v = v * 0.99999f + 0.00001f;
  x[i] = v;
}
__kernel void produce(__global float* t, __global const float* in) {
  const size_t i = get_global_id(0);
  t[i] = in[i] * 2.0f;
}
__kernel void consume(__global float* out, __global const float* t) {
  const size_t i = get_global_id(0);
  out[i] += t[i];
}
"""
# The rest of the compile figure's program (same text as kCompileExtra in uvcl_bench.cpp).
COMPILE_EXTRA = r"""
#define TILE 16
__kernel void matmul(__global const float* a, __global const float* b, __global float* c, int n) {
  __local float ta[TILE][TILE];
  __local float tb[TILE][TILE];
  const int row = get_global_id(1), col = get_global_id(0);
  const int lr = get_local_id(1), lc = get_local_id(0);
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    ta[lr][lc] = a[row * n + t + lc];
    tb[lr][lc] = b[(t + lr) * n + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; ++k) acc += ta[lr][k] * tb[k][lc];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  c[row * n + col] = acc;
}
__kernel void softmax(__global const float* x, __global float* y, int n) {
  const int r = get_global_id(0);
  float m = -INFINITY;
  for (int i = 0; i < n; ++i) m = fmax(m, x[r * n + i]);
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += exp(x[r * n + i] - m);
  for (int i = 0; i < n; ++i) y[r * n + i] = exp(x[r * n + i] - m) / s;
}
__kernel void reduce(__global const float* x, __global float* out, __local float* scratch, int n) {
  const int lid = get_local_id(0);
  float acc = 0.0f;
  for (int i = get_global_id(0); i < n; i += get_global_size(0)) acc += x[i];
  scratch[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) out[get_group_id(0)] = scratch[0];
}
"""
OPTIONS = ["-cl-finite-math-only", "-cl-no-signed-zeros", "-cl-mad-enable", "-cl-kernel-arg-info"]


def percentile(v, p):
    if not v:
        return None
    s = sorted(v)
    pos = p / 100.0 * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    f = pos - lo
    return s[lo] * (1 - f) + s[hi] * f


def median(v):
    return percentile(v, 50)


def now():
    return time.perf_counter()


class Bench:
    def __init__(self, args, cl, np):
        self.a = args
        self.cl = cl
        self.np = np
        devices = []
        for p in cl.get_platforms():
            try:
                devices.extend(p.get_devices())
            except cl.Error:
                pass
        self.devices = devices
        self.dev = devices[args.device]
        self.ctx = cl.Context([self.dev])
        self.q = cl.CommandQueue(self.ctx)
        self.prg = cl.Program(self.ctx, KERNELS).build(options=OPTIONS)
        self.mf = cl.mem_flags

    def pick(self, full, quick, smoke):
        return smoke if self.a.smoke else quick if self.a.quick else full

    def zeroed(self, nbytes, ctx=None, q=None):
        cl, np = self.cl, self.np
        ctx = ctx or self.ctx
        q = q or self.q
        b = cl.Buffer(ctx, self.mf.READ_WRITE, nbytes)
        cl.enqueue_copy(q, b, np.zeros(nbytes // 4, np.float32), is_blocking=True)
        return b

    # ------------------------------------------------------------ figure 1
    def fig1(self):
        cl, np = self.cl, self.np
        n = self.a.launches or self.pick(100000, 20000, 1000)
        reps = self.pick(3, 2, 1)
        nbuf = self.pick(1024, 1024, 64)
        tiny = cl.Kernel(self.prg, "tiny")
        add = cl.Kernel(self.prg, "tiny_add")
        chain = self.zeroed(256)
        many = [self.zeroed(256) for _ in range(nbuf)]
        q = self.q

        def run(v, style, count):
            t0 = now()
            c0 = time.thread_time()
            if style == "call":  # the idiomatic call: sets every argument, returns an event
                if v == 0:
                    for _ in range(count):
                        tiny(q, (1,), None, chain)
                elif v == 1:
                    for i in range(count):
                        tiny(q, (1,), None, many[i % nbuf])
                else:
                    for i in range(count):
                        add(q, (1,), None, chain, np.float32(i & 1023))
            else:  # set_arg + enqueue_nd_range_kernel
                if v == 0:
                    for _ in range(count):
                        tiny.set_arg(0, chain)
                        cl.enqueue_nd_range_kernel(q, tiny, (1,), None)
                elif v == 1:
                    for i in range(count):
                        tiny.set_arg(0, many[i % nbuf])
                        cl.enqueue_nd_range_kernel(q, tiny, (1,), None)
                else:
                    for i in range(count):
                        add.set_arg(0, chain)
                        add.set_arg(1, np.float32(i & 1023))
                        cl.enqueue_nd_range_kernel(q, add, (1,), None)
            submit = now() - t0
            submit_cpu = time.thread_time() - c0
            q.finish()
            total = now() - t0
            cpu = time.thread_time() - c0
            k = 1e6 / count
            return submit * k, submit_cpu * k, total * k, cpu * k

        rows = []
        names = "abc"
        for v in range(3):
            run(v, "call", min(n, 2000))
            res = {"call": [], "setarg": []}
            for _ in range(reps):
                for style in res:
                    res[style].append(run(v, style, n))
            for idx, suffix in enumerate([".submit", ".submit_cpu", ".total", ".cpu"]):
                rows.append({"key": "1%s%s" % (names[v], suffix),
                             "pyopencl": median([r[idx] for r in res["call"]]),
                             "pyopencl_setarg": median([r[idx] for r in res["setarg"]])})
        return {"rows": rows, "params": {"launches": n, "reps": reps}}

    # ------------------------------------------------------------ figure 2
    def fig2(self):
        cl = self.cl
        iters = self.a.spin_iters
        if not iters:
            return {"skipped": "needs --spin-iters (from the uvcl run)"}
        chains = 64
        length = self.pick(32, 8, 2)
        reps = self.pick(3, 2, 1)
        wg = min(64, self.dev.max_work_group_size)
        queues = [cl.CommandQueue(self.ctx) for _ in range(16)]
        spin = cl.Kernel(self.prg, "spin")
        bufs = [self.zeroed(wg * 4) for _ in range(chains)]
        it = self.np.int32(iters)

        def run(nq):
            t0 = now()
            for _ in range(length):
                for ch in range(chains):
                    spin(queues[ch % nq], (wg,), (wg,), bufs[ch], it)
                for qq in queues[:nq]:
                    qq.flush()
            for qq in queues[:nq]:
                qq.finish()
            return (now() - t0) * 1e3

        run(16)
        t1 = min(run(1) for _ in range(reps))
        t16 = min(run(16) for _ in range(reps))
        return {"rows": [{"key": "2.time", "pyopencl": t16, "pyopencl1": t1},
                         {"key": "2.speedup", "pyopencl": t1 / t16, "pyopencl1": 1.0}],
                "curve": [{"queues": 1, "ms": t1}, {"queues": 16, "ms": t16}]}

    # ------------------------------------------------------------ figure 3
    def fig3(self):
        cl, np = self.cl, self.np
        samples = self.pick(2000, 300, 20)
        warm = self.pick(100, 30, 5)
        tiny = cl.Kernel(self.prg, "tiny")
        buf = self.zeroed(256)
        host = np.zeros(1, np.float32)
        lat = []
        for i in range(warm + samples):
            t0 = now()
            tiny(self.q, (1,), None, buf)
            cl.enqueue_copy(self.q, host, buf, is_blocking=True)
            us = (now() - t0) * 1e6
            if i >= warm:
                lat.append(us)
        rows = [{"key": "3.p50", "pyopencl": percentile(lat, 50)},
                {"key": "3.p90", "pyopencl": percentile(lat, 90)},
                {"key": "3.p99", "pyopencl": percentile(lat, 99)},
                {"key": "3.max", "pyopencl": max(lat)}]
        return {"rows": rows, "samples": [round(x, 2) for x in lat]}

    # ------------------------------------------------------------ figure 5
    def map_pinned(self, nbytes, ctx=None, q=None):
        cl, np = self.cl, self.np
        ctx = ctx or self.ctx
        q = q or self.q
        pin = cl.Buffer(ctx, self.mf.ALLOC_HOST_PTR | self.mf.READ_WRITE, nbytes)
        hp, _ = cl.enqueue_map_buffer(q, pin, cl.map_flags.READ | cl.map_flags.WRITE, 0, (nbytes,), np.uint8,
                                      is_blocking=True)
        hp[:] = 1
        return pin, hp

    def fig5(self):
        cl, np = self.cl, self.np
        big = self.pick(256 << 20, 64 << 20, 1 << 20)
        small = 4096
        reps = self.pick(5, 3, 1)
        ops = self.pick(1000, 200, 10)
        q = self.q
        a = cl.Buffer(self.ctx, self.mf.READ_WRITE, big)
        b = cl.Buffer(self.ctx, self.mf.READ_WRITE, big)
        s = cl.Buffer(self.ctx, self.mf.READ_WRITE, small)
        host = np.ones(big, np.uint8)
        back = np.zeros(big, np.uint8)
        pin, hp = self.map_pinned(big)

        def timed(fn):
            t0 = now()
            fn()
            return (now() - t0) * 1e6

        res = {k: [] for k in ("wp", "wg", "rp", "rg", "cp")}
        for r in range(reps + 1):
            wp = timed(lambda: cl.enqueue_copy(q, a, hp, is_blocking=True))
            wg = timed(lambda: cl.enqueue_copy(q, a, host, is_blocking=True))
            rp = timed(lambda: cl.enqueue_copy(q, hp, a, is_blocking=True))
            rg = timed(lambda: cl.enqueue_copy(q, back, a, is_blocking=True))

            def cp():
                cl.enqueue_copy(q, b, a, byte_count=big)
                q.finish()
            c = timed(cp)
            if r == 0:
                continue
            for k, v in (("wp", wp), ("wg", wg), ("rp", rp), ("rg", rg), ("cp", c)):
                res[k].append(big / (v * 1e3))

        def seq(fn):
            fn()
            t0 = now()
            for _ in range(ops):
                fn()
            return (now() - t0) * 1e6 / ops

        hps, hgs, backs = hp[:small], host[:small], back[:small]
        w_pin = seq(lambda: cl.enqueue_copy(q, s, hps, is_blocking=True))
        w_page = seq(lambda: cl.enqueue_copy(q, s, hgs, is_blocking=True))
        r_pin = seq(lambda: cl.enqueue_copy(q, hps, s, is_blocking=True))
        r_page = seq(lambda: cl.enqueue_copy(q, backs, s, is_blocking=True))
        t0 = now()
        for _ in range(ops):
            cl.enqueue_copy(q, s, hps, is_blocking=False)
        q.finish()
        w_pipe = (now() - t0) * 1e6 / ops
        t0 = now()
        for _ in range(ops):
            cl.enqueue_copy(q, hps, s, is_blocking=False)
        q.finish()
        r_pipe = (now() - t0) * 1e6 / ops
        rows = [
            {"key": "5.h2d", "pyopencl": median(res["wp"]), "pyopencl_pageable": median(res["wg"])},
            {"key": "5.d2h", "pyopencl": median(res["rp"]), "pyopencl_pageable": median(res["rg"])},
            {"key": "5.d2d", "pyopencl": median(res["cp"])},
            {"key": "5.h2d_small", "pyopencl": w_pin, "pyopencl_pageable": w_page},
            {"key": "5.d2h_small", "pyopencl": r_pin, "pyopencl_pageable": r_page},
            {"key": "5.h2d_small_pipelined", "pyopencl": w_pipe},
            {"key": "5.d2h_small_pipelined", "pyopencl": r_pipe},
        ]
        return {"rows": rows}

    def fig5x(self):
        cl = self.cl
        other = self.a.device2
        if other is None or other < 0:
            other = next((i for i in range(len(self.devices)) if i != self.a.device), None)
        if other is None or other >= len(self.devices):
            return {"skipped": "needs a second OpenCL device"}
        nbytes = self.pick(256 << 20, 64 << 20, 1 << 20)
        reps = self.pick(5, 3, 1)
        ctx_b = cl.Context([self.devices[other]])
        q_b = cl.CommandQueue(ctx_b)
        src = cl.Buffer(self.ctx, self.mf.READ_WRITE, nbytes)
        dst = cl.Buffer(ctx_b, self.mf.READ_WRITE, nbytes)
        pin, hp = self.map_pinned(nbytes)
        cl.enqueue_copy(self.q, src, hp, is_blocking=True)
        t = []
        for r in range(reps + 1):
            t0 = now()
            cl.enqueue_copy(self.q, hp, src, is_blocking=True)
            cl.enqueue_copy(q_b, dst, hp, is_blocking=True)
            if r:
                t.append(nbytes / ((now() - t0) * 1e9))
        return {"rows": [{"key": "5x.cross", "pyopencl": median(t)}]}

    # ------------------------------------------------------------ figure 6
    def fig6(self):
        cl = self.cl
        iters = self.pick(2000, 400, 20)
        reps = self.pick(3, 2, 1)
        items = 16384
        nbytes = items * 4
        produce = cl.Kernel(self.prg, "produce")
        consume = cl.Kernel(self.prg, "consume")
        inp = self.zeroed(nbytes)
        out = self.zeroed(nbytes)
        q = self.q

        def run(frees):
            kept = []
            t0 = now()
            for _ in range(iters):
                t = cl.Buffer(self.ctx, self.mf.READ_WRITE, nbytes)
                produce(q, (items,), None, t, inp)
                consume(q, (items,), None, out, t)
                if frees:
                    t.release()
                else:
                    kept.append(t)
            q.finish()
            us = (now() - t0) * 1e6 / iters
            for t in kept:
                t.release()
            return us

        run(True)
        w, n = [], []
        for _ in range(reps):
            w.append(run(True))
            n.append(run(False))
        return {"rows": [{"key": "6.with_frees", "pyopencl": median(w)},
                         {"key": "6.without_frees", "pyopencl": median(n)},
                         {"key": "6.ratio", "pyopencl": median(n) / median(w)}]}

    # ------------------------------------------------------------ figure 7
    def fig7(self):
        cl, np = self.cl, self.np
        cold_n = self.pick(3, 2, 1)
        warm_n = self.pick(5, 3, 2)
        cache = tempfile.mkdtemp(prefix="uvcl-bench-pyopencl-")

        def source():
            return "// nonce %d\n" % random.getrandbits(63) + KERNELS + COMPILE_EXTRA

        def one(src):
            t0 = now()
            prg = cl.Program(self.ctx, src).build(options=OPTIONS, cache_dir=cache)
            build = (now() - t0) * 1e3
            k = cl.Kernel(prg, "tiny")
            buf = cl.Buffer(self.ctx, self.mf.READ_WRITE, 256)
            host = np.zeros(1, np.float32)
            k(self.q, (1,), None, buf)
            cl.enqueue_copy(self.q, host, buf, is_blocking=True)
            return build, (now() - t0) * 1e3

        cold, warm = [], []
        src = None
        for _ in range(cold_n):
            src = source()
            cold.append(one(src))
        for _ in range(warm_n):
            warm.append(one(src))
        cb, cr = median([c[0] for c in cold]), median([c[1] for c in cold])
        wb, wr = median([w[0] for w in warm]), median([w[1] for w in warm])
        return {"rows": [{"key": "7.cold", "pyopencl": cb}, {"key": "7.warm", "pyopencl": wb},
                         {"key": "7.cold_ready", "pyopencl": cr}, {"key": "7.warm_ready", "pyopencl": wr},
                         {"key": "7.speedup", "pyopencl": cb / wb},
                         {"key": "7.speedup_ready", "pyopencl": cr / wr}],
                "note": "pyopencl caches program binaries itself (cache_dir); warm builds load that binary"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--device2", type=int, default=-1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--figure", default="1,2,3,5,6,7")
    ap.add_argument("--launches", type=int, default=0)
    ap.add_argument("--spin-iters", type=int, default=0)
    args = ap.parse_args()
    if args.smoke:
        args.quick = True
    try:
        import numpy as np
        import pyopencl as cl
    except ImportError as e:
        with open(args.json, "w") as f:
            json.dump({"skipped": "pyopencl not importable: %s" % e}, f)
        print("pyopencl_bench: skipped (%s)" % e)
        return 0
    b = Bench(args, cl, np)
    out = {"meta": {"tool": "pyopencl_bench", "pyopencl_version": cl.VERSION_TEXT,
                    "python": sys.version.split()[0], "numpy": np.__version__,
                    "device": b.dev.name.strip(), "platform": b.dev.platform.name.strip(),
                    "driver_version": b.dev.driver_version.strip(), "mode":
                    "smoke" if args.smoke else "quick" if args.quick else "full"},
           "figures": {}}
    for fid in args.figure.split(","):
        fn = getattr(b, "fig" + fid, None)
        if fn is None:
            print("pyopencl_bench: unknown figure %s" % fid, file=sys.stderr)
            return 2
        t0 = now()
        print("pyopencl figure %s ..." % fid, flush=True)
        try:
            res = fn()
        except Exception as e:  # one failing figure must not lose the others
            res = {"error": "%s: %s" % (type(e).__name__, e)}
        res["seconds"] = now() - t0
        out["figures"][fid] = res
        for r in res.get("rows", []):
            print("  [%s] %s: %s" % (fid, r["key"], ", ".join(
                "%s=%.4g" % (k, v) for k, v in r.items() if k != "key" and isinstance(v, (int, float)))))
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
