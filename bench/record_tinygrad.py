#!/usr/bin/env python3
"""Records what tinygrad sends to OpenCL for one forward pass of a small model
and writes it as a uvcl job (docs/job-format.md).

    DEV=CL python3 bench/record_tinygrad.py [--out bench/jobs] [mlp convnet transformer]

The recorder patches tinygrad's OpenCL runtime (tinygrad/runtime/ops_cl.py)
at its lowest level:

- CLAllocator._alloc / _free / _copyin / _copyout: every cl_mem created, and
  every host -> device and device -> host copy, with its bytes;
- CLProgram.__init__: every kernel tinygrad builds (its OpenCL C source as
  the renderer produced it, the entry name, the argument signature; tinygrad
  passes no build options to clBuildProgram);
- CLProgram.__call__ together with clEnqueueNDRangeKernel: every launch,
  with the cl_mem arguments by identity, the scalar arguments with their C
  type, and the global / local sizes exactly as handed to
  clEnqueueNDRangeKernel (tinygrad multiplies its grid by the local size
  before enqueueing; the recorded sizes are the products).

The job it writes has buffers b0..bN, one per cl_mem (see "versions" below),
typed with the element type the kernels use them as (uchar where kernels
disagree or none uses it), initialised from the host bytes copied into them
before their first use: all-equal bytes as {"fill"}, small ones as {"data"},
the rest as a raw .bin file next to the job. Buffers no host copy reaches
start as zeros (tinygrad writes them before reading them). Kernels are named
by their entry, launches are in enqueue order, and the outputs are the
buffers the model's results were read back from.

Three things do not map one to one, and the recorder handles them so:

- tinygrad's CL allocator has no device-to-device copy: a CL -> CL copy is a
  clEnqueueReadBuffer into host memory followed by a clEnqueueWriteBuffer of
  the same bytes. A read immediately followed by a write of identical bytes
  and length is recorded as one launch of an added kernel "uvcl_copy_T"
  (T the buffers' element type, one work-item per element; uvcl checks
  pointer element types, so the copy kernel is typed), not as an output and
  an init.
- tinygrad's LRU allocator reuses cl_mem objects. If the host writes into a
  cl_mem after a launch or copy already used it, the job cannot express
  that (inits happen once, before the launches), so the cl_mem gets a new
  job buffer from then on (a new "version"); the record counts these.
- Host copies that land after the launches started, into a buffer not yet
  used, are moved to the job's start as that buffer's init (same result).

Each model also writes NAME.expected.json: tinygrad's own result for the
forward pass, read back through the same clEnqueueReadBuffer the job's
outputs stand for; bench/check_tinygrad_job.py compares uvcl's output to it.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import struct
import sys

import numpy as np

# Small inits go inline; bigger ones to a .bin file.
INLINE_MAX_BYTES = 256
# Copy kernels for CL -> CL copies (tinygrad goes through host memory): one per element
# type, since uvcl checks a pointer parameter's element type against the buffer's type.
def copy_kernel(t: str) -> tuple[str, str]:
  name = f"uvcl_copy_{t}"
  ext = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n" if t == "half" else ""
  return name, (f"{ext}__kernel void {name}(__global {t}* dst, __global const {t}* src) {{\n"
                "  size_t i = get_global_id(0);\n"
                "  dst[i] = src[i];\n"
                "}\n")

# tinygrad dtype name -> (OpenCL C type, numpy dtype)
DTYPES = {
  "bool": ("uchar", np.uint8), "char": ("char", np.int8), "signed char": ("char", np.int8),
  "unsigned char": ("uchar", np.uint8), "short": ("short", np.int16), "unsigned short": ("ushort", np.uint16),
  "int": ("int", np.int32), "unsigned int": ("uint", np.uint32), "long": ("long", np.int64),
  "unsigned long": ("ulong", np.uint64), "half": ("half", np.float16), "float": ("float", np.float32),
  "double": ("double", np.float64),
}


def cl_type(dt) -> str:
  name = dt.scalar().name if hasattr(dt, "scalar") else dt.name
  if name not in DTYPES: raise SystemExit(f"record_tinygrad: no OpenCL C type for tinygrad dtype {dt!r}")
  return DTYPES[name][0]


class Recorder:
  def __init__(self):
    self.buffers: list[dict] = []      # version records, index = job buffer number
    self.live: dict[int, int] = {}     # cl_mem address -> current version index
    self.kernels: dict[tuple[str, str], str] = {}  # (entry, source) -> job kernel name
    self.kernel_defs: dict[str, dict] = {}
    self.launches: list[dict] = []
    self.outputs: list[int] = []       # version indices read back to the host
    self.pending_read: tuple[int, bytes] | None = None  # last copyout, for CL -> CL detection
    self.d2d = 0
    self.versions_split = 0
    self.late_inits = 0
    self.current_call = None
    self.allocs = 0

  # ---- buffers
  def new_version(self, addr: int, size: int) -> int:
    idx = len(self.buffers)
    self.buffers.append({"size": size, "init": None, "used": False, "types": set(), "addr": addr})
    self.live[addr] = idx
    return idx

  def version_of(self, mem) -> int:
    addr = ctypes.cast(mem, ctypes.c_void_p).value
    if addr not in self.live: raise SystemExit(f"record_tinygrad: cl_mem {addr:#x} used but never allocated")
    return self.live[addr]

  def on_alloc(self, mem, size: int):
    self.flush_read()
    self.allocs += 1
    self.new_version(ctypes.cast(mem, ctypes.c_void_p).value, size)

  def on_free(self, mem):
    self.flush_read()
    self.live.pop(ctypes.cast(mem, ctypes.c_void_p).value, None)

  def on_copyin(self, mem, data: bytes):
    idx = self.version_of(mem)
    if self.pending_read is not None:
      src, rbytes = self.pending_read
      self.pending_read = None
      if rbytes == data:       # a CL -> CL copy through host memory
        self.d2d += 1
        self.buffers[idx]["used"] = self.buffers[src]["used"] = True
        self.launches.append({"kernel": None, "copy_bytes": len(data), "args": [idx, src], "global": None, "local": None})
        return
      self.outputs.append(src)
    b = self.buffers[idx]
    if b["used"]:
      self.versions_split += 1
      idx = self.new_version(b["addr"], b["size"])
      b = self.buffers[idx]
    elif self.launches: self.late_inits += 1
    init = bytearray(b["init"] if b["init"] is not None else bytes(b["size"]))
    init[:len(data)] = data
    b["init"] = bytes(init)

  def on_copyout(self, mem, data: bytes):
    self.flush_read()
    idx = self.version_of(mem)
    self.buffers[idx]["used"] = True
    self.pending_read = (idx, data)

  def flush_read(self):
    if self.pending_read is not None:
      self.outputs.append(self.pending_read[0])
      self.pending_read = None

  # ---- kernels and launches
  def on_program(self, prg, obj):
    src, entry = obj.lib.decode(), obj.name
    key = (entry, src)
    if key not in self.kernels:
      name, n = entry, 1
      while name in self.kernel_defs: name, n = f"{entry}__{n}", n + 1
      self.kernels[key] = name
      self.kernel_defs[name] = {"source": src, "entry": entry}
    prg._uvcl_name = self.kernels[key]

  def on_enqueue(self, work_dim, gws, lws):
    self.flush_read()
    prg, bufs, vals = self.current_call
    args = []
    for _, slot, dt, _shape in prg.signature:
      if slot < len(bufs):
        idx = self.version_of(bufs[slot])
        self.buffers[idx]["used"] = True
        self.buffers[idx]["types"].add(cl_type(dt))
        args.append(idx)
      else:
        # tinygrad passes every scalar as c_int{bitsize}; the kernel's parameter has the signature's type
        args.append({cl_type(dt): int(vals[slot - len(bufs)])})
    self.launches.append({"kernel": prg._uvcl_name, "args": args,
                          "global": [int(gws[i]) for i in range(work_dim)],
                          "local": None if lws is None else [int(lws[i]) for i in range(work_dim)]})

  # ---- job
  def job(self, out_dir: str, stem: str) -> tuple[dict, dict]:
    self.flush_read()
    used = sorted({a for l in self.launches for a in l["args"] if isinstance(a, int)} | set(self.outputs))
    names = {v: f"b{i}" for i, v in enumerate(used)}
    # a buffer only copied to / from takes its copy partner's element type
    changed = True
    while changed:
      changed = False
      for l in self.launches:
        if "copy_bytes" not in l: continue
        d, src = (self.buffers[a] for a in l["args"])
        for x, y in ((d, src), (src, d)):
          if not x["types"] and y["types"]: x["types"], changed = set(y["types"]), True
    buffers, files, file_bytes = {}, [], 0
    for v in used:
      b = self.buffers[v]
      t = next(iter(b["types"])) if len(b["types"]) == 1 else "uchar"
      npdt = {vt: nd for vt, nd in DTYPES.values()}[t]
      item = np.dtype(npdt).itemsize
      if b["size"] % item: t, npdt, item = "uchar", np.uint8, 1
      entry = {"type": t, "count": b["size"] // item}
      if b["init"] is not None:
        arr = np.frombuffer(b["init"], dtype=npdt)
        if np.all(arr.view(f"u{item}") == arr.view(f"u{item}")[0]):
          entry["init"] = {"fill": scalar_json(arr[0], t)}
        elif b["size"] <= INLINE_MAX_BYTES:
          entry["init"] = {"data": [scalar_json(x, t) for x in arr]}
        else:
          fname = f"{stem}.{names[v]}.bin"
          with open(os.path.join(out_dir, fname), "wb") as f: f.write(b["init"])
          files.append(fname)
          file_bytes += len(b["init"])
          entry["init"] = {"file": fname}
      buffers[names[v]] = entry
    for l in self.launches:
      if "copy_bytes" in l:   # a CL -> CL copy: a launch of a copy kernel of the buffers' element type
        td, ts = (buffers[names[a]]["type"] for a in l["args"])
        if td != ts:
          raise SystemExit(f"record_tinygrad: a copy from {names[l['args'][1]]} ({ts}) to {names[l['args'][0]]} ({td}): "
                           "uvcl checks pointer element types, so no one kernel can take both")
        item = np.dtype({vt: nd for vt, nd in DTYPES.values()}[td]).itemsize
        l["kernel"], src = copy_kernel(td)
        l["global"] = [l["copy_bytes"] // item]
        self.kernel_defs.setdefault(l["kernel"], {"source": src, "entry": l["kernel"]})
    kernels_used = []
    for l in self.launches:
      if l["kernel"] not in kernels_used: kernels_used.append(l["kernel"])
    launches = []
    for l in self.launches:
      j = {"kernel": l["kernel"], "args": [names[a] if isinstance(a, int) else a for a in l["args"]], "global": l["global"]}
      if l["local"] is not None: j["local"] = l["local"]
      launches.append(j)
    outputs = []
    for v in self.outputs:
      if names[v] not in outputs: outputs.append(names[v])
    # the job format has no comment key (unknown keys are errors): provenance goes to NAME.expected.json
    job = {"buffers": buffers,
           "kernels": {k: self.kernel_defs[k] for k in kernels_used},
           "launches": launches,
           "outputs": outputs}
    stats = {"buffers": len(buffers), "kernels": len(kernels_used), "launches": len(launches),
             "buffer_bytes": sum(self.buffers[v]["size"] for v in used), "cl_mems_allocated": self.allocs,
             "programs_built": len(self.kernels), "files": files, "file_bytes": file_bytes, "d2d_copies": self.d2d,
             "versions_split": self.versions_split, "late_inits": self.late_inits}
    return job, stats


def scalar_json(x, t):
  if t in ("half", "float", "double"):
    f = float(x)
    if f != f: return "nan"
    if f in (float("inf"), float("-inf")): return "inf" if f > 0 else "-inf"
    return f
  return int(x)


REC: Recorder | None = None


def install():
  """Patches tinygrad's OpenCL runtime; call before any CL device is opened."""
  import tinygrad.runtime.ops_cl as ops_cl
  cl = ops_cl.cl
  A, P = ops_cl.CLAllocator, ops_cl.CLProgram

  o_alloc, o_free, o_copyin, o_copyout = A._alloc, A._free, A._copyin, A._copyout
  def _alloc(self, size, options):
    mem = o_alloc(self, size, options)
    if REC: REC.on_alloc(mem, size)
    return mem
  def _free(self, opaque, options):
    if REC: REC.on_free(opaque)
    return o_free(self, opaque, options)
  def _copyin(self, dest, src):
    if REC: REC.on_copyin(dest, bytes(src.cast("B")))
    return o_copyin(self, dest, src)
  def _copyout(self, dest, src):
    r = o_copyout(self, dest, src)    # synchronizes: dest holds the bytes now
    if REC: REC.on_copyout(src, bytes(dest.cast("B")))
    return r
  A._alloc, A._free, A._copyin, A._copyout = _alloc, _free, _copyin, _copyout

  o_init, o_call = P.__init__, P.__call__
  def __init__(self, device, obj):
    o_init(self, device, obj)
    if REC: REC.on_program(self, obj)
  def __call__(self, *bufs, vals=(), **kw):
    if REC: REC.current_call = (self, bufs, vals)
    try: return o_call(self, *bufs, vals=vals, **kw)
    finally:
      if REC: REC.current_call = None
  P.__init__, P.__call__ = __init__, __call__

  o_enqueue = cl.clEnqueueNDRangeKernel
  def clEnqueueNDRangeKernel(queue, kernel, work_dim, offset, gws, lws, *rest):
    if REC and REC.current_call is not None:
      if offset is not None: raise SystemExit("record_tinygrad: a global work offset was enqueued; jobs cannot express it")
      REC.on_enqueue(work_dim, gws, lws)
    return o_enqueue(queue, kernel, work_dim, offset, gws, lws, *rest)
  cl.clEnqueueNDRangeKernel = clEnqueueNDRangeKernel

  # images would be created per launch (IMAGE=1); jobs have only buffers
  o_create_image = cl.clCreateImage
  def clCreateImage(*a, **k): raise SystemExit("record_tinygrad: tinygrad created an image; jobs have only buffers (run without IMAGE)")
  cl.clCreateImage = clCreateImage


