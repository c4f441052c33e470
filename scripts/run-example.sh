#!/usr/bin/env bash
# The main job: installs what building and running uvcl needs (nothing for
# tests or lint), builds the library and the uvcl program in build-example/,
# and runs examples/showcase/fanout.json on the default device (PoCL, the CPU
# OpenCL): three rounds of four independent kernels fanned out over the
# device's queues, each round joined by one kernel, then a checksum of the
# last round (63107.2 when every launch ran after its producers; the test
# `showcase` computes it). Then a summary: the
# device, the statistics, the schedule (commands per queue, cross-queue
# waits), every output (size, range, first values) and where the trace and
# the .npy outputs went. Extra arguments go to `uvcl run` (e.g. --device 1).
# UVCL_EXAMPLE_OUT=DIR: where the run's files go (default build-example/run).
set -euo pipefail
cd "$(dirname "$0")/.."
UVCL_SETUP=run scripts/setup.sh build-example
out=${UVCL_EXAMPLE_OUT:-build-example/run}
mkdir -p "$out"
job=examples/showcase/fanout.json
build-example/tools/uvcl run "$job" --trace "$out/trace.json" --schedule "$out/schedule.json" \
  --out "$out/outputs" "$@" > "$out/result.json"
exec python3 - "$job" "$out" <<'PY'
import json, math, os, sys
from collections import Counter
job, out = sys.argv[1], sys.argv[2]
result = json.load(open(os.path.join(out, "result.json")))
schedule = json.load(open(os.path.join(out, "schedule.json")))
dev, stats = result["device"], result["stats"]
print(f"uvcl ran {job} on device {dev['index']}: {dev['name']} ({dev['platform_name']})")
print(f"  {stats['launches']} launches, {stats['commands']} commands on {stats['queues']} queues, "
      f"{stats['cross_queue_waits']} cross-queue waits; compile {stats['compile_ms']:.1f} ms, run {stats['run_ms']:.1f} ms")
lanes = Counter((c["device"], c["queue"]) for c in schedule)
print("schedule (commands per queue; launches by their index in the job):")
for (d, q), n in sorted(lanes.items(), key=lambda k: (k[0][0], k[0][1] if k[0][1] is not None else 1 << 30)):
    launches = [str(c["launch"]) for c in schedule if (c["device"], c["queue"]) == (d, q) and c["op"] == "launch"]
    print(f"  device {d} queue {q}: {n} commands" + (f", launches {' '.join(launches)}" if launches else ""))
print("outputs:")
for name, values in result["outputs"].items():
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    rng = f"min {min(finite):g}, max {max(finite):g}, mean {sum(finite) / len(finite):g}" if finite else "no finite values"
    print(f"  {name}: {len(values)} values, {rng}; first {', '.join(f'{v:g}' for v in values[:4])}")
print(f"files: {out}/result.json (uvcl run's output), {out}/schedule.json (--schedule), "
      f"{out}/outputs/*.npy (--out)")
print(f"trace: {out}/trace.json: open it in https://ui.perfetto.dev or chrome://tracing "
      "(one process per device, one lane per queue)")
PY
