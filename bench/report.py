#!/usr/bin/env python3
"""Merges benchmark JSON files and writes the full report (bench-results/report.md) from them.

    report.py merge --out bench-results/pocl.json --main uvcl.json
                    [--pyopencl py.json] [--cross cross.json] [--cross-pyopencl pyx.json]
                    [--variant NAME=file.json ...]
    report.py doc --pocl bench-results/pocl.json [--h200 bench-results/h200.json] [--h100 bench-results/h100.json]
                  [--notes bench/notes.md] [--img docs/img] --out bench-results/report.md

Every number in the document comes from the JSON files; the analysis text
comes from bench/notes.md (one "## N" section per figure, plus "## stops",
printed under the targets table, "## summary" and "## engine").
"""
import argparse
import json
import os
import re
import sys

FIGURE_ORDER = ["1", "2", "3", "4", "5", "5x", "6", "7", "8", "9", "10", "11", "12"]

EXTRA_LABELS = {
    "pyopencl": "pyopencl",
    "pyopencl_setarg": "pyopencl, set_arg + enqueue_nd_range_kernel",
    "pyopencl1": "pyopencl, 1 queue",
    "pyopencl_pageable": "pyopencl, pageable",
}

VARIANT_TEXT = {
    "pocl_1thread": "POCL_MAX_PTHREAD_COUNT=1: PoCL runs kernels on one core, the other is left to the loop thread",
    "pocl_nokcache": "POCL_KERNEL_CACHE=0: PoCL's own kernel cache off, so only uvcl's cache can make a build warm",
}

