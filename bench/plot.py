#!/usr/bin/env python3
"""Plots from the benchmark JSON (matplotlib, PNG):

    plot.py --pocl bench-results/pocl.json [--h200 bench-results/h200.json] --out docs/img

concurrency_<tag>.png  figure 2: speedup over bare with 1 queue, uvcl with 1..16 queues, bare, pyopencl
latency_<tag>.png      figure 3: launch -> 4-byte read-back round trip, distribution (CDF)
lag_<tag>.png          figure 4: 1 ms timer lag under load, distribution (CDF)
"""
import argparse
import json
import os
import sys


def cdf(ax, samples, label):
    if not samples:
        return
    s = sorted(samples)
    n = len(s)
    ax.plot(s, [(i + 1) / n for i in range(n)], label="%s (n=%d)" % (label, n))


def finish(plt, fig, ax, path, made, grid_which="major", legend_size=None):
    """The end every figure shares: grid, legend, layout, PNG written, closed."""
    ax.grid(alpha=0.3, which=grid_which)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    made.append(path)


def cdf_figure(plt, curves, xlabel, ylabel, title, path, made, legend_size=None):
    """One figure of CDFs, (samples, label) each, on a log x axis."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for samples, label in curves:
        cdf(ax, samples, label)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    finish(plt, fig, ax, path, made, grid_which="both", legend_size=legend_size)


def plot_run(plt, j, tag, title, out):
    figs = j.get("figures", {})
    made = []
    f2 = figs.get("2")
    if f2 and "uvcl_curve" in f2:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        uq = [p["queues"] for p in f2["uvcl_curve"]]
        ax.plot(uq, [p["speedup"] for p in f2["uvcl_curve"]], "o-", label="uvcl, queues = 1..16")
        bq = [p["queues"] for p in f2.get("bare_curve", [])]
        ax.plot(bq, [p["speedup"] for p in f2["bare_curve"]], "s--", label="bare OpenCL, round robin")
        py = f2.get("pyopencl_curve")
        if py and len(py) == 2 and py[0]["ms"]:
            bare1 = next((p["ms"] for p in f2["bare_curve"] if p["queues"] == 1), None)
            if bare1:
                ax.plot([p["queues"] for p in py], [bare1 / p["ms"] for p in py], "^:", label="pyopencl")
        ax.axvline(8, color="grey", lw=0.5, ls=":")
        ax.set_xlabel("in-order queues")
        ax.set_ylabel("speedup over bare OpenCL, 1 queue")
        ax.set_title("%s: 64 independent chains of one-work-group kernels" % title, fontsize=10)
        finish(plt, fig, ax, os.path.join(out, "concurrency_%s.png" % tag), made)
    f3 = figs.get("3")
    if f3 and "samples" in f3:
        cdf_figure(plt, [(f3["samples"].get("uvcl"), "uvcl: read callback on the loop"),
                         (f3["samples"].get("bare"), "bare: launch + blocking read"),
                         (f3.get("pyopencl_samples"), "pyopencl: launch + blocking read")],
                   "launch -> 4-byte read-back (us, log scale)", "fraction of round trips",
                   "%s: completion latency" % title, os.path.join(out, "latency_%s.png" % tag), made)
    f4 = figs.get("4")
    if f4 and "samples" in f4:
        s = f4["samples"]
        curves = [([max(x, 1.0) for x in s[key]], label)
                  for key, label in (("uvcl", "uvcl, device-bound load"), ("bare", "bare loop, device-bound load"),
                                     ("uvcl_host_bound", "uvcl, host-bound load"),
                                     ("bare_host_bound", "bare, host-bound load"), ("idle", "idle loop"))
                  if s.get(key)]
        cdf_figure(plt, curves, "1 ms timer lag (us, log scale; 0 drawn at 1)", "fraction of ticks",
                   "%s: loop lag under load" % title, os.path.join(out, "lag_%s.png" % tag), made, legend_size=8)
    return made


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pocl", required=True)
    ap.add_argument("--h200")
    ap.add_argument("--out", default="docs/img")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("plot.py: matplotlib not importable (%s); no plots" % e)
        return 0
    os.makedirs(a.out, exist_ok=True)
    made = plot_run(plt, json.load(open(a.pocl)), "pocl", "PoCL", a.out)
    if a.h200 and os.path.exists(a.h200):
        made += plot_run(plt, json.load(open(a.h200)), "h200", "NVIDIA H200", a.out)
    for p in made:
        print("plot.py: wrote %s" % p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
