#!/usr/bin/env python3
"""Renders a uvcl Chrome trace (`uvcl run --trace T.json`) to a PNG.

One lane per device queue (pid = device, tid = queue) and one for the host
(window submissions), a box per command from its device start to its end
(profiling times), and an arrow for every cross-queue wait (the trace's flow
events: from the producer's end on its queue to the consumer's start on
another).

Usage: trace_picture.py TRACE.json OUT.png [--title TEXT]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

HOST_PID = 1000  # uvcl's host track (trace.cpp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--title", default="uvcl run --trace")
    a = ap.parse_args()
    events = json.load(open(a.trace))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    boxes = [e for e in events if e.get("ph") == "X"]
    if not boxes:
        print("trace_picture.py: no commands in " + a.trace, file=sys.stderr)
        return 1
    t0 = min(e["ts"] for e in boxes)

    # Lanes: device queues in order, the host last (drawn at the top).
    lanes = sorted({(e["pid"], e["tid"]) for e in boxes}, key=lambda k: (k[0] == HOST_PID, k))
    row = {k: i for i, k in enumerate(lanes)}

    def label(k):
        pid, tid = k
        if pid == HOST_PID:
            return "host (loop)"
        return "device %d, queue %d" % (pid, tid)

    kernels = sorted({e["name"] for e in boxes if e["pid"] != HOST_PID})
    palette = plt.get_cmap("tab10")
    colour = {n: palette(i % 10) for i, n in enumerate(kernels)}

    fig, ax = plt.subplots(figsize=(11, 0.45 * len(lanes) + 1.8))
    for e in boxes:
        y = row[(e["pid"], e["tid"])]
        x = (e["ts"] - t0) / 1000.0
        w = max(e.get("dur", 0) / 1000.0, 0.004)
        host = e["pid"] == HOST_PID
        ax.add_patch(Rectangle((x, y - 0.35), w, 0.7, facecolor="lightgrey" if host else colour[e["name"]],
                               edgecolor="black", linewidth=0.4, label=None if host else e["name"]))
    # Flow events: 's' (producer) and 'f' (consumer) share an id.
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    arrows = 0
    for f in (e for e in events if e.get("ph") == "f"):
        s = starts.get(f["id"])
        if not s or (s["pid"], s["tid"]) not in row or (f["pid"], f["tid"]) not in row:
            continue
        p0 = ((s["ts"] - t0) / 1000.0, row[(s["pid"], s["tid"])])
        p1 = ((f["ts"] - t0) / 1000.0, row[(f["pid"], f["tid"])])
        ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle="-|>", mutation_scale=8, color="crimson",
                                     linewidth=0.7, alpha=0.8, connectionstyle="arc3,rad=0.15"))
        arrows += 1
    end = max((e["ts"] + e.get("dur", 0) - t0) / 1000.0 for e in boxes)
    ax.set_xlim(-0.02 * end, end * 1.02)
    ax.set_ylim(-0.8, len(lanes) - 0.2)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([label(k) for k in lanes], fontsize=8)
    ax.set_xlabel("ms since the first command")
    ax.set_title("%s: %d commands, %d cross-queue waits (arrows)" % (a.title, len(boxes), arrows), fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, facecolor=colour[n], edgecolor="black", linewidth=0.4) for n in kernels]
    handles.append(Rectangle((0, 0), 1, 1, facecolor="lightgrey", edgecolor="black", linewidth=0.4))
    ax.legend(handles, kernels + ["window submission"], fontsize=7, loc="upper left", ncol=len(handles))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("trace_picture.py: wrote %s (%d lanes, %d commands, %d arrows; device names: %s)"
          % (a.out, len(lanes), len(boxes), arrows, "; ".join(v for k, v in sorted(names.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
