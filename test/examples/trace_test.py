#!/usr/bin/env python3
"""`uvcl run JOB --trace T.json`, then T.json checked against the Chrome
trace-event format (the JSON Object Format that Perfetto and chrome://tracing
load): no trace processor is installed here, so the structure is checked.

Checks: a {"traceEvents": [...]} object with a valid displayTimeUnit; every
event has a known phase and integer pid/tid where the phase needs them;
complete events ("X") have numeric ts and dur >= 0; every flow end ("f")
has its start ("s"); metadata ("M") names every process (one pid per
device, all distinct, none equal to the host's) and every lane (thread_name
for each pid/tid that holds an event); the job's commands spread over more
than one queue.

Usage: trace_test.py UVCL JOB.json"""
import json
import os
import subprocess
import sys
import tempfile

from checks import Checks

PHASES = {"X", "B", "E", "i", "I", "M", "s", "t", "f", "C", "b", "e", "n"}


def main():
    uvcl, job = sys.argv[1], sys.argv[2]
    check = Checks("trace_test")

    env = dict(os.environ)
    env["POCL_DEVICES"] = "pthread pthread"  # two devices: two device processes
    with tempfile.TemporaryDirectory(prefix="uvcl-trace-") as tmp:
        path = os.path.join(tmp, "trace.json")
        p = subprocess.run([uvcl, "run", job, "--quiet", "--trace", path], capture_output=True, text=True,
                           env=env, timeout=120)
        if not check(p.returncode == 0, f"uvcl run --trace exits 0 (got {p.returncode})"):
            print(p.stderr[-3000:])
            return 1
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)

    check(isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), "a {\"traceEvents\": [...]} object")
    check(trace.get("displayTimeUnit", "ms") in ("ms", "ns"), "displayTimeUnit is ms or ns")
    events = trace.get("traceEvents", [])
    bad = [e for e in events if not isinstance(e, dict) or e.get("ph") not in PHASES
           or not isinstance(e.get("name"), str) or not isinstance(e.get("pid"), int)]
    check(not bad, f"every event has a known ph, a name and an integer pid ({len(bad)} do not: {bad[:2]})")
    boxes = [e for e in events if e.get("ph") == "X"]
    check(len(boxes) > 0, f"complete events (ph X): {len(boxes)}")
    bad = [e for e in boxes if not isinstance(e.get("tid"), int) or not isinstance(e.get("ts"), (int, float))
           or not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0 or e["ts"] < 0]
    check(not bad, f"every X event has an integer tid, ts >= 0 and dur >= 0 ({len(bad)} do not: {bad[:2]})")
    starts = {(e.get("cat"), e.get("id")) for e in events if e.get("ph") == "s"}
    ends = [e for e in events if e.get("ph") == "f"]
    check(all((e.get("cat"), e.get("id")) in starts and e.get("bp") == "e" for e in ends),
          f"every flow end (f, bp e) has its start (s): {len(ends)} flows")

    meta = [e for e in events if e.get("ph") == "M"]
    bad = [e for e in meta if e.get("name") not in ("process_name", "thread_name", "process_sort_index",
                                                       "thread_sort_index")
           or not isinstance(e.get("args"), dict)]
    check(not bad, f"metadata events are process_name / thread_name with args ({bad[:2]})")
    procs = {}
    for e in meta:
        if e.get("name") == "process_name":
            check(e["pid"] not in procs, f"pid {e['pid']} named once")
            procs[e["pid"]] = e["args"].get("name")
    threads = {(e["pid"], e.get("tid")): e["args"].get("name") for e in meta if e.get("name") == "thread_name"}
    devices = {pid: n for pid, n in procs.items() if isinstance(n, str) and n.startswith("device ")}
    hosts = {pid for pid, n in procs.items() if isinstance(n, str) and n.startswith("host")}
    check(len(devices) == 2, f"one process per device, distinct pids: {sorted(devices.items())}")
    check(len(hosts) == 1 and not hosts & set(devices), f"a host process apart from the devices: {sorted(hosts)}")
    used = {(e["pid"], e["tid"]) for e in events if e.get("ph") in ("X", "s", "f")}
    unnamed_p = sorted({pid for pid, _ in used if pid not in procs})
    unnamed_t = sorted(k for k in used if not isinstance(threads.get(k), str) or not threads[k])
    check(not unnamed_p, f"every pid with events has a process_name ({unnamed_p})")
    check(not unnamed_t, f"every lane (pid, tid) with events has a thread_name ({unnamed_t})")
    for k in sorted(threads):
        print(f"  lane {k}: {procs.get(k[0])} / {threads[k]}")
    queues = {(e["pid"], e["tid"]) for e in boxes if e.get("cat") == "command"}
    check(len(queues) > 1, f"the job's commands spread over more than one queue ({len(queues)} lanes)")

    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
