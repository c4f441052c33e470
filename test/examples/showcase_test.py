#!/usr/bin/env python3
"""examples/showcase/fanout.json, run RUNS times with `uvcl run --schedule`:
every run's checksum matches the job computed here (a launch that ran before
one of its producers, or a fill left out that was needed, changes it), and in
every run each round's four `scale` launches ran on four different queues.

The job: `iota` writes x; three rounds of four `scale` launches (each reads
the round's input, writes its own o_i) joined by `join4` (reads o0..o3,
writes s, the next round's input); `checksum` reads s into sum. `scale` is
affine in its input (v -> v*k + c, 128 times), so the reference is closed
form.

Usage: showcase_test.py UVCL JOB.json [RUNS]"""
import json
import os
import subprocess
import sys
import tempfile

from checks import Checks

ROUNDS, BRANCHES = 3, 4


def reference(job):
    n = job["buffers"]["x"]["count"]
    value = [(i % 1000) * 0.001 for i in range(n)]
    scales = [l for l in job["launches"] if l["kernel"] == "scale"]
    for r in range(ROUNDS):
        outs = []
        for b in range(BRANCHES):
            args = scales[r * BRANCHES + b]["args"]
            k, c = args[2]["float"], args[3]["float"]
            kk = k ** 128
            outs.append([v * kk + c * (1 - kk) / (1 - k) for v in value])
        value = [(outs[0][j] + 2 * outs[1][j] + 3 * outs[2][j] + 4 * outs[3][j]) * 0.1 for j in range(n)]
    return sum(value[i] * (1 + i % 7) for i in range(n))


def main():
    uvcl, job_path = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    check = Checks("showcase_test")
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    want = reference(job)
    launches = job["launches"]
    rounds = []  # per round, the job indices of its scale launches
    index = [i for i, l in enumerate(launches) if l["kernel"] == "scale"]
    check(len(index) == ROUNDS * BRANCHES, f"{ROUNDS} rounds of {BRANCHES} scale launches ({len(index)})")
    for r in range(ROUNDS):
        rounds.append(index[r * BRANCHES:(r + 1) * BRANCHES])
    spread_runs = right_runs = 0
    with tempfile.TemporaryDirectory(prefix="uvcl-showcase-") as tmp:
        for run in range(runs):
            sched_path = os.path.join(tmp, f"schedule{run}.json")
            p = subprocess.run([uvcl, "run", job_path, "--schedule", sched_path], capture_output=True, text=True,
                               timeout=120)
            if not check(p.returncode == 0, f"run {run}: uvcl run exits 0 (got {p.returncode})"):
                print(p.stderr[-3000:])
                continue
            got = json.loads(p.stdout)["outputs"]["sum"][0]
            right = abs(got - want) <= 1e-4 * abs(want)
            right_runs += right
            if not right:
                print(f"run {run}: checksum {got}, expected {want}")
            with open(sched_path, encoding="utf-8") as f:
                schedule = json.load(f)
            queue_of = {c["launch"]: c["queue"] for c in schedule if c["op"] == "launch"}
            spread = all(len({queue_of.get(i) for i in r}) == BRANCHES for r in rounds)
            spread_runs += spread
            if not spread:
                print(f"run {run}: queues per round: {[[queue_of.get(i) for i in r] for r in rounds]}")
    check(right_runs == runs, f"the checksum is {want:.6g} in {right_runs} of {runs} runs")
    check(spread_runs == runs, f"each round's {BRANCHES} scale launches took {BRANCHES} queues in "
                               f"{spread_runs} of {runs} runs")
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