DESCRIPTIONS = {
    "1": "N launches of a one-work-item kernel issued back to back from the loop thread; host time per launch "
         "(the submit loop, wall and thread CPU), and wall time until all have completed. Bare: "
         "clSetKernelArg + clEnqueueNDRangeKernel on one in-order queue, with an event (released at once, or "
         "held until the end as a tracker would, or with a clFlush every 100 launches as uvcl's window flushes) and "
         "without. Bursts: 1000 launches then a finish, repeated, so "
         "the driver's queue never backs up.",
    "2": "64 independent chains, each a sequence of one-work-group kernels (64 work-items, a loop of work: "
         "about 100 us each on one queue) on its own buffer, issued round-robin over the chains. uvcl with "
         "1..16 queues; bare with chain i on queue i mod q, every queue flushed once per round.",
    "3": "A launch followed by a 4-byte read of its output, one at a time: uvcl measures launch() to the read "
         "callback on the loop thread, with the default config and with spin_us 1000 (the loop polls for the "
         "completion instead of sleeping until the driver's callback wakes it); bare measures launch + blocking "
         "clEnqueueReadBuffer.",
    "4": "A 1 ms repeating uv_timer on the loop; its lag is (interval - 1 ms) per tick, as Node's "
         "monitorEventLoopDelay measures it. Load: 64 groups of 16 launches + a 4-byte read whose callback "
         "issues the group again, so ~1088 commands are always in flight and 64 reads pending. Device-bound: "
         "~500 us kernels; host-bound: ~20 us kernels (the loop's submission rate is the limit). Bare: the same "
         "load from a hand-written loop (clSetEventCallback -> uv_async -> issue the next group).",
    "5": "Host->device and device->host of a large buffer and of 4 KiB, each issue-to-completion. uvcl write in "
         "Copy mode (copied into pinned staging before write() returns) and Borrow mode (the caller keeps the "
         "bytes), read (into pinned staging, span given to the callback); alloc_host: the same transfers from and "
         "into pinned memory the caller got from Engine::alloc_host (write Borrow, read_into), no host copy; "
         "bare from pinned memory (CL_MEM_ALLOC_HOST_PTR, mapped) and from pageable memory (std::vector), "
         "blocking calls, and from pinned memory as a non-blocking call followed by clFinish (how uvcl issues "
         "it). The spin_us column repeats the alloc_host transfers and the copy with an engine whose loop polls "
         "for completions (opencl.spin_us 20000) instead of waiting for the driver's completion callback. "
         "The 4 KiB transfers run in rounds (7 in the full suite), the three engines taking turns; each cell is "
         "the median of the rounds.",
    "5x": "A copy between two devices. uvcl copy() stages it through pinned host memory in 4 MiB chunks, reads "
          "and writes overlapping; bare reads all of it into pinned memory, then writes it (blocking); "
          "bare_chunked is uvcl's scheme written by hand (4 MiB chunks through a ring of 4 pinned blocks, "
          "waits spinning on the event status).",
    "6": "Per iteration: allocate a 64 KiB temporary, a kernel writes it, a kernel reads it, release it (the "
         "release happens while both kernels are in flight). Against the same loop keeping every temporary "
         "alive until the end. uvcl and bare take turns, repetition by repetition (7 in the full suite; "
         "medians).",
    "7": "Build of a ~2 KB program (8 kernels). Cold: a source no cache has seen (a comment with a random "
         "number). Warm: the same source again. 'ready' adds kernel creation, a first launch and a 4-byte "
         "read-back (PoCL finishes code generation at the first launch). uvcl with opencl.cache_dir: warm means "
         "a fresh engine (a restarted process) finding the binary on disk.",
    "8": "Per-launch host cost with 1k, 100k and 1M live 64-byte buffers (launches use 1000 of them at "
         "every count, spread over the id space); resident memory per buffer and per in-flight command (RSS "
         "deltas, malloc_trim before each); RSS after many launches with the loop collecting completions "
         "against RSS after 100k. At each count uvcl and bare hold their buffers at once and take turns.",
    "9": "An idle engine (it has compiled, allocated and run work before) on its loop, with a 1 s timer of the "
         "benchmark's keeping uv_run going; process CPU time (CLOCK_PROCESS_CPUTIME_ID, what getrusage sums) per second, and the loop thread's own "
         "share. Bare: an idle context on a plain loop with the same timer.",
    "10": "compile() called from a timer callback on the loop, then kernel(), a launch and a read: the time spent "
          "inside each engine call and inside each engine loop callback (prepare, poll timer, async), and the "
          "worst lag of a 1 ms timer meanwhile. uvcl builds in its compiler process (the default), uvcl_inline "
          "with clBuildProgram on the loop. Cold: a source no cache has seen; warm: the same source again in the "
          "same engine (the program memo answers); cold_next: another new source in that engine (the compiler "
          "process is running); rebuild: the same source again with the memo off, so the build "
          "reaches the compiler process (already running; PoCL's kernel cache warm) or clBuildProgram. Bare: the "
          "duration of the blocking clBuildProgram.",
    "11": "Real workloads: the launches tinygrad sends to OpenCL for one forward pass of a small model, recorded "
          "as uvcl jobs (bench/jobs/README.md says how), replayed back to back many times after a warm-up pass. "
          "uvcl with its default queues (16 on a GPU, 8 on a CPU device) and with one; bare on one in-order queue without events (what the "
          "framework's own loop does); bare on 8 queues round-robin, an event per launch and the waits the "
          "buffer hazards need. Every way must leave the same output bytes. The ways take turns in rounds of "
          "up to 300 passes (7 rounds; the host's speed drifts within a run): time per pass in the median round.",
    "12": "Task graphs of one synthetic kernel (one work-group of 64 work-items spinning a calibrated number of "
          "iterations; eight input buffers, one output), each a list of launches in program order: fan-out/fan-in "
          "of width 2, 4 and 8 (a source, W branches, a join; 4 rounds chained), 8 chained diamonds "
          "(a -> b, c -> d), and a layered random DAG (6 layers of 6 nodes, each reading 1-3 outputs of the layer "
          "before, seed 12). Kernel sizes of about 20 us, 100 us and 1 ms alone (the best of five runs of launches "
          "back to back on one queue). Wall time from the first enqueue until all is done, median of the passes "
          "(7 in the full run, 3 with --quick), the ways taking turns after a warm-up pass: uvcl with its default "
          "queues (launch each node, then finish()); (a) bare on one in-order queue, no events; (b) bare on as many "
          "queues as uvcl's default, scheduled by hand: nodes round-robin over the queues within each topological "
          "level, each launch waiting only on its producers and write-after-read predecessors on other queues "
          "(the latest per queue), an event only where one is waited on, a queue flushed before another waits on "
          "it; (c) the lower bound max(critical path x d, nodes x d / usable concurrency), with usable concurrency "
          "min(queues, the device's concurrency) and at least 1, the device's concurrency measured as one launch "
          "per queue on every queue, repeated (launches x d / wall time). Every way's final buffers must agree with "
          "(a)'s. The tinygrad jobs are figure 11's.",
}


def repo_relative(text):
    """Paths of the machine a run was made on, shortened to what a reader can reproduce."""
    return re.sub(r"(?:/[^\s/`]+)*/((?:build-bench|\.gpu)/)", r"\1", str(text))


def load(path):
    with open(path) as f:
        return json.load(f)