# ---------------------------------------------------------------- models

def seeded(rng, *shape, scale=None):
  scale = scale if scale is not None else 1.0 / np.sqrt(shape[-1] if len(shape) > 1 else shape[0])
  return (rng.standard_normal(shape) * scale).astype(np.float32)


def model_mlp(rng):
  """784-128-10 MLP, ReLU, batch 32."""
  from tinygrad import Tensor
  w1, b1 = Tensor(seeded(rng, 128, 784)), Tensor(seeded(rng, 128, scale=0.1))
  w2, b2 = Tensor(seeded(rng, 10, 128)), Tensor(seeded(rng, 10, scale=0.1))
  x = Tensor(rng.random((32, 784), dtype=np.float32))
  params = [w1, b1, w2, b2, x]
  def forward(): return (x.linear(w1.T, b1).relu().linear(w2.T, b2),)
  return params, forward, "MLP 784-128-10 (Linear, ReLU, Linear), batch 32, float32; input x [32, 784]; output logits [32, 10]"


def model_convnet(rng):
  """Two 3x3 convs (1->8->16, ReLU), 2x2 max pool, Linear 16*12*12 -> 10, batch 8."""
  from tinygrad import Tensor
  c1w, c1b = Tensor(seeded(rng, 8, 1, 3, 3, scale=1 / 3)), Tensor(seeded(rng, 8, scale=0.1))
  c2w, c2b = Tensor(seeded(rng, 16, 8, 3, 3, scale=1 / np.sqrt(72))), Tensor(seeded(rng, 16, scale=0.1))
  lw, lb = Tensor(seeded(rng, 10, 16 * 12 * 12)), Tensor(seeded(rng, 10, scale=0.1))
  x = Tensor(rng.random((8, 1, 28, 28), dtype=np.float32))
  params = [c1w, c1b, c2w, c2b, lw, lb, x]
  def forward():
    h = x.conv2d(c1w, c1b).relu()            # [8, 8, 26, 26]
    h = h.conv2d(c2w, c2b).relu()            # [8, 16, 24, 24]
    h = h.max_pool2d(2)                      # [8, 16, 12, 12]
    return (h.flatten(1).linear(lw.T, lb),)  # [8, 10]
  return params, forward, ("convnet: Conv2d 1->8 3x3 + ReLU, Conv2d 8->16 3x3 + ReLU, MaxPool 2x2, Linear 2304->10; "
                           "batch 8, input x [8, 1, 28, 28] float32; output logits [8, 10]")


