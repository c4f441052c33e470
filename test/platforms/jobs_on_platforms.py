"""Runs every example job on each device configuration — one PoCL device,
two PoCL devices (on the second, and on "any"), and Oclgrind (an OpenCL simulator that also checks kernels
for data races and out-of-bounds accesses) — and requires identical outputs.
Usage: jobs_on_platforms.py UVCL_BINARY JOBS_DIR"""
import glob
import json
import os
import subprocess
import sys
import tempfile

uvcl, jobs_dir = sys.argv[1], sys.argv[2]
jobs = sorted(glob.glob(os.path.join(jobs_dir, "*.json")))
assert jobs, "no example jobs in " + jobs_dir


def run(job, env_extra, device):
    env = dict(os.environ, **env_extra)
    p = subprocess.run([uvcl, "run", job, "--device", str(device)], env=env, capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"FAIL {os.path.basename(job)} on {env_extra or 'PoCL'} device {device}: {p.stderr}")
    return json.loads(p.stdout)


icd = tempfile.mkdtemp(prefix="uvcl-icd-")
configs = [("pocl", {}, 0), ("pocl-two-devices", {"POCL_DEVICES": "pthread pthread"}, 1),
           # --device any: each launch where the engine expects it to end first.
           ("pocl-two-devices-any", {"POCL_DEVICES": "pthread pthread"}, "any")]
if os.path.exists("/usr/lib/oclgrind/liboclgrind-rt-icd.so"):
    with open(os.path.join(icd, "oclgrind.icd"), "w") as f:
        f.write("/usr/lib/oclgrind/liboclgrind-rt-icd.so\n")
    configs.append(("oclgrind", {"OCL_ICD_VENDORS": icd, "OCLGRIND_CHECK_API": "1"}, 0))
else:
    print("oclgrind not installed: skipping that configuration")

failures = 0
for job in jobs:
    reference = None
    for name, env, device in configs:
        out = run(job, env, device)
        if name == "oclgrind":
            assert out["device"]["platform_name"] == "Oclgrind", out["device"]["platform_name"]
        if reference is None:
            reference = out["outputs"]
        elif out["outputs"] != reference:
            print(f"FAIL {os.path.basename(job)}: outputs on {name} differ from PoCL")
            failures += 1
        print(f"ok {os.path.basename(job)} on {name}")
sys.exit(1 if failures else 0)