def rows_by_key(fig):
    return {r["key"]: r for r in fig.get("rows", [])}


# ----------------------------------------------------------------- merge
def cmd_merge(a):
    out = load(a.main)
    figs = out.setdefault("figures", {})

    def merge_rows(src_figs, prefix_ok=None):
        for fid, sf in src_figs.items():
            if fid not in figs or "rows" not in sf:
                continue
            mine = rows_by_key(figs[fid])
            for r in sf["rows"]:
                if r["key"] in mine:
                    for k, v in r.items():
                        if k != "key":
                            mine[r["key"]][k] = v
            for k in ("samples", "curve"):
                if k in sf:
                    figs[fid].setdefault("pyopencl_" + k, sf[k])

    if a.cross:
        cross = load(a.cross)
        if "5x" in cross.get("figures", {}):
            figs["5x"] = cross["figures"]["5x"]
            figs["5x"]["environment"] = cross.get("meta", {}).get("env", {})
    for p in [a.pyopencl, a.cross_pyopencl]:
        if not p or not os.path.exists(p):
            continue
        py = load(p)
        if "skipped" in py:
            out.setdefault("meta", {})["pyopencl"] = "skipped: " + py["skipped"]
            continue
        out.setdefault("meta", {})["pyopencl"] = py.get("meta", {})
        merge_rows(py.get("figures", {}))
    for v in a.variant or []:
        name, path = v.split("=", 1)
        if os.path.exists(path):
            vj = load(path)
            out.setdefault("variants", {})[name] = {"figures": vj.get("figures", {}),
                                                    "env": vj.get("meta", {}).get("env", {})}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print("report.py: wrote %s" % a.out)


# ----------------------------------------------------------------- formatting
def fmt(v):
    if v is None or not isinstance(v, (int, float)):
        return "—"
    x = abs(v)
    if x >= 10000:
        return "%.0f" % v
    if x >= 100:
        return "%.0f" % v
    if x >= 10:
        return "%.1f" % v
    if x >= 1:
        return "%.2f" % v
    if x == 0:
        return "0"
    return "%.3g" % v


def val(fig, key, col):
    if not fig:
        return None
    r = rows_by_key(fig).get(key)
    if not r:
        return None
    v = r.get(col)
    return v if isinstance(v, (int, float)) else None


def columns_of(fig):
    cols = list(fig.get("columns", {}).keys())
    present = set()
    for r in fig.get("rows", []):
        for k, v in r.items():
            if k not in ("key", "label", "unit", "better") and isinstance(v, (int, float)):
                present.add(k)
    for r in fig.get("rows", []):
        for k in r:
            if k in present and k not in cols:
                cols.append(k)
    return [c for c in cols if c in present]


def label_of(fig, col):
    return fig.get("columns", {}).get(col) or EXTRA_LABELS.get(col, col)