def model_transformer(rng):
  """One pre-norm transformer block: seq 64, dim 128, 4 heads, FFN 512 (GELU), batch 1."""
  from tinygrad import Tensor
  S, D, H, F = 64, 128, 4, 512
  ln1w, ln1b = Tensor(1 + seeded(rng, D, scale=0.1)), Tensor(seeded(rng, D, scale=0.1))
  wqkv, bqkv = Tensor(seeded(rng, 3 * D, D)), Tensor(seeded(rng, 3 * D, scale=0.1))
  wo, bo = Tensor(seeded(rng, D, D)), Tensor(seeded(rng, D, scale=0.1))
  ln2w, ln2b = Tensor(1 + seeded(rng, D, scale=0.1)), Tensor(seeded(rng, D, scale=0.1))
  w1, b1 = Tensor(seeded(rng, F, D)), Tensor(seeded(rng, F, scale=0.1))
  w2, b2 = Tensor(seeded(rng, D, F)), Tensor(seeded(rng, D, scale=0.1))
  x = Tensor(rng.standard_normal((1, S, D), dtype=np.float32))
  params = [ln1w, ln1b, wqkv, bqkv, wo, bo, ln2w, ln2b, w1, b1, w2, b2, x]
  def forward():
    h = x.layernorm().mul(ln1w).add(ln1b)
    q, k, v = h.linear(wqkv.T, bqkv).reshape(1, S, 3, H, D // H).permute(2, 0, 3, 1, 4)  # each [1, H, S, D/H]
    a = q.scaled_dot_product_attention(k, v, is_causal=True)                             # [1, H, S, D/H]
    x1 = x + a.permute(0, 2, 1, 3).reshape(1, S, D).linear(wo.T, bo)
    h2 = x1.layernorm().mul(ln2w).add(ln2b)
    return (x1 + h2.linear(w1.T, b1).gelu().linear(w2.T, b2),)
  return params, forward, ("transformer block (pre-norm): LayerNorm, causal multi-head attention (4 heads of 32, "
                           "fused QKV Linear 128->384, output Linear 128->128), residual, LayerNorm, "
                           "FFN Linear 128->512 + GELU + Linear 512->128, residual; batch 1, seq 64, dim 128, float32; "
                           "input x [1, 64, 128]; output [1, 64, 128]")


MODELS = {"mlp": model_mlp, "convnet": model_convnet, "transformer": model_transformer}


def record(name: str, out_dir: str, seed: int):
  global REC
  import tinygrad
  from tinygrad import Tensor, Device
  rng = np.random.default_rng(seed)
  REC = Recorder()
  params, forward, desc = MODELS[name](rng)
  Tensor.realize(*params)                   # host -> device copies of weights and input
  outs = forward()
  Tensor.realize(*outs)
  results = [o.numpy() for o in outs]       # device -> host reads: the job's outputs
  Device["CL"].synchronize()
  rec, REC = REC, None
  stem = f"tinygrad-{name}"
  version = getattr(tinygrad, "__version__", None) or _dist_version()
  comment = (f"Recorded from tinygrad {version} on OpenCL ({Device['CL'].device_name}): one forward pass of {desc}. "
             f"Weights: numpy default_rng({seed}), all stored (nothing replaced by fill except buffers whose bytes are all equal). "
             f"Re-record: DEV=CL python3 bench/record_tinygrad.py {name}")
  job, stats = rec.job(out_dir, stem)
  if len(job["outputs"]) != len(results):
    raise SystemExit(f"record_tinygrad: {name}: {len(results)} results but {len(job['outputs'])} buffers read back")
  with open(os.path.join(out_dir, f"{stem}.json"), "w") as f:
    json.dump(job, f, indent=1)
    f.write("\n")
  expected = {"recorded": comment, "tinygrad": version, "stats": stats, "outputs": {}}
  for bname, r in zip(job["outputs"], results):
    expected["outputs"][bname] = {"shape": list(r.shape), "values": [float(v) for v in r.astype(np.float32).ravel()]}
  with open(os.path.join(out_dir, f"{stem}.expected.json"), "w") as f:
    json.dump(expected, f)
    f.write("\n")
  print(f"{stem}: {json.dumps(stats)}")
  return stats


def _dist_version():
  from importlib.metadata import version
  return version("tinygrad")


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("models", nargs="*", help=f"models to record (default: all of {', '.join(MODELS)})")
  ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs"))
  ap.add_argument("--seed", type=int, default=11)
  a = ap.parse_args()
  a.models = a.models or list(MODELS)
  for m in a.models:
    if m not in MODELS: ap.error(f"unknown model {m!r} (known: {', '.join(MODELS)})")
  if os.environ.get("DEV", "CL").split(":")[0] != "CL": raise SystemExit("record_tinygrad: run with DEV=CL")
  os.environ["DEV"] = os.environ.get("DEV", "CL")
  os.makedirs(a.out, exist_ok=True)
  if len(a.models) > 1:
    # one process per model: tinygrad caches compiled programs and cl_mems across forward passes
    import subprocess
    for m in a.models:
      subprocess.run([sys.executable, os.path.abspath(__file__), m, "--out", a.out, "--seed", str(a.seed)], check=True)
    return
  install()
  record(a.models[0], a.out, a.seed)


if __name__ == "__main__":
  main()
