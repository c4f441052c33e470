#!/usr/bin/env python3
"""Runs recorded tinygrad jobs with the uvcl CLI and compares their outputs to
what tinygrad computed for the same forward pass (NAME.expected.json, written
by bench/record_tinygrad.py).

    python3 bench/check_tinygrad_job.py [--uvcl build/tools/uvcl] [--replays 3] [JOB.json ...]

For each job it checks:
1. `uvcl run JOB.json`: every output within rtol 1e-5 (atol 1e-6) of tinygrad's;
2. a replay job: the same buffers and kernels with the launch list repeated
   --replays times in a row (what a replaying benchmark runs); its outputs
   must equal the single pass's bit for bit, i.e. the launch list can be
   replayed (no launch writes a buffer an earlier launch reads as input).

Prints one line per job with the largest errors; exits 1 if anything fails.
POCL_CACHE_DIR defaults to build/pocl-cache.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_uvcl(uvcl: str, job_path: str) -> dict:
  env = dict(os.environ)
  env.setdefault("POCL_CACHE_DIR", os.path.join(ROOT, "build", "pocl-cache"))
  p = subprocess.run([uvcl, "run", job_path], capture_output=True, text=True, env=env)
  if p.returncode != 0:
    raise RuntimeError(f"uvcl run {job_path} exited {p.returncode}:\n{p.stderr.strip()}")
  return json.loads(p.stdout)["outputs"]


def as_array(values, ctype: str = "float") -> np.ndarray:
  # uvcl prints a float in the shortest form that reads back to the same float, so round
  # through float32 before comparing (a double parse of "0.1" is not float32 0.1)
  dt = {"float": np.float32, "half": np.float16}.get(ctype, np.float64)
  return np.array([float(v) for v in values], dtype=dt).astype(np.float64)


def replay_job(job_path: str, replays: int, tmp: str) -> str:
  """The job with its launch list repeated, written to tmp with absolute file paths."""
  job = json.load(open(job_path))
  base = os.path.dirname(os.path.abspath(job_path))
  for b in job["buffers"].values():
    init = b.get("init", {})
    for key in ("file", "safetensors"):
      if key in init and not os.path.isabs(init[key]): init[key] = os.path.join(base, init[key])
  for k in job["kernels"].values():
    if "file" in k and not os.path.isabs(k["file"]): k["file"] = os.path.join(base, k["file"])
  job["launches"] = job["launches"] * replays
  out = os.path.join(tmp, f"replay{replays}-{os.path.basename(job_path)}")
  with open(out, "w") as f: json.dump(job, f)
  return out


def check(uvcl: str, job_path: str, replays: int, rtol: float, atol: float) -> bool:
  name = os.path.basename(job_path)
  expected_path = job_path[:-len(".json")] + ".expected.json"
  expected = json.load(open(expected_path))["outputs"]
  job = json.load(open(job_path))
  ok = True
  got = run_uvcl(uvcl, job_path)
  worst_abs = worst_rel = 0.0
  for bname, exp in expected.items():
    t = job["buffers"][bname]["type"]
    e, g = as_array(exp["values"], t), as_array(got[bname], t)
    if e.shape != g.shape:
      print(f"{name}: output {bname}: {g.size} values, tinygrad has {e.size}")
      return False
    diff = np.abs(g - e)
    worst_abs = max(worst_abs, float(diff.max()))
    worst_rel = max(worst_rel, float((diff / np.maximum(np.abs(e), 1e-30)).max()))
    if not np.allclose(g, e, rtol=rtol, atol=atol):
      bad = int(np.argmax(diff - rtol * np.abs(e)))
      print(f"{name}: output {bname}[{bad}] = {g[bad]!r}, tinygrad {e[bad]!r} (rtol {rtol}, atol {atol})")
      ok = False
  line = (f"{name}: {len(job['launches'])} launches, {len(job['kernels'])} kernels, {len(job['buffers'])} buffers; "
          f"outputs {', '.join(f'{b}[{len(got[b])}]' for b in expected)} vs tinygrad: max abs err {worst_abs:.3g}, "
          f"max rel err {worst_rel:.3g}")
  if replays > 1:
    with tempfile.TemporaryDirectory() as tmp:
      again = run_uvcl(uvcl, replay_job(job_path, replays, tmp))
    same = all(again[b] == got[b] for b in expected)
    line += f"; launch list x{replays}: {'identical outputs' if same else 'DIFFERENT outputs'}"
    ok = ok and same
  print(("ok   " if ok else "FAIL ") + line)
  return ok


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("jobs", nargs="*")
  ap.add_argument("--uvcl", default=os.path.join(ROOT, "build", "tools", "uvcl"))
  ap.add_argument("--replays", type=int, default=3)
  ap.add_argument("--rtol", type=float, default=1e-5)
  ap.add_argument("--atol", type=float, default=1e-6)
  a = ap.parse_args()
  jobs = a.jobs or sorted(p for p in glob.glob(os.path.join(ROOT, "bench", "jobs", "tinygrad-*.json"))
                          if not p.endswith(".expected.json"))
  if not jobs: raise SystemExit("check_tinygrad_job: no jobs")
  ok = True
  for j in jobs:
    try: ok = check(a.uvcl, j, a.replays, a.rtol, a.atol) and ok
    except RuntimeError as e:
      print(f"FAIL {os.path.basename(j)}: {e}")
      ok = False
  sys.exit(0 if ok else 1)


if __name__ == "__main__":
  main()