def table(fig):
    cols = columns_of(fig)
    if not cols:
        return ""
    head = ["measure", "unit"] + [label_of(fig, c) for c in cols]
    has_ratio = "uvcl" in cols and "bare" in cols
    if has_ratio:
        head.append("uvcl / bare")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in fig.get("rows", []):
        arrow = "↑" if r.get("better") == "higher" else "↓"
        cells = [r.get("label", r["key"]), "%s %s" % (r.get("unit", ""), arrow)]
        cells += [fmt(r.get(c)) for c in cols]
        if has_ratio:
            u, b = r.get("uvcl"), r.get("bare")
            cells.append(fmt(u / b) if isinstance(u, (int, float)) and isinstance(b, (int, float)) and b else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------- targets
def yes(ok):
    if ok is None:
        return "n/a"
    return "**met**" if ok else "**not met**"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def within(value, limit):
    return None if value is None else value <= limit


def atleast(value, limit):
    return None if value is None else value >= limit


def targets(fid, F):
    """[(target text, value text, ok)] for figure fid from the figures dict F: the speed targets."""
    f = F.get(fid)
    if not f or "rows" not in f:
        return []
    out = []
    if fid == "1":
        for v, name in (("a", "(a) chain"), ("b", "(b) many buffers"), ("c", "(c) changing scalar")):
            w = ratio(val(f, "1%s.submit" % v, "uvcl"), val(f, "1%s.submit" % v, "bare"))
            bu = ratio(val(f, "1%s.burst" % v, "uvcl"), val(f, "1%s.burst" % v, "bare"))
            ok = None if w is None else (w <= 1.05 and (bu is None or bu <= 1.05))
            out.append(("submission %s <= 1.05x bare with events, bursts included" % name,
                        "%s x, bursts of 1000 %s x" % (fmt(w), fmt(bu)), ok))
            n = ratio(val(f, "1%s.submit" % v, "uvcl"), val(f, "1%s.submit" % v, "bare_noevent"))
            out.append(("submission %s <= 1.2x bare without events" % name, "%s x" % fmt(n), within(n, 1.2)))
    elif fid == "2":
        u = val(f, "2.speedup", "uvcl")
        ubest = val(f, "2.best", "uvcl")
        best = val(f, "2.best", "bare")
        out.append(("speedup >= 0.9x bare's best multi-queue speedup (default config)",
                    "uvcl %s x vs bare best %s x: %s of it" % (fmt(u), fmt(best), fmt(ratio(u, best))),
                    atleast(ratio(u, best), 0.9)))
        hu, hb = val(f, "2.head_to_head", "uvcl"), val(f, "2.head_to_head", "bare")
        if hu is not None and hb is not None:  # later runs: the two taking turns
            out.append(("the same, uvcl's default and bare on 16 queues taking turns (time ratio)",
                        "uvcl %s ms vs bare %s ms: %s of bare's speed" % (fmt(hu), fmt(hb), fmt(ratio(hb, hu))),
                        atleast(ratio(hb, hu), 0.9)))
        out.append(("the same, uvcl's best queue count (1..16)",
                    "uvcl %s x (%s queues): %s of bare's best" %
                    (fmt(ubest), f.get("uvcl_best_queues", "?"), fmt(ratio(ubest, best))),
                    atleast(ratio(ubest, best), 0.9)))
    elif fid == "3":
        b, b99 = val(f, "3.p50", "bare"), val(f, "3.p99", "bare")
        spun = f.get("uvcl_stats", {}).get("spin_us_per_round_trip")
        for col, name in (("uvcl", "default"), ("uvcl_nospin", "spin_us 0"), ("uvcl_spin", "spin_us")):
            u, u99 = val(f, "3.p50", col), val(f, "3.p99", col)
            if u is None or b is None:
                continue
            cost = "; the loop spun %s us per round trip" % fmt(spun) if col == "uvcl" and spun is not None else ""
            out.append(("launch -> read callback (%s): p50 <= bare blocking round trip + 5 us, p99 <= bare + 20 us"
                        % name, "p50 %s vs %s us (+%s), p99 %s vs %s us (+%s)%s" %
                        (fmt(u), fmt(b), fmt(u - b), fmt(u99), fmt(b99), fmt(u99 - b99), cost),
                        u <= b + 5 and u99 <= b99 + 20))
    elif fid == "4":
        hp99, hmax = val(f, "4.host.p99", "uvcl"), val(f, "4.host.max", "uvcl")
        thr = ratio(val(f, "4.host.throughput", "uvcl"), val(f, "4.host.throughput", "bare"))
        ok = None if hmax is None else ((hp99 or hmax) <= 1000 and hmax <= 2000 and (thr is None or thr >= 0.95))
        out.append(("host-bound load: loop lag p99 <= 1 ms, max <= 2 ms, throughput >= 0.95x the hand-written loop",
                    "p99 %s us, max %s us, throughput %s x (hand-written loop: p99 %s, max %s)" %
                    (fmt(hp99), fmt(hmax), fmt(thr), fmt(val(f, "4.host.p99", "bare")),
                     fmt(val(f, "4.host.max", "bare"))), ok))
        p99 = val(f, "4.p99", "uvcl")
        out.append(("device-bound load: loop lag p99 <= 500 us",
                    "p99 %s us (hand-written loop %s us)" % (fmt(p99), fmt(val(f, "4.p99", "bare"))),
                    within(p99, 500)))
    elif fid == "5":
        for key, col, name in (("5.h2d_small", "uvcl_host", "4 KiB write round trip"),
                               ("5.d2h_small", "uvcl_host", "4 KiB read round trip"),
                               ("5.h2d_small_pipelined", "uvcl_host", "4 KiB writes pipelined"),
                               ("5.d2h_small_pipelined", "uvcl_host", "4 KiB reads pipelined")):
            r = ratio(val(f, key, col), val(f, key, "bare"))
            out.append(("%s <= 1.5x bare" % name, "%s vs %s us: %s x" % (fmt(val(f, key, col)),
                                                                       fmt(val(f, key, "bare")), fmt(r)),
                        within(r, 1.5)))
        r = ratio(val(f, "5.d2d", "uvcl"), val(f, "5.d2d", "bare"))
        out.append(("device copy >= 0.95x bare", "%s vs %s GB/s: %s x" %
                    (fmt(val(f, "5.d2d", "uvcl")), fmt(val(f, "5.d2d", "bare")), fmt(r)), atleast(r, 0.95)))
        r = ratio(val(f, "5.h2d", "uvcl_borrow"), val(f, "5.h2d", "bare_pageable"))
        out.append(("write from pageable memory >= 0.95x bare pageable", "%s vs %s GB/s: %s x" %
                    (fmt(val(f, "5.h2d", "uvcl_borrow")), fmt(val(f, "5.h2d", "bare_pageable")), fmt(r)),
                    atleast(r, 0.95)))
    elif fid == "5x":
        r = ratio(val(f, "5x.cross", "uvcl"), val(f, "5x.cross", "bare"))
        if r is not None:
            out.append(("cross-device copy >= 0.9x bare staged through pinned memory",
                        "%s vs %s GB/s: %s x" % (fmt(val(f, "5x.cross", "uvcl")), fmt(val(f, "5x.cross", "bare")),
                                                fmt(r)), r >= 0.9))
    elif fid == "6":
        r = ratio(val(f, "6.with_frees", "uvcl"), val(f, "6.with_frees", "bare"))
        out.append(("allocate -> kernel -> free, per iteration <= 1.15x bare",
                    "%s vs %s us: %s x" % (fmt(val(f, "6.with_frees", "uvcl")), fmt(val(f, "6.with_frees", "bare")),
                                          fmt(r)), within(r, 1.15)))
    elif fid == "7":
        d = val(f, "7.speedup", "uvcl")
        c = val(f, "7.speedup", "uvcl_cache")
        best = max([x for x in (d, c) if x is not None], default=None)
        out.append(("warm compile >= 20x faster than cold",
                    "driver cache only %s x; uvcl cache_dir %s x (until the first result: %s x / %s x)" %
                    (fmt(d), fmt(c), fmt(val(f, "7.speedup_ready", "uvcl")),
                     fmt(val(f, "7.speedup_ready", "uvcl_cache"))), None if best is None else best >= 20))
    elif fid == "8":
        fl = val(f, "8.flatness", "uvcl")
        bfl = val(f, "8.flatness", "bare")
        out.append(("per-launch cost flat within 1.1x from 1k to 1M live buffers",
                    "%s x%s" % (fmt(fl), "" if bfl is None else " (bare over the same counts: %s x)" % fmt(bfl)),
                    within(fl, 1.1)))
        r = ratio(val(f, "8.launch_1000000", "uvcl"), val(f, "8.launch_1000000", "bare"))
        out.append(("per launch with 1M live buffers <= 1.15x bare", "%s x" % fmt(r), within(r, 1.15)))
        g, dm = val(f, "8.rss_growth", "uvcl"), val(f, "8.rss_delta", "uvcl")
        rr = [x for x in f["rows"] if x["key"] == "8.rss_growth"]
        out.append(("no RSS growth (RSS after N launches / after 100000)",
                    "%s x, %s MiB (%s)" % (fmt(g), fmt(dm), rr[0]["label"] if rr else "?"),
                    None if g is None else (g <= 1.02 or abs(dm) <= 1)))
    elif fid == "9":
        u = val(f, "9.cpu", "uvcl")
        out.append(("idle CPU < 1 ms per second",
                    "process %s ms/s (bare context %s), loop thread %s ms/s, engine wake-ups %s/s" %
                    (fmt(u), fmt(val(f, "9.cpu", "bare")), fmt(val(f, "9.loop_thread_cpu", "uvcl")),
                     fmt(val(f, "9.wakeups", "uvcl"))), None if u is None else u < 1))
    elif fid == "10":
        for ph in ("cold", "warm", "cold_next", "rebuild"):
            h = val(f, "10.%s.max_hold" % ph, "uvcl")
            out.append(("%s: the loop is never held more than 1 ms by a compile in process mode" % ph,
                        "longest hold %s ms (inline %s ms; with cache_dir %s ms; bare clBuildProgram %s ms); "
                        "compile() to on_built %s ms (inline %s ms)" %
                        (fmt(h), fmt(val(f, "10.%s.max_hold" % ph, "uvcl_inline")),
                         fmt(val(f, "10.%s.max_hold" % ph, "uvcl_cache")),
                         fmt(val(f, "10.%s.max_hold" % ph, "bare")),
                         fmt(val(f, "10.%s.built" % ph, "uvcl")),
                         fmt(val(f, "10.%s.built" % ph, "uvcl_inline"))), within(h, 1)))
    elif fid == "11":
        for r in f["rows"]:
            u, b1 = r.get("uvcl"), r.get("bare")
            rr = ratio(u, b1)
            out.append(("%s: <= 1.05x a bare one-queue replay" % r["label"],
                        "uvcl %s ms, 1 queue %s ms, bare %s ms, bare round-robin %s ms: %s x" %
                        (fmt(u), fmt(r.get("uvcl1")), fmt(b1), fmt(r.get("bare_rr")), fmt(rr)), within(rr, 1.05)))
    elif fid == "12":
        rows = {r["key"]: r for r in f.get("rows", [])}

        def worst(keys, col):
            got = [(rows[k].get(col), k) for k in keys if isinstance(rows.get(k, {}).get(col), (int, float))]
            return max(got) if got else (None, None)

        wide = [k for k in rows if k.split(".")[1] in ("fan4", "fan8") and k.split(".")[2] in ("100", "1000")]
        v, k = worst(wide, "uvcl_over_bound")
        out.append(("fan-out width >= 4, ~100 us and ~1 ms kernels: <= 1.15x the lower bound",
                    "worst %s x (%s)" % (fmt(v), rows[k]["label"] if k else "—"), within(v, 1.15)))
        v, k = worst(list(rows), "uvcl_over_bare1")
        out.append(("every graph and kernel size: <= 1.03x bare on one queue",
                    "worst %s x (%s)" % (fmt(v), rows[k]["label"] if k else "—"), within(v, 1.03)))
        v, k = worst(list(rows), "uvcl_over_hand")
        out.append(("every graph and kernel size: at or ahead of the hand schedule",
                    "worst %s x (%s)" % (fmt(v), rows[k]["label"] if k else "—"), within(v, 1.0)))
    return out


# ----------------------------------------------------------------- doc
def notes_sections(path):
    if not path or not os.path.exists(path):
        return {}
    text = open(path).read()
    parts = re.split(r"^## +(\S+)[^\n]*\n", text, flags=re.M)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def machine_table(runs):
    keys = [("CPU", lambda m: "%s, %s logical CPUs, %.0f GiB" % (m.get("cpu_model"), m.get("logical_cpus"),
                                                                  m.get("memory_gib", 0))),
            ("kernel", lambda m: m.get("kernel", "")),
            ("OpenCL platform", lambda m: "%s (%s)" % (m["device"]["platform"], m["device"]["platform_version"])),
            ("device", lambda m: "%s (%s, %s compute units, %.0f GiB)" % (
                m["device"]["name"], m["device"]["type"], m["device"]["compute_units"],
                m["device"]["global_memory_gib"])),
            ("driver", lambda m: "%s; %s; %s" % (m["device"]["driver_version"], m["device"]["device_version"],
                                                 m["device"]["opencl_c_version"])),
            ("run", lambda m: "%s, %s mode, %.0f s, nice %s" % (m.get("date"), m.get("mode"),
                                                               m.get("elapsed_s", 0), m.get("nice", "?"))),
            ("load average (start / end)", lambda m: "%s / %s" % (m.get("loadavg_start", "?"),
                                                                 m.get("loadavg_end", "?"))),
            ("command", lambda m: "`%s`" % repo_relative(m.get("command", ""))),
            ("figures from a later run", lambda m: "; ".join("%s: %s" % (k, v) for k, v in m["figures_from"].items())),
            ("environment", lambda m: ", ".join("%s=%s" % (k, repo_relative(v))
                                                for k, v in m.get("env", {}).items()) or "—")]
    head = "| | " + " | ".join(n for n, _ in runs) + " |\n|---|" + "---|" * len(runs) + "\n"
    body = ""
    for k, fn in keys:
        cells = []
        for _, j in runs:
            try:
                cells.append(str(fn(j["meta"])).replace("|", "\\|"))
            except (KeyError, TypeError):
                cells.append("—")
        body += "| %s | %s |\n" % (k, " | ".join(cells))
    return head + body


def cmd_doc(a):
    runs = [("PoCL (this machine)", load(a.pocl))]
    if a.h200 and os.path.exists(a.h200):
        runs.append(("NVIDIA H200", load(a.h200)))
    if a.h100 and os.path.exists(a.h100):  # a later build, when only an H100 was lent
        runs.append(("NVIDIA H100", load(a.h100)))
    notes = notes_sections(a.notes)
    o = []
    o.append("# uvcl benchmarks\n")
    o.append("uvcl measured side by side with the bare OpenCL API driven directly in the same process (through "
             "uvcl's own run-time loaded dispatch table, on the same device) and with pyopencl. Every number "
             "below is generated from the JSON files in `bench-results/` by `bench/report.py`; the analysis "
             "under each table is `bench/notes.md`. Ratios are uvcl / bare: below 1 is better for times (↓), "
             "above 1 is better for rates (↑).\n")
    # Target summary.
    o.append("## Targets\n")
    head = "| figure | target | " + " | ".join("%s" % n for n, _ in runs) + " |\n|---|---|" + "---|" * len(runs)
    o.append(head)
    for fid in FIGURE_ORDER:
        # By target name: a run may lack a target another has (a row added later).
        per_run = [{t[0]: t for t in targets(fid, j.get("figures", {}))} for _, j in runs]
        names = []
        for by_name in per_run:
            names += [n for n in by_name if n not in names]
        for name in names:
            cells = ["%s: %s" % (yes(t[name][2]), t[name][1]) if name in t else "—" for t in per_run]
            o.append("| %s | %s | %s |" % (fid, name, " | ".join(cells)))
    o.append("")
    if "stops" in notes:
        o.append("### What stops the targets not met on a GPU\n")
        o.append(notes["stops"] + "\n")
    o.append("## Reproduce\n")
    o.append("```\nscripts/bench.sh            # full PoCL suite + two-device figure + pyopencl, then this file\n"
             "scripts/bench.sh --quick    # the same, smaller (a few minutes)\n"
             "build-bench/bench/uvcl_bench --list-devices\n"
             "build-bench/bench/uvcl_bench --figure 3 --device N --json out.json\n"
             "# where each launch's host time goes, per OpenCL entry point (figures 1, 2, 5, 5x, 6, 10 and 11 add\n"
             "# \"driver\" tables), both sides timed through the same library:\n"
             "build-bench/bench/uvcl_bench --figure 2 --cl-library build-bench/bench/libuvcl_cl_timing.so\n"
             "# the engine's own host time per launch with a GPU driver's launch stood in for (a stub with its\n"
             "# memory and code footprint, bench/cl_timing/cl_timing.cpp), where no GPU is:\n"
             "UVCL_CL_TIMING_STUB_KERNELS=1024 UVCL_CL_TIMING_STUB_CODE=1 build-bench/bench/engine_loops launches 0 gpu \\\n"
             "    $PWD/build-bench/bench/libuvcl_cl_timing.so\n"
             "# GPU machine: copy build-bench/bench/uvcl_bench and the libraries it links (libuvcl, libuv,\n"
             "# libsimdjson) there, run it with NVIDIA's OpenCL registered with the ICD loader:\n"
             "#   uvcl_bench --device 1 --growth-launches 2000000 --json h200.json\n"
             "# or the suite, the driver tables and figure 5 without read bursts in one go:\n"
             "#   scripts/bench-gpu.sh OUT 1 libuvcl_cl_timing.so -- uvcl_bench\n"
             "# then here: cp h200.json bench-results/ && scripts/bench.sh --doc-only\n```\n")
    o.append("CI runs every figure once at a tiny size: `meson test bench-smoke bench-smoke-2dev` "
             "(`uvcl_bench --quick --smoke`, no pyopencl).\n")
    o.append("## Machines\n")
    o.append(machine_table(runs))
    py = runs[0][1].get("meta", {}).get("pyopencl")
    if isinstance(py, dict):
        o.append("\npyopencl %s (Python %s, numpy %s) on the PoCL device.\n" % (
            py.get("pyopencl_version"), py.get("python"), py.get("numpy")))
    elif py:
        o.append("\npyopencl: %s\n" % py)
    if "summary" in notes:
        o.append("\n" + notes["summary"] + "\n")
    for fid in FIGURE_ORDER:
        first = next((j["figures"][fid] for _, j in runs if fid in j.get("figures", {})), None)
        if first is None:
            continue
        o.append("## %s. %s\n" % (fid, first.get("title", "")))
        if fid in DESCRIPTIONS:
            o.append(DESCRIPTIONS[fid] + "\n")
        for name, j in runs:
            f = j.get("figures", {}).get(fid)
            if not f:
                continue
            o.append("**%s**%s\n" % (name, " — %s" % fmt_params(f.get("params")) if f.get("params") else ""))
            if f.get("run"):  # a figure spliced in from a later run than the machine table's
                o.append("*From the run of %s: `%s`.*\n" % (f["run"].get("date", "?"), f["run"].get("command", "?")))
            if "error" in f:
                o.append("Failed: `%s`\n" % f["error"])
                continue
            if "skipped" in f:
                o.append("Skipped: %s\n" % f["skipped"])
                continue
            o.append(table(f))
            for t in targets(fid, j.get("figures", {})):
                o.append("- %s — %s: %s" % (t[0], yes(t[2]), t[1]))
            o.append("")
            o.extend(window_table(f))
            o.extend(dag_kernel_table(f))
            for vname, v in j.get("variants", {}).items():
                vf = v.get("figures", {}).get(fid)
                if vf and "rows" in vf:
                    o.append("*Variant — %s:*\n" % VARIANT_TEXT.get(vname, vname))
                    o.append(table(vf))
                    for t in targets(fid, v.get("figures", {})):
                        o.append("- %s — %s: %s" % (t[0], yes(t[2]), t[1]))
                    o.append("")
        for img in IMAGES.get(fid, []):
            for tag, _ in [("pocl", 0), ("h200", 1)]:
                fn = "%s_%s.png" % (img, tag)
                if os.path.exists(os.path.join(a.img, fn)):
                    rel = os.path.relpath(os.path.join(a.img, fn), os.path.dirname(os.path.abspath(a.out)))
                    o.append("![%s %s](%s)\n" % (img, tag, rel))
        if fid in notes:
            o.append(notes[fid] + "\n")
    if "engine" in notes:
        o.append("## Engine performance problems found\n")
        o.append(notes["engine"] + "\n")
    with open(a.out, "w") as f:
        f.write("\n".join(o))
    print("report.py: wrote %s" % a.out)


def window_table(f):
    """Figure 2 at 16 queues by window size: where the wall time goes."""
    points = [p for p in f.get("uvcl_curve", []) if p.get("queues") == 16 and "tail_ms" in p]
    points += f.get("uvcl16_windows", [])
    if not points:
        return []
    o = ["*uvcl at 16 queues by window (commands per submission): the launch calls, then `finish()` "
         "(the last window's kernels and the completions the loop had not run to see):*\n",
         "| window | wall ms | launch calls ms | after the last launch ms | fences per repetition |",
         "|---|---|---|---|---|"]
    for p in points:
        o.append("| %s | %s | %s | %s | %s |" % (p.get("window", "default"), fmt(p.get("ms")), fmt(p.get("submit_ms")),
                                               fmt(p.get("tail_ms")), fmt(p.get("fences_per_rep"))))
    o.append("")
    return o


def dag_kernel_table(f):
    """Figure 12: each kernel size as measured, and the device's concurrency."""
    kernels = f.get("kernels", [])
    if not kernels or f.get("id") != "12":
        return []
    o = ["*Kernel sizes: the duration d of one launch on one queue (best of five runs back to back) and the "
         "device's concurrency (one launch per queue on %s queues, repeated; launches x d / wall time):*\n"
         % f.get("params", {}).get("queues", "?"),
         "| target us | iterations | d us | concurrency | usable concurrency |", "|---|---|---|---|---|"]
    for k in kernels:
        o.append("| %s | %s | %s | %s | %s |" % (fmt(k.get("target_us")), k.get("iters"), fmt(k.get("alone_us")),
                                                fmt(k.get("concurrency")), fmt(k.get("usable_concurrency"))))
    o.append("")
    return o


IMAGES = {"2": ["concurrency"], "3": ["latency"], "4": ["lag"]}


def fmt_params(p):
    if not p:
        return ""
    items = []
    for k, v in p.items():
        if isinstance(v, float):
            v = fmt(v)
        items.append("%s %s" % (k.replace("_", " "), repo_relative(v)))
    return ", ".join(items)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge")
    m.add_argument("--out", required=True)
    m.add_argument("--main", required=True)
    m.add_argument("--pyopencl")
    m.add_argument("--cross")
    m.add_argument("--cross-pyopencl")
    m.add_argument("--variant", action="append")
    d = sub.add_parser("doc")
    d.add_argument("--pocl", required=True)
    d.add_argument("--h200")
    d.add_argument("--h100")
    d.add_argument("--notes", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "notes.md"))
    d.add_argument("--img", default="docs/img")
    d.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "merge":
        cmd_merge(a)
    else:
        cmd_doc(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
