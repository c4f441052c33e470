// uvcl_bench — uvcl side by side with the bare OpenCL API, in one process,
// on one device.
//
//   uvcl_bench [--json OUT] [--quick] [--smoke] [--figure N[,N...]]...
//              [--device N] [--device2 N] [--list-devices]
//              [--launches N] [--growth-launches N] [--idle-seconds S]
//              [--spin-iters N] [--engine-queues N] [--engine-spin-us N] [--engine-events auto|all|awaited]
//              [--engine-loop-budget-us N] [--engine-read-burst-us N] [--engine-window N] [--engine-compile process|inline]
//              [--engine-completion auto|callback|poll] [--engine-cross-copy-chunk-mib N] [--engine-cross-copy-ring N]
//              [--cl-library PATH]   (e.g. libuvcl_cl_timing.so: figures report time per driver call)
//              [--job JOB.json]... [--job-passes N]
//
// Figures (docs/BENCHMARKS.md explains each and states its target):
//   1 submission cost per launch      6 frees in flight
//   2 concurrency (queues 1..16)      7 compile, cold and warm
//   3 completion latency              8 scale: live buffers, memory, growth
//   4 loop lag under load             9 idle cost
//   5 transfers                       10 loop stall during a compile
//   5x cross-device copy (needs two devices; part of the default set only
//      when the machine has a second device)
//   11 real workloads: each --job's launches replayed (fig_job.cpp)
//   12 DAG makespan: task graphs against one queue, a hand schedule and the
//      lower bound (fig_dag.cpp)
//
// The bare side opens the same OpenCL library through uvcl's dispatch table
// (cl::Library) and enumerates devices the same way, so --device N names the
// same device for both. Each figure is measured whole-process (wall clock,
// getrusage, /proc/self/statm); the JSON is rewritten after every figure so
// a run cut short keeps what it measured.
#include <dlfcn.h>
#include <malloc.h>
#include <sys/utsname.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <uv.h>

#include "bench_cl.hpp"
#include "bench_figure.hpp"
#include "bench_loop.hpp"
#include "bench_util.hpp"
#include "cl/api.hpp"
#include "cl/devices.hpp"
#include "uvcl/engine.hpp"

#ifndef UVCL_BENCH_VERSION
#define UVCL_BENCH_VERSION "unknown"
#endif

namespace bench {
namespace {

using uvcl::Buffer;
using uvcl::Engine;
using uvcl::Kernel;
using uvcl::KernelArg;
using uvcl::Launch;
using uvcl::Program;
using uvcl::Result;

// --- kernels ---------------------------------------------------------------

constexpr const char* kKernels = R"CL(
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
)CL";

// A program of realistic size for the compile figures: the kernels above
// plus a tiled matrix multiply, a softmax and a reduction.
constexpr const char* kCompileExtra = R"CL(
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
)CL";

std::string compile_source() { return std::string(kKernels) + kCompileExtra; }

// A source no driver or cache has seen: a program-scope constant with a
// fresh number. Not a comment: PoCL's kernel cache hashes the preprocessed
// source, so a comment nonce was a hit in its cache (measured: the same
// 3000-iteration source with two comment nonces built in 1.20 s, then
// 0.05 s).
std::string unique_source() {
  static std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(uv_hrtime())};
  return "__constant ulong uvcl_bench_nonce = " + std::to_string(rng()) + "UL;\n" + compile_source();
}

// --- context ------------------------------------------------------------------





std::vector<Buffer> zeroed_buffers(Engine& e, std::size_t dev, std::size_t n, std::size_t bytes) {
  std::vector<Buffer> out;
  out.reserve(n);
  const float z = 0;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(must(e.allocate(dev, bytes), "allocate"));
    must(e.fill(out.back(), std::as_bytes(std::span(&z, 1)), 0, bytes), "fill");
  }
  must(e.finish(), "finish");
  return out;
}

// --- figures: the table rows -------------------------------------------------




void print_figure(const Json& fig) {
  const Json* rows = fig.find("rows");
  if (!rows) return;
  const Json* id = fig.find("id");
  for (const Json& r : rows->items()) {
    std::ostringstream line;
    line << "  [" << (id ? id->str() : "?") << "] " << r.find("key")->str() << ":";
    for (const auto& [k, v] : r.members()) {
      if (v.type() != Json::Type::Number) continue;
      line << " " << k << "=" << v.number();
    }
    line << " " << r.find("unit")->str();
    const Json* u = r.find("uvcl");
    const Json* b = r.find("bare");
    if (u && b && b->number() != 0) line << "  (uvcl/bare " << u->number() / b->number() << ")";
    std::cout << line.str() << "\n";
  }
  std::cout.flush();
}

// --- calibration -----------------------------------------------------------------

std::size_t spin_group(const Ctx& c) { return std::min<std::size_t>(64, c.dev().info.max_work_group_size); }

// Iterations of `spin` for a ~100 us one-work-group kernel on this device.
int spin_iters(Ctx& c) {
  if (c.opt.spin_iters > 0) c.spin_iters = c.opt.spin_iters;
  if (c.spin_iters > 0) return c.spin_iters;
  Bare b(*c.api, c.dev(), 1);
  cl_program p = b.build(kKernels);
  cl_kernel k = b.kernel(p, "spin");
  cl_mem m = b.buffer(64 * sizeof(float));
  b.zero(m, 64 * sizeof(float));
  const std::size_t wg = spin_group(c);
  int iters = 2000;
  auto run = [&](int n, int count) {
    b.arg(k, 0, m);
    b.arg(k, 1, n);
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < count; ++i)
      ck(b.api.clEnqueueNDRangeKernel(b.q(), k, 1, nullptr, &wg, &wg, 0, nullptr, nullptr), "enqueue spin");
    b.finish();
    return us_since(t0) / count;
  };
  run(iters, 2);  // the first launch includes a JIT step
  double per = 0;
  for (int round = 0; round < 6; ++round) {
    per = run(iters, 16);
    if (per > 85 && per < 120) break;
    const double scaled = static_cast<double>(iters) * 100.0 / std::max(per, 1.0);
    iters = static_cast<int>(std::clamp(scaled, 1.0, 5e7));
  }
  c.spin_iters = iters;
  c.spin_us = per;
  return iters;
}

// =====================================================================
// Figure 1: submission cost per launch
// =====================================================================

struct Costs {
  std::vector<double> submit, submit_cpu, total, cpu;  // us per launch
  void add(double submit_us, double submit_cpu_us, double total_us, double cpu_us, std::uint64_t n) {
    const double k = static_cast<double>(n);
    submit.push_back(submit_us / k);
    submit_cpu.push_back(submit_cpu_us / k);
    total.push_back(total_us / k);
    cpu.push_back(cpu_us / k);
  }
};

// Figure 1's uvcl side: an engine with its kernels and buffers, kept for all
// rounds so that the ways can take turns.
class Fig1Uvcl {
 public:
  Fig1Uvcl(const Ctx& c, unsigned queues, std::size_t nbuf) : e_(make_engine(c, queues)) {
    const std::size_t d = c.local;
    Program p = must(e_->compile_sync(d, kKernels), "compile");
    tiny_ = must(e_->kernel(p, "tiny"), "kernel tiny");
    add_ = must(e_->kernel(p, "tiny_add"), "kernel tiny_add");
    chain_ = zeroed_buffers(*e_, d, 1, 256)[0];
    many_ = zeroed_buffers(*e_, d, nbuf, 256);
  }
  Engine& engine() { return *e_; }
  // Variant v ((a), (b), (c)), `count` launches, then finish(); the status
  // reads made while submitting go to queries_submitting().
  void run(int v, std::uint64_t count, Costs* out) {
    Launch l;
    l.global = {1};
    if (v == 2) {
      l.kernel = add_;
      l.args = {KernelArg::of(chain_), KernelArg::value(0.0f)};
    } else {
      l.kernel = tiny_;
      l.args = {KernelArg::of(chain_)};
    }
    const std::uint64_t q0 = e_->stats().status_queries;
    const double cpu0 = cpu_seconds(RUSAGE_THREAD);
    const std::uint64_t t0 = now_ns();
    for (std::uint64_t i = 0; i < count; ++i) {
      if (v == 1) l.args[0].buffer = many_[i % many_.size()];
      else if (v == 2) l.args[1].scalar = uvcl::Scalar::of(static_cast<float>(i & 1023));
      if (auto r = e_->launch(l); !r) fail("launch: " + r.error().to_string());
    }
    const double submit = us_since(t0);
    const double submit_cpu = (cpu_seconds(RUSAGE_THREAD) - cpu0) * 1e6;
    queries_submitting_ = e_->stats().status_queries - q0;
    must(e_->finish(), "finish");
    const double total = us_since(t0);
    const double cpu = (cpu_seconds(RUSAGE_THREAD) - cpu0) * 1e6;
    if (out) out->add(submit, submit_cpu, total, cpu, count);
  }
  std::uint64_t queries_submitting() const { return queries_submitting_; }

 private:
  std::unique_ptr<Engine> e_;
  Kernel tiny_{}, add_{};
  Buffer chain_{};
  std::vector<Buffer> many_;
  std::uint64_t queries_submitting_ = 0;
};

// Figure 1's bare side, in a context with `spread` queues (it uses queue 0
// but in mode 4).
class Fig1Bare {
 public:
  Fig1Bare(const Ctx& c, unsigned spread, std::size_t nbuf) : b_(*c.api, c.dev(), spread), spread_(spread) {
    cl_program p = b_.build(kKernels);
    tiny_ = b_.kernel(p, "tiny");
    add_ = b_.kernel(p, "tiny_add");
    chain_ = b_.buffer(256);
    b_.zero(chain_, 256);
    for (std::size_t i = 0; i < nbuf; ++i) {
      many_.push_back(b_.buffer(256));
      b_.zero(many_.back(), 256);
    }
  }
  // mode 0: event released at once; 1: no event; 2: events kept until
  // the queue is finished (what a tracker holding them costs the driver);
  // 3: as 0, plus a clFlush every 100 launches (what uvcl's window does);
  // 4: as 1, launch i on queue i mod `spread` (what changing queue costs;
  // for independent launches only: (b)).
  void run(int v, int mode, std::uint64_t count, Costs* out) {
    const uvcl::cl::Api& api = b_.api;
    const std::size_t g = 1;
    const bool with_event = mode != 1 && mode != 4;
    kept_.reserve(mode == 2 ? count : 0);
    const double cpu0 = cpu_seconds(RUSAGE_THREAD);
    const std::uint64_t t0 = now_ns();
    for (std::uint64_t i = 0; i < count; ++i) {
      cl_mem m = v == 1 ? many_[i % many_.size()] : chain_;
      cl_kernel k = v == 2 ? add_ : tiny_;
      api.clSetKernelArg(k, 0, sizeof m, &m);
      if (v == 2) {
        const float a = static_cast<float>(i & 1023);
        api.clSetKernelArg(k, 1, sizeof a, &a);
      }
      cl_event ev = nullptr;
      cl_command_queue q = b_.q(mode == 4 ? i % spread_ : 0);
      const cl_int rc =
          api.clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, with_event ? &ev : nullptr);
      if (rc != CL_SUCCESS) ck(rc, "clEnqueueNDRangeKernel");
      if (mode == 2) kept_.push_back(ev);
      else if (ev) api.clReleaseEvent(ev);
      if (mode == 3 && i % 100 == 99) api.clFlush(q);
    }
    const double submit = us_since(t0);
    const double submit_cpu = (cpu_seconds(RUSAGE_THREAD) - cpu0) * 1e6;
    b_.finish();
    for (cl_event ev : kept_) api.clReleaseEvent(ev);
    kept_.clear();
    const double total = us_since(t0);
    const double cpu = (cpu_seconds(RUSAGE_THREAD) - cpu0) * 1e6;
    if (out) out->add(submit, submit_cpu, total, cpu, count);
  }
  // What one status read costs the driver: on an event still queued
  // (behind a backlog) and on a completed one, in ns.
  std::pair<double, double> status_read_ns() {
    const uvcl::cl::Api& api = b_.api;
    const std::size_t g = 1;
    cl_command_queue q = b_.q();
    cl_event first = nullptr, last = nullptr;
    api.clSetKernelArg(tiny_, 0, sizeof chain_, &chain_);
    ck(api.clEnqueueNDRangeKernel(q, tiny_, 1, nullptr, &g, nullptr, 0, nullptr, &first), "clEnqueueNDRangeKernel");
    for (int i = 0; i < 2000; ++i)
      ck(api.clEnqueueNDRangeKernel(q, tiny_, 1, nullptr, &g, nullptr, 0, nullptr, nullptr), "clEnqueueNDRangeKernel");
    ck(api.clEnqueueNDRangeKernel(q, tiny_, 1, nullptr, &g, nullptr, 0, nullptr, &last), "clEnqueueNDRangeKernel");
    auto query_ns = [&](cl_event ev) {
      constexpr int kQueries = 2000;
      cl_int st = CL_QUEUED;
      const std::uint64_t t0 = now_ns();
      for (int i = 0; i < kQueries; ++i) api.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, nullptr);
      return static_cast<double>(now_ns() - t0) / kQueries;
    };
    const double pending = query_ns(last);
    b_.finish();
    const double complete = query_ns(first);
    api.clReleaseEvent(first);
    api.clReleaseEvent(last);
    return {pending, complete};
  }

 private:
  Bare b_;
  unsigned spread_;
  cl_kernel tiny_ = nullptr, add_ = nullptr;
  cl_mem chain_ = nullptr;
  std::vector<cl_mem> many_;
  std::vector<cl_event> kept_;
};

Json fig1(Ctx& c) {
  const std::uint64_t n = c.opt.launches ? c.opt.launches : c.pick<std::uint64_t>(100000, 20000, 1000);
  const int reps = c.pick(3, 2, 1);
  const std::size_t nbuf = c.pick<std::size_t>(1024, 1024, 64);
  Json fig = make_figure("1", "Submission cost per launch");
  fig["params"]["launches"] = n;
  fig["params"]["reps"] = reps;
  fig["params"]["buffers"] = nbuf;
  column(fig, "uvcl", "uvcl (default queues: " + std::to_string(default_queues(c)) + ")");
  column(fig, "uvcl_1q", "uvcl, 1 queue");
  column(fig, "bare", "bare, with event");
  column(fig, "bare_noevent", "bare, no event");
  column(fig, "bare_keep", "bare, events held until finished");
  column(fig, "bare_flush", "bare, with event, clFlush every 100 launches");
  column(fig, "bare_rr_noevent", "bare, no event, launch i on queue i mod uvcl's default queue count ((b) only)");
  column(fig, "bare_noevent_wide", "bare, no event, on one queue of a context with uvcl's default queue count");
  column(fig, "pyopencl", "pyopencl");
  const char* names[3] = {"a", "b", "c"};
  // u1: uvcl with one queue (what spreading over queues costs the host);
  // ub and the bare b columns: bursts.
  Costs u[3], u1[3], be[3], bn[3], bk[3], bf[3], brr[3], bw[3], ub[3], beb[3], bnb[3], bfb[3];
  // uvcl's clGetEventInfo status reads per launch: while submitting, and
  // in all (completion polling included).
  double submit_queries[3] = {0, 0, 0}, all_queries[3] = {0, 0, 0};
  const std::uint64_t burst = std::min<std::uint64_t>(n, 1000);
  const int bursts = c.pick(20, 10, 2);
  fig["params"]["burst"] = burst;
  fig["params"]["bursts"] = bursts;
  const unsigned spread = default_queues(c);
  Fig1Uvcl uv(c, 0, nbuf);  // 0: the default queue count
  Fig1Uvcl uv1(c, 1, nbuf);
  Fig1Bare bare(c, 1, nbuf);
  Fig1Bare wide(c, spread, nbuf);  // does a context's queue count cost each launch?
  // Warm-up; it also counts how often consecutive launches change queue.
  for (int v = 0; v < 3; ++v) {
    std::uint64_t switches = 0, launches = 0;
    std::optional<std::uint32_t> last;
    uv.engine().set_schedule_recorder([&](const uvcl::ScheduleEntry& s) {
      if (last && *last != s.queue) ++switches;
      last = s.queue;
      ++launches;
    });
    uv.run(v, std::min<std::uint64_t>(n, 2000), nullptr);
    uv.engine().set_schedule_recorder({});
    if (launches)
      fig["uvcl_queue_switches_per_launch"][names[v]] = static_cast<double>(switches) / static_cast<double>(launches);
    uv1.run(v, std::min<std::uint64_t>(n, 2000), nullptr);
    bare.run(v, 0, std::min<std::uint64_t>(n, 2000), nullptr);
    wide.run(v, 1, std::min<std::uint64_t>(n, 2000), nullptr);
  }
  const auto [pending_ns, complete_ns] = bare.status_read_ns();
  fig["params"]["bare_status_query_ns_pending"] = pending_ns;
  fig["params"]["bare_status_query_ns_complete"] = complete_ns;
  // The ways take turns, rep by rep: the host's speed drifts within a run.
  for (int r = 0; r < reps; ++r)
    for (int v = 0; v < 3; ++v) {
      const std::uint64_t q0 = uv.engine().stats().status_queries;
      uv.run(v, n, &u[v]);
      const double runs = static_cast<double>(n) * reps;
      all_queries[v] += static_cast<double>(uv.engine().stats().status_queries - q0) / runs;
      submit_queries[v] += static_cast<double>(uv.queries_submitting()) / runs;
      uv1.run(v, n, &u1[v]);
      bare.run(v, 0, n, &be[v]);
      bare.run(v, 1, n, &bn[v]);
      bare.run(v, 2, n, &bk[v]);
      bare.run(v, 3, n, &bf[v]);
      wide.run(v, 1, n, &bw[v]);
      if (v == 1) wide.run(v, 4, n, &brr[v]);
    }
  // Short bursts (finished in between): the host cost when the driver's
  // queue is not backed up (a long burst on a GPU runs at the device's pace).
  for (int b = 0; b < bursts; ++b)
    for (int v = 0; v < 3; ++v) {
      uv.run(v, burst, &ub[v]);
      bare.run(v, 0, burst, &beb[v]);
      bare.run(v, 1, burst, &bnb[v]);
      bare.run(v, 3, burst, &bfb[v]);
    }
  if (c.cl_timing)  // the driver's share, in passes of their own
    for (int v = 0; v < 3; ++v) {
      driver_time(c, 1);
      for (int b = 0; b < bursts; ++b) uv.run(v, burst, nullptr);
      fig["driver"][std::string("uvcl_burst_") + names[v]] = driver_time(c, static_cast<double>(burst * bursts));
      for (int mode : {0, 1}) {
        driver_time(c, 1);
        for (int b = 0; b < bursts; ++b) bare.run(v, mode, burst, nullptr);
        fig["driver"][std::string(mode == 0 ? "bare_burst_" : "bare_noevent_burst_") + names[v]] =
            driver_time(c, static_cast<double>(burst * bursts));
      }
    }
  {
    const uvcl::EngineStats s = uv.engine().stats();
    fig["uvcl_stats"]["cross_queue_waits"] = s.cross_queue_waits;
    fig["uvcl_stats"]["flushes"] = s.flushes;
    fig["uvcl_stats"]["submitted"] = s.submitted;
    fig["uvcl_stats"]["status_queries"] = s.status_queries;
    fig["uvcl_stats"]["events"] = s.events;  // own events and fences (opencl.command_events)
    fig["uvcl_stats"]["fences"] = s.fences;
  }
  const char* what[3] = {"(a) one dependent chain", "(b) independent, over many buffers",
                         "(c) a scalar argument changing every launch"};
  for (int v = 0; v < 3; ++v) {
    const std::string k = std::string("1") + names[v];
    struct Metric {
      const char* suffix;
      const char* what;
      std::vector<double> Costs::*field;
    };
    const Metric metrics[] = {
        {".submit", ": host time per launch (submit loop, wall)", &Costs::submit},
        {".submit_cpu", ": submitting-thread CPU per launch (submit loop)", &Costs::submit_cpu},
        {".total", ": wall time per launch until all complete", &Costs::total},
        {".cpu", ": submitting-thread CPU per launch, including completion handling", &Costs::cpu},
    };
    for (const Metric& m : metrics) {
      Json& row = add_row(fig, k + m.suffix, std::string(what[v]) + m.what, "us", false);
      row["uvcl"] = median(u[v].*m.field);
      row["uvcl_1q"] = median(u1[v].*m.field);
      row["bare"] = median(be[v].*m.field);
      row["bare_noevent"] = median(bn[v].*m.field);
      row["bare_keep"] = median(bk[v].*m.field);
      row["bare_flush"] = median(bf[v].*m.field);
      if (v == 1) row["bare_rr_noevent"] = median(brr[v].*m.field);
      row["bare_noevent_wide"] = median(bw[v].*m.field);
    }
    Json& br = add_row(fig, k + ".burst", std::string(what[v]) + ": host time per launch in bursts of " +
                                             std::to_string(burst) + " (submit loop, wall)", "us", false);
    br["uvcl"] = median(ub[v].submit);
    br["bare"] = median(beb[v].submit);
    br["bare_noevent"] = median(bnb[v].submit);
    br["bare_flush"] = median(bfb[v].submit);
    Json& brc = add_row(fig, k + ".burst_cpu", std::string(what[v]) + ": submitting-thread CPU per launch in bursts of " +
                                                 std::to_string(burst), "us", false);
    brc["uvcl"] = median(ub[v].submit_cpu);
    brc["bare"] = median(beb[v].submit_cpu);
    brc["bare_noevent"] = median(bnb[v].submit_cpu);
    brc["bare_flush"] = median(bfb[v].submit_cpu);
    Json& qs = add_row(fig, k + ".queries_submit",
                       std::string(what[v]) + ": uvcl's clGetEventInfo status reads per launch while submitting", "1",
                       false);
    qs["uvcl"] = submit_queries[v];
    Json& qa = add_row(fig, k + ".queries",
                       std::string(what[v]) + ": uvcl's clGetEventInfo status reads per launch, completion included",
                       "1", false);
    qa["uvcl"] = all_queries[v];
    Json raw = Json::object();
    raw["uvcl_submit"] = Json::array_of(u[v].submit);
    raw["bare_submit"] = Json::array_of(be[v].submit);
    raw["bare_noevent_submit"] = Json::array_of(bn[v].submit);
    fig["samples"][names[v]] = std::move(raw);
  }
  return fig;
}

// =====================================================================
// Figure 2: concurrency
// =====================================================================

// Figure 2's bare side: a context with 16 queues, the spin kernel and one
// buffer per chain. Chain i goes on queue i % nq, issued round by round;
// every queue is flushed once per round (as uvcl flushes once per window).
class Fig2Bare {
 public:
  // What events cost this driver's concurrency: one per launch, or one
  // marker per queue per round (uvcl's fences), with or without a
  // completion callback on it (how uvcl hears of completion). And what
  // asking whether a marker has completed costs (uvcl's queue choice reads
  // the status of a running queue's last event). And what holding a marker
  // until its work is done costs (uvcl keeps its fences until the
  // completion walk has seen them).
  enum class Events { None, PerLaunch, MarkerPerRound, MarkerWithCallback, MarkerStatusRead, MarkerHeld };

  Fig2Bare(const Ctx& c, std::size_t chains, std::size_t length, std::size_t wg, int iters)
      : b_(*c.api, c.dev(), 16), length_(length), wg_(wg), iters_(iters) {
    cl_program p = b_.build(kKernels);
    k_ = b_.kernel(p, "spin");
    for (std::size_t i = 0; i < chains; ++i) {
      bufs_.push_back(b_.buffer(wg * sizeof(float)));
      b_.zero(bufs_.back(), wg * sizeof(float));
    }
  }
  // One repetition on nq queues: its wall time in ms; `submit_ms`, if
  // given, gets the launch calls' share.
  double run(unsigned nq, Events events = Events::None, double* submit_ms = nullptr) {
    const uvcl::cl::Api& api = b_.api;
    std::vector<cl_event> last(nq, nullptr), held;
    const std::uint64_t t0 = now_ns();
    for (std::size_t j = 0; j < length_; ++j) {
      for (std::size_t ch = 0; ch < bufs_.size(); ++ch) {
        b_.arg(k_, 0, bufs_[ch]);
        b_.arg(k_, 1, iters_);
        cl_event ev = nullptr;
        ck(api.clEnqueueNDRangeKernel(b_.q(ch % nq), k_, 1, nullptr, &wg_, &wg_, 0, nullptr,
                                      events == Events::PerLaunch ? &ev : nullptr),
           "enqueue");
        if (ev) api.clReleaseEvent(ev);
      }
      for (unsigned q = 0; q < nq; ++q) {
        if (events == Events::MarkerStatusRead && last[q]) {
          cl_int st = CL_QUEUED;
          ck(api.clGetEventInfo(last[q], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, nullptr), "status");
          api.clReleaseEvent(last[q]);
          last[q] = nullptr;
        }
        if (events != Events::None && events != Events::PerLaunch) {
          cl_event m = nullptr;
          ck(api.clEnqueueMarkerWithWaitList(b_.q(q), 0, nullptr, &m), "marker");
          if (events == Events::MarkerWithCallback)
            ck(api.clSetEventCallback(m, CL_COMPLETE, [](cl_event, cl_int, void*) {}, nullptr), "callback");
          if (events == Events::MarkerStatusRead) last[q] = m;
          else if (events == Events::MarkerHeld) held.push_back(m);
          else api.clReleaseEvent(m);
        }
        api.clFlush(b_.q(q));
      }
    }
    if (submit_ms) *submit_ms = us_since(t0) / 1e3;
    for (unsigned q = 0; q < nq; ++q) ck(api.clFinish(b_.q(q)), "clFinish");
    const double ms = us_since(t0) / 1e3;
    for (cl_event m : last)
      if (m) api.clReleaseEvent(m);
    for (cl_event m : held) api.clReleaseEvent(m);
    return ms;
  }

 private:
  Bare b_;
  std::size_t length_, wg_;
  int iters_;
  cl_kernel k_ = nullptr;
  std::vector<cl_mem> bufs_;
};

// Figure 2's uvcl side: an engine with nq queues (and a window of `window`
// commands, if given), the spin kernel and one buffer per chain.
class Fig2Uvcl {
 public:
  Fig2Uvcl(const Ctx& c, unsigned nq, std::optional<unsigned> window, std::size_t chains, std::size_t length,
           std::size_t wg, int iters)
      : e_(make_engine(c, nq, {}, std::nullopt, std::nullopt,
                       [&](uvcl::Config& cfg) {
                         if (window) cfg.window = *window;
                       })),
        length_(length) {
    const std::size_t d = c.local;
    Program p = must(e_->compile_sync(d, kKernels), "compile");
    l_.kernel = must(e_->kernel(p, "spin"), "kernel spin");
    bufs_ = zeroed_buffers(*e_, d, chains, wg * sizeof(float));
    l_.args = {KernelArg::of(bufs_[0]), KernelArg::value(iters)};
    l_.global = {wg};
    l_.local = {wg};
    for (Buffer b : bufs_) {  // warm-up
      l_.args[0].buffer = b;
      must(e_->launch(l_), "launch");
    }
    must(e_->finish(), "finish");
  }
  Engine& engine() { return *e_; }
  // One repetition: its wall time in ms; the launch calls' share goes to
  // submit_ms(), the rest (finish() after the last launch returned: the
  // last window's kernels and the retiring of what the loop never ran to
  // see) to tail_ms().
  double run() {
    const std::uint64_t t0 = now_ns();
    for (std::size_t j = 0; j < length_; ++j)
      for (Buffer b : bufs_) {
        l_.args[0].buffer = b;
        if (auto r = e_->launch(l_); !r) fail("launch: " + r.error().to_string());
      }
    submit_ms_.push_back(us_since(t0) / 1e3);
    must(e_->finish(), "finish");
    const double ms = us_since(t0) / 1e3;
    tail_ms_.push_back(ms - submit_ms_.back());
    return ms;
  }
  const std::vector<double>& submit_ms() const { return submit_ms_; }
  const std::vector<double>& tail_ms() const { return tail_ms_; }

 private:
  std::unique_ptr<Engine> e_;
  std::size_t length_;
  Launch l_;
  std::vector<Buffer> bufs_;
  std::vector<double> submit_ms_, tail_ms_;
};

Json fig2(Ctx& c) {
  const int iters = spin_iters(c);
  const std::size_t chains = 64;
  const std::size_t length = c.pick<std::size_t>(32, 8, 2);
  const int reps = c.pick(3, 2, 1);
  const std::size_t wg = spin_group(c);
  Json fig = make_figure("2", "Concurrency: 64 independent chains of one-work-group kernels");
  fig["params"]["chains"] = chains;
  fig["params"]["chain_length"] = length;
  fig["params"]["work_group"] = wg;
  fig["params"]["spin_iters"] = iters;
  fig["params"]["kernel_us_one_queue"] = c.spin_us;
  fig["params"]["reps"] = reps;
  column(fig, "uvcl", "uvcl (default queues: " + std::to_string(default_queues(c)) + ")");
  column(fig, "uvcl16", "uvcl (16 queues)");
  column(fig, "bare", "bare, 16 queues");
  column(fig, "bare_events", "bare, 16 queues, an event per launch");
  column(fig, "bare_markers", "bare, 16 queues, a marker per queue per round");
  column(fig, "bare_callbacks", "bare, 16 queues, a marker with a callback per queue per round");
  column(fig, "bare_status", "bare, 16 queues, a marker per queue per round, the previous round's marker status read");
  column(fig, "bare_held", "bare, 16 queues, a marker per queue per round, each released after the repetition");
  column(fig, "bare1", "bare, 1 queue");
  column(fig, "pyopencl", "pyopencl, 16 queues");
  column(fig, "pyopencl1", "pyopencl, 1 queue");

  using Events = Fig2Bare::Events;
  std::vector<unsigned> bare_queues = {1, 2, 4, 8, 16};
  Json bare_curve = Json::array();
  double bare1_ms = 0, bare_best = 0, bare16_ms = 0, bare16_events_ms = 0, bare16_markers_ms = 0,
         bare16_callbacks_ms = 0, bare16_status_ms = 0, bare16_held_ms = 0;
  // Each variant has a context of its own: on NVIDIA's driver, a context in
  // which a completion callback has been registered stays slower per launch
  // for the rest of its life (bench/notes.md, figure 2).
  std::vector<double> bare16_submit;
  for (Events variant : {Events::None, Events::PerLaunch, Events::MarkerPerRound, Events::MarkerWithCallback,
                         Events::MarkerStatusRead, Events::MarkerHeld}) {
    Fig2Bare b(c, chains, length, wg, iters);
    auto best_of = [&](Events ev, const char* column) {
      std::vector<double> t;
      driver_time(c, 1);
      for (int r = 0; r < reps; ++r) t.push_back(b.run(16, ev));
      fig["driver"][std::string(column) + "16"] = driver_time(c, static_cast<double>(reps * length * chains));
      return min_of(t);
    };
    b.run(16);  // warm-up
    switch (variant) {
      case Events::None:
        for (unsigned nq : bare_queues) {
          std::vector<double> t;
          if (nq == 16) driver_time(c, 1);
          for (int r = 0; r < reps; ++r) {
            double submit = 0;
            t.push_back(b.run(nq, Events::None, &submit));
            if (nq == 16) bare16_submit.push_back(submit);
          }
          if (nq == 16) fig["driver"]["bare16"] = driver_time(c, static_cast<double>(reps * length * chains));
          const double ms = min_of(t);
          if (nq == 1) bare1_ms = ms;
          if (nq == 16) bare16_ms = ms;
          Json pt = Json::object();
          pt["queues"] = nq;
          pt["ms"] = ms;
          pt["speedup"] = bare1_ms / ms;
          bare_curve.push(std::move(pt));
          if (nq > 1) bare_best = std::max(bare_best, bare1_ms / ms);
        }
        fig["bare16_submit_ms"] = min_of(bare16_submit);
        break;
      case Events::PerLaunch: bare16_events_ms = best_of(variant, "bare_events"); break;
      case Events::MarkerPerRound: bare16_markers_ms = best_of(variant, "bare_markers"); break;
      case Events::MarkerWithCallback:
        bare16_callbacks_ms = best_of(variant, "bare_callbacks");
        // Diagnosis: the plain launches again, in the context that has had callbacks.
        if (c.cl_timing) fig["diag"]["bare16_after_callbacks_ms"] = best_of(Events::None, "diag_after_callbacks");
        break;
      case Events::MarkerStatusRead: bare16_status_ms = best_of(variant, "bare_status"); break;
      case Events::MarkerHeld:
        bare16_held_ms = best_of(variant, "bare_held");
        if (c.cl_timing) fig["diag"]["bare16_last_context_ms"] = best_of(Events::None, "diag_last_context");
        break;
    }
  }

  std::vector<unsigned> curve;
  if (c.opt.smoke) curve = {1, 8, 16};
  else
    for (unsigned q = 1; q <= 16; ++q) curve.push_back(q);
  Json uvcl_curve = Json::array();
  double udefault_ms = 0, u16_ms = 0, u1_ms = 0, ubest = 0;
  unsigned ubest_q = 0;
  // One engine: the best of `reps` runs, with its counters.
  auto measure = [&](unsigned nq, std::optional<unsigned> window) {
    Fig2Uvcl u(c, nq, window, chains, length, wg, iters);
    Engine& e = u.engine();
    std::vector<std::uint32_t> per_queue(nq + 2, 0);
    const std::uint64_t waits0 = e.stats().cross_queue_waits, fences0 = e.stats().fences,
                        reads0 = e.stats().status_queries;
    std::vector<double> t;
    driver_time(c, 1);
    for (int r = 0; r < reps; ++r) {
      if (r == 0)
        e.set_schedule_recorder([&](const uvcl::ScheduleEntry& s) {
          if (s.queue < per_queue.size()) ++per_queue[s.queue];
        });
      t.push_back(u.run());
      e.set_schedule_recorder({});
    }
    if (!window && (nq == 8 || nq == 16))
      fig["driver"]["uvcl" + std::to_string(nq)] = driver_time(c, static_cast<double>(reps * length * chains));
    const double ms = min_of(t);
    Json pt = Json::object();
    pt["queues"] = nq;
    if (window) pt["window"] = *window;
    pt["ms"] = ms;
    pt["speedup"] = bare1_ms / ms;
    pt["cross_queue_waits_per_rep"] =
        static_cast<double>(e.stats().cross_queue_waits - waits0) / static_cast<double>(reps);
    pt["submit_ms"] = min_of(u.submit_ms());
    pt["tail_ms"] = min_of(u.tail_ms());
    pt["fences_per_rep"] = static_cast<double>(e.stats().fences - fences0) / static_cast<double>(reps);
    pt["status_reads_per_rep"] = static_cast<double>(e.stats().status_queries - reads0) / static_cast<double>(reps);
    Json used = Json::array();
    for (unsigned q = 0; q < nq; ++q) used.push(per_queue[q]);
    pt["launches_per_queue_first_rep"] = std::move(used);
    return pt;
  };
  for (unsigned nq : curve) {
    Json pt = measure(nq, std::nullopt);
    const double ms = pt["ms"].number();
    if (nq == 1) u1_ms = ms;
    if (nq == default_queues(c)) udefault_ms = ms;
    if (nq == 16) u16_ms = ms;
    if (bare1_ms / ms > ubest) {
      ubest = bare1_ms / ms;
      ubest_q = nq;
    }
    uvcl_curve.push(std::move(pt));
  }
  // The window against the tail: 16 queues with windows smaller and larger
  // than the default (a flush and a fence per queue per window).
  Json windows = Json::array();
  for (unsigned w : {32u, 64u, 200u}) windows.push(measure(16, w));
  fig["uvcl16_windows"] = std::move(windows);
  fig["uvcl_curve"] = std::move(uvcl_curve);
  fig["bare_curve"] = std::move(bare_curve);
  Json& t = add_row(fig, "2.time", "64 chains x " + std::to_string(length) + " kernels: wall time", "ms", false);
  t["uvcl"] = udefault_ms;
  t["uvcl16"] = u16_ms;
  t["bare"] = bare16_ms;
  t["bare_events"] = bare16_events_ms;
  t["bare_markers"] = bare16_markers_ms;
  t["bare_callbacks"] = bare16_callbacks_ms;
  t["bare_status"] = bare16_status_ms;
  t["bare_held"] = bare16_held_ms;
  t["bare1"] = bare1_ms;
  Json& s = add_row(fig, "2.speedup", "speedup over bare with 1 queue", "x", true);
  s["uvcl"] = bare1_ms / udefault_ms;
  s["uvcl16"] = bare1_ms / u16_ms;
  s["bare"] = bare1_ms / bare16_ms;
  s["bare_events"] = bare1_ms / bare16_events_ms;
  s["bare_markers"] = bare1_ms / bare16_markers_ms;
  s["bare_callbacks"] = bare1_ms / bare16_callbacks_ms;
  s["bare_status"] = bare1_ms / bare16_status_ms;
  s["bare_held"] = bare1_ms / bare16_held_ms;
  s["bare1"] = 1.0;
  Json& best = add_row(fig, "2.best", "best multi-queue speedup (uvcl over queues 1..16, bare over 2..16)", "x", true);
  best["uvcl"] = ubest;
  best["bare"] = bare_best;
  fig["uvcl_best_queues"] = ubest_q;
  Json& one = add_row(fig, "2.one_queue", "one queue: wall time", "ms", false);
  one["uvcl"] = u1_ms;
  one["bare"] = bare1_ms;
  // Head to head: uvcl's default and bare on 16 queues, fresh, taking turns
  // rep by rep (the curves above run one after the other, and the host's
  // speed drifts between them). The ratio of their times is the ratio of
  // their speedups over one queue.
  {
    const int turns = c.pick(7, 3, 1);
    Fig2Uvcl u(c, 0, std::nullopt, chains, length, wg, iters);
    Fig2Bare b(c, chains, length, wg, iters);
    b.run(16);  // warm-up
    std::vector<double> ut, bt;
    for (int r = 0; r < turns; ++r) {
      ut.push_back(u.run());
      bt.push_back(b.run(16));
    }
    Json& h = add_row(fig, "2.head_to_head", "uvcl (default queues) and bare (16 queues) taking turns: median wall time",
                      "ms", false);
    h["uvcl"] = median(ut);
    h["bare"] = median(bt);
    fig["head_to_head"]["uvcl_ms"] = Json::array_of(ut);
    fig["head_to_head"]["bare_ms"] = Json::array_of(bt);
    fig["head_to_head"]["uvcl_submit_ms"] = Json::array_of(u.submit_ms());
  }
  return fig;
}

// =====================================================================
// Figure 3: completion latency
// =====================================================================

// Long enough to cover a small round trip on a GPU (20-40 us on an H200).
constexpr unsigned kFig3SpinUs = 1000;

Json fig3(Ctx& c) {
  const int samples = c.pick(2000, 300, 20);
  const int warm = c.pick(100, 30, 5);
  Json fig = make_figure("3", "Completion latency: launch -> 4-byte read-back");
  fig["params"]["samples"] = samples;
  column(fig, "uvcl", "uvcl: read callback on the loop (default: spin_us \"auto\")");
  column(fig, "uvcl_nospin", "uvcl, spin_us 0 (the driver's callback wakes the loop)");
  column(fig, "uvcl_spin", "uvcl, spin_us " + std::to_string(kFig3SpinUs));
  column(fig, "bare", "bare: launch + blocking read");
  column(fig, "bare_poll", "bare: non-blocking read, its event polled");
  column(fig, "bare_poll_cb", "bare: non-blocking read, a callback registered, its event polled");
  column(fig, "bare_async", "bare: non-blocking read, its callback wakes a libuv loop (uv_async)");
  column(fig, "pyopencl", "pyopencl: launch + blocking read");
  std::vector<double> ulat, nlat, slat, blat;
  auto uvcl_run = [&](std::optional<unsigned> spin_us, std::vector<double>& lat) {
    auto eng = make_engine(c, 0, {}, std::nullopt, spin_us);
    Engine& e = *eng;
    const std::size_t d = c.local;
    Program p = must(e.compile_sync(d, kKernels), "compile");
    Kernel k = must(e.kernel(p, "tiny"), "kernel");
    Buffer buf = zeroed_buffers(e, d, 1, 256)[0];
    Launch l;
    l.kernel = k;
    l.args = {KernelArg::of(buf)};
    l.global = {1};
    int left = warm + samples;
    std::uint64_t t0 = 0;
    std::optional<std::string> error;
    std::function<void()> next = [&]() {
      t0 = now_ns();
      if (auto r = e.launch(l); !r) {
        error = r.error().to_string();
        return;
      }
      auto r = e.read(buf, 0, 4, [&](Result<std::span<const std::byte>> data) {
        const double us = us_since(t0);
        if (!data) {
          error = data.error().to_string();
          return;
        }
        if (left-- <= samples) lat.push_back(us);
        if (left > 0) next();
      });
      if (!r) error = r.error().to_string();
    };
    next();
    uv_run(e.loop(), UV_RUN_DEFAULT);  // returns when the engine is idle
    if (error) fail("latency run: " + *error);
    return e.stats();
  };
  // What the default's spinning costs: the loop's core, per round trip.
  const uvcl::EngineStats st = uvcl_run(std::nullopt, ulat);
  fig["uvcl_stats"]["reads"] = st.reads;
  fig["uvcl_stats"]["callbacks"] = st.callbacks;
  fig["uvcl_stats"]["spin_us_per_round_trip"] = static_cast<double>(st.spin_ns) / 1e3 / (warm + samples);
  uvcl_run(0u, nlat);
  uvcl_run(kFig3SpinUs, slat);
  // The bare floors: a blocking read; a non-blocking read whose event the
  // thread polls (uvcl's spin_us), with and without a completion callback
  // registered on it; and a callback that wakes a libuv loop through
  // uv_async (uvcl's default path).
  enum class Wait { Blocking, Poll, PollWithCallback, AsyncWake };
  auto bare_run = [&](Wait wait, std::vector<double>& lat) {
    Bare b(*c.api, c.dev(), 1);
    cl_program p = b.build(kKernels);
    cl_kernel k = b.kernel(p, "tiny");
    cl_mem m = b.buffer(256);
    b.zero(m, 256);
    float host = 0;
    const std::size_t g = 1;
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_async_t async;
    uv_async_init(&loop, &async, [](uv_async_t* a) { uv_stop(a->loop); });
    for (int i = 0; i < warm + samples; ++i) {
      const std::uint64_t t0 = now_ns();
      b.arg(k, 0, m);
      ck(b.api.clEnqueueNDRangeKernel(b.q(), k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr), "enqueue");
      if (wait == Wait::Blocking) {
        ck(b.api.clEnqueueReadBuffer(b.q(), m, CL_TRUE, 0, 4, &host, 0, nullptr, nullptr), "read");
      } else {
        cl_event ev = nullptr;
        ck(b.api.clEnqueueReadBuffer(b.q(), m, CL_FALSE, 0, 4, &host, 0, nullptr, &ev), "read");
        if (wait == Wait::PollWithCallback)
          ck(b.api.clSetEventCallback(ev, CL_COMPLETE, [](cl_event, cl_int, void*) {}, nullptr), "callback");
        if (wait == Wait::AsyncWake) {
          ck(b.api.clSetEventCallback(
                 ev, CL_COMPLETE, [](cl_event, cl_int, void* a) { uv_async_send(static_cast<uv_async_t*>(a)); },
                 &async),
             "callback");
        }
        ck(b.api.clFlush(b.q()), "clFlush");
        if (wait == Wait::AsyncWake) {
          uv_run(&loop, UV_RUN_DEFAULT);  // until the async stops it
        } else {
          cl_int status = CL_QUEUED;
          do ck(b.api.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr), "status");
          while (status > CL_COMPLETE);
        }
        b.api.clReleaseEvent(ev);
      }
      const double us = us_since(t0);
      if (i >= warm) lat.push_back(us);
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&async), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  };
  std::vector<double> poll_lat, poll_cb_lat, async_lat;
  bare_run(Wait::Blocking, blat);
  bare_run(Wait::Poll, poll_lat);
  bare_run(Wait::PollWithCallback, poll_cb_lat);
  bare_run(Wait::AsyncWake, async_lat);
  for (const char* pct : {"p50", "p90", "p99"}) {
    const double p = std::string(pct) == "p50" ? 50 : std::string(pct) == "p90" ? 90 : 99;
    Json& r = add_row(fig, std::string("3.") + pct, std::string("round trip ") + pct, "us", false);
    r["uvcl"] = percentile(ulat, p);
    r["uvcl_nospin"] = percentile(nlat, p);
    r["uvcl_spin"] = percentile(slat, p);
    r["bare"] = percentile(blat, p);
    r["bare_poll"] = percentile(poll_lat, p);
    r["bare_poll_cb"] = percentile(poll_cb_lat, p);
    r["bare_async"] = percentile(async_lat, p);
  }
  Json& mx = add_row(fig, "3.max", "round trip max", "us", false);
  mx["uvcl"] = max_of(ulat);
  mx["uvcl_nospin"] = max_of(nlat);
  mx["uvcl_spin"] = max_of(slat);
  mx["bare"] = max_of(blat);
  fig["uvcl_summary"] = summary(ulat);
  fig["bare_summary"] = summary(blat);
  fig["samples"]["uvcl"] = thinned(ulat, 4000);
  fig["uvcl_spin_summary"] = summary(slat);
  fig["samples"]["bare"] = thinned(blat, 4000);
  return fig;
}

// =====================================================================
// Figure 4: loop responsiveness under load
// =====================================================================

// A hand-written event-driven bare-OpenCL driver for the same load: groups
// of launches ending in a non-blocking read whose completion callback
// (driver thread) wakes the loop through uv_async; the loop issues the next
// group. What an application gets without uvcl, done right.
class BareLoad {
 public:
  BareLoad(Bare& b, cl_kernel k, std::vector<cl_mem> bufs, int group, int iters, std::size_t wg, unsigned queues)
      : b_(b), k_(k), bufs_(std::move(bufs)), group_(group), iters_(iters), wg_(wg), queues_(queues),
        host_(bufs_.size()) {}
  void start(uv_loop_t* loop) {
    self() = this;
    uv_async_init(loop, &async_, &BareLoad::on_async);
    for (std::size_t g = 0; g < bufs_.size(); ++g) issue(g);
  }
  void stop() { stopping_ = true; }
  std::uint64_t kernels = 0, reads = 0;
  std::optional<std::string> error;

 private:
  static BareLoad*& self() {
    static BareLoad* s = nullptr;
    return s;
  }
  void issue(std::size_t g) {
    cl_command_queue q = b_.q(g % queues_);
    b_.arg(k_, 0, bufs_[g]);
    b_.arg(k_, 1, iters_);
    for (int i = 0; i < group_; ++i)
      if (b_.api.clEnqueueNDRangeKernel(q, k_, 1, nullptr, &wg_, &wg_, 0, nullptr, nullptr) != CL_SUCCESS)
        error = "clEnqueueNDRangeKernel failed";
    kernels += static_cast<std::uint64_t>(group_);
    cl_event ev = nullptr;
    if (b_.api.clEnqueueReadBuffer(q, bufs_[g], CL_FALSE, 0, 4, &host_[g], 0, nullptr, &ev) != CL_SUCCESS) {
      error = "clEnqueueReadBuffer failed";
      return;
    }
    ++outstanding_;
    b_.api.clFlush(q);
    b_.api.clSetEventCallback(ev, CL_COMPLETE, &BareLoad::on_event, reinterpret_cast<void*>(g));
  }
  static void CL_CALLBACK on_event(cl_event ev, cl_int, void* user) {
    BareLoad* s = self();
    {
      std::lock_guard lock(s->mutex_);
      s->done_.push_back({reinterpret_cast<std::size_t>(user), ev});
    }
    uv_async_send(&s->async_);
  }
  static void on_async(uv_async_t* a) {
    BareLoad* s = self();
    std::vector<std::pair<std::size_t, cl_event>> done;
    {
      std::lock_guard lock(s->mutex_);
      done.swap(s->done_);
    }
    for (auto [g, ev] : done) {
      s->b_.api.clReleaseEvent(ev);
      --s->outstanding_;
      ++s->reads;
      if (!s->stopping_) s->issue(g);
    }
    if (s->stopping_ && s->outstanding_ == 0) uv_close(reinterpret_cast<uv_handle_t*>(a), nullptr);
  }
  Bare& b_;
  cl_kernel k_;
  std::vector<cl_mem> bufs_;
  int group_, iters_;
  std::size_t wg_;
  unsigned queues_;
  std::vector<float> host_;
  uv_async_t async_{};
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, cl_event>> done_;
  int outstanding_ = 0;
  bool stopping_ = false;
};

// Runs `loop` with a LagMeter for `seconds` after a 0.2 s settling time;
// `start` sets the load going, `stop` asks it to wind down.
struct Timed {
  uv_timer_t t{};
  std::function<void()> fn;
  static void schedule(uv_loop_t* loop, Timed& self, std::uint64_t ms, std::function<void()> f) {
    self.fn = std::move(f);
    uv_timer_init(loop, &self.t);
    self.t.data = &self;
    uv_timer_start(&self.t, [](uv_timer_t* h) {
      auto* s = static_cast<Timed*>(h->data);
      uv_close(reinterpret_cast<uv_handle_t*>(h), nullptr);
      s->fn();
    }, ms, 0);
  }
};

std::vector<double> lag_run(uv_loop_t* loop, double seconds, const std::function<void()>& start,
                            const std::function<void()>& stop, const std::function<void()>& sample = {}) {
  LagMeter meter;
  meter.recording = false;
  meter.on_each = [&] {
    if (meter.recording && sample) sample();
  };
  meter.start(loop);
  Timed settle, end;
  Timed::schedule(loop, settle, 200, [&] { meter.recording = true; });
  Timed::schedule(loop, end, 200 + static_cast<std::uint64_t>(seconds * 1000), [&] {
    meter.recording = false;
    meter.stop();
    if (stop) stop();
  });
  if (start) start();
  uv_run(loop, UV_RUN_DEFAULT);
  return meter.lag_us;
}

struct LoadResult {
  std::vector<double> ulag, blag, inflight;
  double ukernels_per_s = 0, bkernels_per_s = 0;
  Json probe;
};

// 64 groups, each `group` launches on its own buffer and a 4-byte read whose
// callback issues the group again: ~1088 commands always in flight.
LoadResult load_run(Ctx& c, int iters, double seconds, std::size_t groups, int group) {
  const std::size_t wg = spin_group(c);
  LoadResult res;
  {
    auto eng = make_engine(c);
    Engine& e = *eng;
    const std::size_t d = c.local;
    Program p = must(e.compile_sync(d, kKernels), "compile");
    Kernel k = must(e.kernel(p, "spin"), "kernel");
    std::vector<Buffer> bufs = zeroed_buffers(e, d, groups, wg * sizeof(float));
    Probe::attach(e.loop());
    Probe::reset();
    Launch l;
    l.kernel = k;
    l.args = {KernelArg::of(bufs[0]), KernelArg::value(iters)};
    l.global = {wg};
    l.local = {wg};
    bool stopping = false;
    std::uint64_t reads = 0;
    std::uint64_t t_start = 0, t_stop = 0, k_start = 0, k_stop = 0;
    std::optional<std::string> error;
    std::function<void(std::size_t)> issue = [&](std::size_t g) {
      Probe::User user;  // the benchmark's own work, not the engine's
      l.args[0].buffer = bufs[g];
      for (int i = 0; i < group; ++i)
        if (auto r = e.launch(l); !r) error = r.error().to_string();
      auto r = e.read(bufs[g], 0, 4, [&, g](Result<std::span<const std::byte>> data) {
        if (!data) error = data.error().to_string();
        ++reads;
        if (!stopping && !error) issue(g);
      });
      if (!r) error = r.error().to_string();
    };
    res.ulag = lag_run(
        e.loop(), seconds,
        [&] {
          for (std::size_t g = 0; g < groups; ++g) issue(g);
        },
        [&] {
          stopping = true;
          t_stop = now_ns();
          k_stop = reads;
        },
        [&] {
          if (t_start == 0) {
            t_start = now_ns();
            k_start = reads;
          }
          const uvcl::EngineStats s = e.stats();
          res.inflight.push_back(static_cast<double>(s.in_flight + s.pending));
        });
    if (error) fail("load: " + *error);
    res.ukernels_per_s =
        static_cast<double>(k_stop - k_start) * group / (static_cast<double>(t_stop - t_start) / 1e9);
    res.probe = Probe::json();
    Probe::detach();
  }
  {
    Bare b(*c.api, c.dev(), 8);
    cl_program p = b.build(kKernels);
    cl_kernel k = b.kernel(p, "spin");
    std::vector<cl_mem> bufs;
    for (std::size_t g = 0; g < groups; ++g) {
      bufs.push_back(b.buffer(wg * sizeof(float)));
      b.zero(bufs.back(), wg * sizeof(float));
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    BareLoad load(b, k, bufs, group, iters, wg, 8);
    std::uint64_t t_start = 0, t_stop = 0, r_start = 0, r_stop = 0;
    res.blag = lag_run(
        &loop, seconds, [&] { load.start(&loop); },
        [&] {
          load.stop();
          t_stop = now_ns();
          r_stop = load.reads;
        },
        [&] {
          if (t_start == 0) {
            t_start = now_ns();
            r_start = load.reads;
          }
        });
    b.finish();
    uv_loop_close(&loop);
    if (load.error) fail("bare load: " + *load.error);
    res.bkernels_per_s =
        static_cast<double>(r_stop - r_start) * group / (static_cast<double>(t_stop - t_start) / 1e9);
  }
  return res;
}

Json fig4(Ctx& c) {
  const double seconds = c.pick(3.0, 1.0, 0.3);
  const int base = spin_iters(c);                      // ~100 us kernels
  const int device_iters = std::max(1, base * 5);      // ~500 us: the device is the bottleneck
  const int host_iters = std::max(1, base / 5);        // ~20 us: the host's submission rate is
  const std::size_t groups = 64;
  const int group = 16;
  Json fig = make_figure("4", "Loop responsiveness: a 1 ms uv_timer's lag while the device is saturated");
  fig["params"]["seconds"] = seconds;
  fig["params"]["groups"] = groups;
  fig["params"]["launches_per_read"] = group;
  fig["params"]["in_flight_target"] = groups * (group + 1);
  fig["params"]["spin_iters_device_bound"] = device_iters;
  fig["params"]["spin_iters_host_bound"] = host_iters;
  fig["params"]["kernel_us_estimate"] = c.spin_us;
  column(fig, "uvcl", "uvcl (default queues: " + std::to_string(default_queues(c)) + ")");
  column(fig, "bare", "bare event-driven loop (8 queues, callbacks + uv_async)");
  column(fig, "idle", "idle loop, no OpenCL");

  std::vector<double> idle_lag;
  {
    uv_loop_t loop;
    uv_loop_init(&loop);
    idle_lag = lag_run(&loop, seconds, {}, {});
    uv_loop_close(&loop);
  }
  const LoadResult dev = load_run(c, device_iters, seconds, groups, group);
  const LoadResult host = load_run(c, host_iters, seconds, groups, group);
  auto rows = [&](const std::string& prefix, const std::string& what, const LoadResult& r) {
    for (const char* pct : {"p50", "p99", "max"}) {
      const std::string ps = pct;
      auto val = [&](const std::vector<double>& v) {
        return ps == "max" ? max_of(v) : percentile(v, ps == "p50" ? 50 : 99);
      };
      Json& row = add_row(fig, prefix + ps, what + "timer lag " + ps, "us", false);
      row["uvcl"] = val(r.ulag);
      row["bare"] = val(r.blag);
      row["idle"] = val(idle_lag);
    }
    Json& inf = add_row(fig, prefix + "in_flight", what + "commands in flight or pending (mean over ticks)",
                        "commands", true);
    inf["uvcl"] = mean_of(r.inflight);
    Json& thr = add_row(fig, prefix + "throughput", what + "kernels completed per second", "1/s", true);
    thr["uvcl"] = r.ukernels_per_s;
    thr["bare"] = r.bkernels_per_s;
    Json& hold = add_row(fig, prefix + "max_engine_callback",
                         what + "longest engine callback (including the benchmark's callbacks inside it)", "us",
                         false);
    hold["uvcl"] = r.probe.find("max_callback_us")->number();
    Json& own = add_row(fig, prefix + "max_engine_only",
                        what + "longest engine callback, minus the benchmark's callbacks run inside it (they issue the next launches and read)", "us", false);
    own["uvcl"] = r.probe.find("max_engine_only_us")->number();
  };
  rows("4.", "", dev);
  rows("4.host.", "host-bound load (20 us kernels): ", host);
  fig["uvcl_probe"] = dev.probe;
  fig["uvcl_probe_host_bound"] = host.probe;
  fig["uvcl_summary"] = summary(dev.ulag);
  fig["bare_summary"] = summary(dev.blag);
  fig["idle_summary"] = summary(idle_lag);
  fig["samples"]["uvcl"] = thinned(dev.ulag, 4000);
  fig["samples"]["bare"] = thinned(dev.blag, 4000);
  fig["samples"]["idle"] = thinned(idle_lag, 4000);
  fig["samples"]["uvcl_host_bound"] = thinned(host.ulag, 4000);
  fig["samples"]["bare_host_bound"] = thinned(host.blag, 4000);
  return fig;
}

// =====================================================================
// Figure 5: transfers
// =====================================================================

double gbps(std::size_t bytes, double us) { return static_cast<double>(bytes) / (us * 1e3); }

// Runs the loop until `flag`; the time from t0 to when the callback ran.
struct Waiter {
  bool done = false;
  std::uint64_t t1 = 0;
  std::optional<std::string> error;
  void hit(const std::optional<std::string>& err = std::nullopt) {
    t1 = now_ns();
    done = true;
    if (err) error = err;
  }
};

// Microseconds per call of `op`, over `ops` calls after one to warm up:
// each call a whole round trip.
template <class Op>
double us_per_round_trip(int ops, Op&& op) {
  op();
  const std::uint64_t t0 = now_ns();
  for (int i = 0; i < ops; ++i) op();
  return us_since(t0) / ops;
}

// Figure 5's uvcl side: an engine (opencl.spin_us `spin_us`, or the
// default) with its buffers and pinned host memory, kept for all rounds so
// that the ways can take turns on the small transfers.
class Fig5Uvcl {
 public:
  // Per round: microseconds per transfer.
  struct Small {
    std::vector<double> w_seq, wb_seq, r_seq, wh_seq, rh_seq, w_pipe, wb_pipe, r_pipe, wh_pipe, rh_pipe;
  };
  // GB/s per repetition.
  struct Big {
    std::vector<double> h2d_copy, h2d_borrow, h2d_host, d2h, d2h_host, d2d;
  };

  Fig5Uvcl(const Ctx& c, std::optional<unsigned> spin_us, std::size_t big, std::size_t small,
           const std::vector<unsigned char>& host)
      : e_(make_engine(c, 0, {}, std::nullopt, spin_us)), big_(big), small_(small), host_(host) {
    const std::size_t d = c.local;
    a_ = must(e_->allocate(d, big), "allocate");
    b2_ = must(e_->allocate(d, big), "allocate");
    s_ = must(e_->allocate(d, small), "allocate");
    pinned_ = must(e_->alloc_host(d, big), "alloc_host");
    std::memset(pinned_.bytes.data(), 1, big);
  }
  ~Fig5Uvcl() { (void)e_->release(pinned_); }
  Fig5Uvcl(const Fig5Uvcl&) = delete;
  Fig5Uvcl& operator=(const Fig5Uvcl&) = delete;

  // One large transfer of each kind, kept in `out` unless it only warms up
  // (staging blocks are created then).
  void big(Big* out) {
    const double wc = write_from(a_, host_span(big_), uvcl::WriteMode::Copy);
    const double wb = write_from(a_, host_span(big_), uvcl::WriteMode::Borrow);
    const double wh = write_from(a_, pinned_.bytes.first(big_), uvcl::WriteMode::Borrow);
    const double rd = read_from(a_, big_);
    const double rh = read_pinned(a_, big_);
    const double cp = copy_once(big_);
    if (!out) return;
    out->h2d_copy.push_back(gbps(big_, wc));
    out->h2d_borrow.push_back(gbps(big_, wb));
    out->h2d_host.push_back(gbps(big_, wh));
    out->d2h.push_back(gbps(big_, rd));
    out->d2h_host.push_back(gbps(big_, rh));
    out->d2d.push_back(gbps(big_, cp));
  }

  // One round of small transfers, `ops` of each kind.
  void small_round(int ops, Small& out) {
    out.w_seq.push_back(us_per_round_trip(ops, [&] { write_from(s_, host_span(small_), uvcl::WriteMode::Copy); }));
    out.wb_seq.push_back(us_per_round_trip(ops, [&] { write_from(s_, host_span(small_), uvcl::WriteMode::Borrow); }));
    out.r_seq.push_back(us_per_round_trip(ops, [&] { read_from(s_, small_); }));
    out.wh_seq.push_back(us_per_round_trip(ops, [&] { write_from(s_, pinned_.bytes.first(small_), uvcl::WriteMode::Borrow); }));
    out.rh_seq.push_back(us_per_round_trip(ops, [&] { read_pinned(s_, small_); }));
    out.wh_pipe.push_back(writes_back_to_back(ops, pinned_.bytes.first(small_), uvcl::WriteMode::Borrow));
    out.rh_pipe.push_back(reads_into_back_to_back(ops));
    out.w_pipe.push_back(writes_back_to_back(ops, host_span(small_), uvcl::WriteMode::Copy));
    out.wb_pipe.push_back(writes_back_to_back(ops, host_span(small_), uvcl::WriteMode::Borrow));
    out.r_pipe.push_back(reads_back_to_back(ops));
  }

  // Where a pipelined read's time goes, in a pass of its own: issuing it,
  // what the engine asked of the driver for it, and the driver's time.
  void read_detail(const Ctx& c, int ops, Json& per, Json& driver) {
    driver_time(c, 1);
    const uvcl::EngineStats s0 = e_->stats();
    double issued = 0;
    reads_back_to_back(ops, &issued);
    const uvcl::EngineStats s1 = e_->stats();
    per["issue_us"] = issued;
    per["events"] = static_cast<double>(s1.events - s0.events) / ops;
    per["fences"] = static_cast<double>(s1.fences - s0.fences) / ops;
    per["flushes"] = static_cast<double>(s1.flushes - s0.flushes) / ops;
    per["status_queries"] = static_cast<double>(s1.status_queries - s0.status_queries) / ops;
    per["polls"] = static_cast<double>(s1.polls - s0.polls) / ops;
    per["spin_us"] = static_cast<double>(s1.spin_ns - s0.spin_ns) / 1e3 / ops;
    driver = driver_time(c, ops);
  }

 private:
  std::span<const std::byte> host_span(std::size_t n) const { return std::as_bytes(std::span(host_.data(), n)); }
  // Issue -> completion seen, in microseconds.
  template <class Issue>
  double round_trip(const char* what, Issue&& issue) {
    Waiter w;
    const std::uint64_t t0 = now_ns();
    must(issue(w), what);
    must(e_->run_until([&] { return w.done; }), "run_until");
    if (w.error) fail(std::string(what) + ": " + *w.error);
    return static_cast<double>(w.t1 - t0) / 1e3;
  }
  static auto hit(Waiter& w) {
    return [&w](auto r) { w.hit(r ? std::nullopt : std::optional<std::string>(r.error().to_string())); };
  }
  double write_from(Buffer dst, std::span<const std::byte> src, uvcl::WriteMode mode) {
    return round_trip("write", [&](Waiter& w) { return e_->write(dst, 0, src, mode, hit(w)); });
  }
  double read_pinned(Buffer src, std::size_t n) {
    return round_trip("read_into", [&](Waiter& w) { return e_->read_into(src, 0, pinned_.bytes.first(n), hit(w)); });
  }
  double read_from(Buffer src, std::size_t n) {
    return round_trip("read", [&](Waiter& w) { return e_->read(src, 0, n, hit(w)); });
  }
  double copy_once(std::size_t n) {
    return round_trip("copy", [&](Waiter& w) { return e_->copy(a_, 0, b2_, 0, n, hit(w)); });
  }
  double writes_back_to_back(int ops, std::span<const std::byte> src, uvcl::WriteMode mode) {
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < ops; ++i) must(e_->write(s_, 0, src, mode), "write");
    must(e_->finish(), "finish");
    return us_since(t0) / ops;
  }
  double reads_into_back_to_back(int ops) {
    int got = 0;
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < ops; ++i)
      must(e_->read_into(s_, 0, pinned_.bytes.subspan(small_ * static_cast<std::size_t>(i % 64), small_),
                         [&](Result<void>) { ++got; }),
           "read_into");
    must(e_->run_until([&] { return got == ops; }), "run_until");
    return us_since(t0) / ops;
  }
  double reads_back_to_back(int ops, double* issued = nullptr) {
    int got = 0;
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < ops; ++i)
      must(e_->read(s_, 0, small_, [&](Result<std::span<const std::byte>>) { ++got; }), "read");
    if (issued) *issued = us_since(t0) / ops;
    must(e_->run_until([&] { return got == ops; }), "run_until");
    return us_since(t0) / ops;
  }

  std::unique_ptr<Engine> e_;
  std::size_t big_, small_;
  const std::vector<unsigned char>& host_;
  Buffer a_{}, b2_{}, s_{};
  uvcl::HostMemory pinned_{};
};

// Figure 5's bare side: one in-order queue, its buffers and a mapped pinned
// buffer, kept for all rounds as Fig5Uvcl is.
class Fig5Bare {
 public:
  struct Small {
    std::vector<double> w_pin, w_page, r_pin, r_page, w_pin_pipe, r_pin_pipe, r_pin_pipe_events;
  };
  static constexpr std::size_t kPageableChunk = std::size_t{8} << 20;
  struct Big {
    std::vector<double> h2d_pin, h2d_page, d2h_pin, d2h_page, d2d, h2d_async, d2h_async, h2d_page_async,
        h2d_page_chunks;
  };

  Fig5Bare(const Ctx& c, std::size_t big, std::size_t small, std::vector<unsigned char>& host,
           std::vector<unsigned char>& back)
      : b_(*c.api, c.dev(), 1), big_(big), small_(small), host_(host), back_(back) {
    a_ = b_.buffer(big);
    b2_ = b_.buffer(big);
    s_ = b_.buffer(small);
    pin_ = b_.buffer(big, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE);
    cl_int rc = CL_SUCCESS;
    hp_ = static_cast<unsigned char*>(
        api().clEnqueueMapBuffer(q(), pin_, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, big, 0, nullptr, nullptr, &rc));
    ck(rc, "clEnqueueMapBuffer");
    std::memset(hp_, 1, big);
  }
  ~Fig5Bare() {
    api().clEnqueueUnmapMemObject(q(), pin_, hp_, 0, nullptr, nullptr);
    b_.finish();
  }
  Fig5Bare(const Fig5Bare&) = delete;
  Fig5Bare& operator=(const Fig5Bare&) = delete;

  // One large transfer of each kind, kept in `out` unless it only warms up.
  void big(Big* out) {
    const double wp = timed([&] { write(a_, big_, hp_, CL_TRUE); });
    const double wg = timed([&] { write(a_, big_, host_.data(), CL_TRUE); });
    // From pageable memory as uvcl's Borrow mode issues it (non-blocking,
    // then waited for), and the same cut into pieces of kPageableChunk.
    const double wga = timed([&] {
      write(a_, big_, host_.data(), CL_FALSE);
      ck(api().clFinish(q()), "finish");
    });
    const double wgc = timed([&] {
      for (std::size_t off = 0; off < big_; off += kPageableChunk)
        ck(api().clEnqueueWriteBuffer(q(), a_, CL_FALSE, off, std::min(kPageableChunk, big_ - off),
                                      host_.data() + off, 0, nullptr, nullptr),
           "write");
      ck(api().clFinish(q()), "finish");
    });
    const double wa = timed([&] {
      write(a_, big_, hp_, CL_FALSE);
      ck(api().clFinish(q()), "finish");
    });
    const double rp = timed([&] { read(a_, big_, hp_, CL_TRUE); });
    const double ra = timed([&] {
      read(a_, big_, hp_, CL_FALSE);
      ck(api().clFinish(q()), "finish");
    });
    const double rg = timed([&] { read(a_, big_, back_.data(), CL_TRUE); });
    const double cp = timed([&] {
      ck(api().clEnqueueCopyBuffer(q(), a_, b2_, 0, 0, big_, 0, nullptr, nullptr), "copy");
      ck(api().clFinish(q()), "finish");
    });
    if (!out) return;
    out->h2d_pin.push_back(gbps(big_, wp));
    out->h2d_page_async.push_back(gbps(big_, wga));
    out->h2d_page_chunks.push_back(gbps(big_, wgc));
    out->h2d_async.push_back(gbps(big_, wa));
    out->d2h_async.push_back(gbps(big_, ra));
    out->h2d_page.push_back(gbps(big_, wg));
    out->d2h_pin.push_back(gbps(big_, rp));
    out->d2h_page.push_back(gbps(big_, rg));
    out->d2d.push_back(gbps(big_, cp));
  }

  void small_round(int ops, Small& out) {
    out.w_pin.push_back(us_per_round_trip(ops, [&] { write(s_, small_, hp_, CL_TRUE); }));
    out.w_page.push_back(us_per_round_trip(ops, [&] { write(s_, small_, host_.data(), CL_TRUE); }));
    out.r_pin.push_back(us_per_round_trip(ops, [&] { read(s_, small_, hp_, CL_TRUE); }));
    out.r_page.push_back(us_per_round_trip(ops, [&] { read(s_, small_, back_.data(), CL_TRUE); }));
    {
      const std::uint64_t t0 = now_ns();
      for (int i = 0; i < ops; ++i) write(s_, small_, hp_, CL_FALSE);
      ck(api().clFinish(q()), "finish");
      out.w_pin_pipe.push_back(us_since(t0) / ops);
    }
    out.r_pin_pipe.push_back(reads_back_to_back(ops));
    out.r_pin_pipe_events.push_back(reads_with_events(ops));
  }

  // The pipelined reads again, in passes of their own for the driver's time.
  void read_detail(const Ctx& c, int ops, Json& fig) {
    driver_time(c, 1);
    double issued = 0;
    reads_back_to_back(ops, &issued);
    fig["bare_pipelined_read_issue_us"] = issued;
    fig["driver"]["bare_reads"] = driver_time(c, ops);
    driver_time(c, 1);
    reads_with_events(ops);
    fig["driver"]["bare_reads_events"] = driver_time(c, ops);
  }

 private:
  const uvcl::cl::Api& api() const { return b_.api; }
  cl_command_queue q() const { return b_.q(); }
  template <class Op>
  static double timed(Op&& op) {
    const std::uint64_t t0 = now_ns();
    op();
    return us_since(t0);
  }
  void write(cl_mem m, std::size_t n, const void* src, cl_bool blocking) {
    ck(api().clEnqueueWriteBuffer(q(), m, blocking, 0, n, src, 0, nullptr, nullptr), "write");
  }
  void read(cl_mem m, std::size_t n, void* dst, cl_bool blocking) {
    ck(api().clEnqueueReadBuffer(q(), m, blocking, 0, n, dst, 0, nullptr, nullptr), "read");
  }
  unsigned char* block(int i) const { return hp_ + small_ * static_cast<std::size_t>(i % 64); }
  double reads_back_to_back(int ops, double* issued = nullptr) {
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < ops; ++i) read(s_, small_, block(i), CL_FALSE);
    if (issued) *issued = us_since(t0) / ops;
    ck(api().clFinish(q()), "finish");
    return us_since(t0) / ops;
  }
  // The driver calls uvcl makes for each awaited read: an event, a flush (a
  // read is a sync point), a status read and a release.
  double reads_with_events(int ops) {
    std::vector<cl_event> evs(static_cast<std::size_t>(ops), nullptr);
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < ops; ++i) {
      ck(api().clEnqueueReadBuffer(q(), s_, CL_FALSE, 0, small_, block(i), 0, nullptr,
                                   &evs[static_cast<std::size_t>(i)]),
         "read");
      ck(api().clFlush(q()), "flush");
    }
    ck(api().clFinish(q()), "finish");
    for (cl_event ev : evs) {
      cl_int st = CL_QUEUED;
      ck(api().clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, nullptr), "status");
      api().clReleaseEvent(ev);
    }
    return us_since(t0) / ops;
  }

  Bare b_;
  std::size_t big_, small_;
  std::vector<unsigned char>& host_;
  std::vector<unsigned char>& back_;
  cl_mem a_ = nullptr, b2_ = nullptr, s_ = nullptr, pin_ = nullptr;
  unsigned char* hp_ = nullptr;
};

// Figure 5 with opencl.spin_us: long enough to cover a 256 MiB transfer,
// so the loop sees each completion itself rather than through the
// driver's callback thread.
constexpr unsigned kFig5SpinUs = 20000;
Json fig5(Ctx& c) {
  const std::size_t big = c.pick<std::size_t>(256u << 20, 64u << 20, 1u << 20);
  const std::size_t small = 4096;
  const int reps = c.pick(5, 3, 1);
  const int ops = c.pick(1000, 200, 10);
  const int rounds = c.pick(7, 3, 1);
  const int per_round = std::max(1, ops / rounds);
  Json fig = make_figure("5", "Transfers");
  fig["params"]["big_bytes"] = big;
  fig["params"]["small_bytes"] = small;
  fig["params"]["reps"] = reps;
  fig["params"]["small_ops"] = per_round * rounds;
  fig["params"]["small_rounds"] = rounds;
  column(fig, "uvcl", "uvcl (write: Copy mode; read; copy)");
  column(fig, "uvcl_borrow", "uvcl write, Borrow mode");
  column(fig, "uvcl_host", "uvcl, alloc_host memory (write Borrow; read_into)");
  column(fig, "uvcl_host_spin",
         "uvcl, alloc_host memory, opencl.spin_us " + std::to_string(kFig5SpinUs) + " (copy: also spin_us)");
  column(fig, "bare", "bare, pinned host memory");
  column(fig, "bare_pageable", "bare, pageable host memory");
  column(fig, "bare_async", "bare, pinned, non-blocking call + clFinish");
  column(fig, "bare_pageable_async", "bare, pageable, non-blocking call + clFinish (how uvcl's Borrow issues it)");
  column(fig, "bare_pageable_chunks", "bare, pageable, non-blocking calls of 8 MiB each + clFinish");
  column(fig, "bare_events", "bare, pinned, back to back with an event and a flush each (status read, released)");
  column(fig, "pyopencl", "pyopencl, pinned");
  column(fig, "pyopencl_pageable", "pyopencl, pageable");
  const std::string big_name = std::to_string(big >> 20) + " MiB";

  std::vector<unsigned char> host(big, 1), back(big, 0);
  Fig5Uvcl uv(c, std::nullopt, big, small, host);
  Fig5Uvcl uvs(c, kFig5SpinUs, big, small, host);
  Fig5Bare bare(c, big, small, host, back);
  Fig5Uvcl::Big u, us;
  Fig5Bare::Big bb;
  // The ways take turns, repetition by repetition (the first warms up).
  for (int r = 0; r <= reps; ++r) {
    uv.big(r ? &u : nullptr);
    uvs.big(r ? &us : nullptr);
    bare.big(r ? &bb : nullptr);
  }
  // The small transfers take turns, round by round (medians): a few
  // microseconds each, they follow the host's speed, which drifts within a
  // run.
  Fig5Uvcl::Small su, sus;
  Fig5Bare::Small sb;
  for (int r = 0; r < rounds; ++r) {
    uv.small_round(per_round, su);
    uvs.small_round(per_round, sus);
    bare.small_round(per_round, sb);
  }
  uv.read_detail(c, ops, fig["uvcl_per_pipelined_read"]["default"], fig["driver"]["uvcl_reads"]);
  uvs.read_detail(c, ops, fig["uvcl_per_pipelined_read"]["spin"], fig["driver"]["uvcl_reads_spin"]);
  bare.read_detail(c, ops, fig);

  Json& h2d = add_row(fig, "5.h2d", "host -> device, " + big_name, "GB/s", true);
  h2d["uvcl"] = median(u.h2d_copy);
  h2d["uvcl_borrow"] = median(u.h2d_borrow);
  h2d["uvcl_host"] = median(u.h2d_host);
  h2d["uvcl_host_spin"] = median(us.h2d_host);
  h2d["bare"] = median(bb.h2d_pin);
  h2d["bare_pageable"] = median(bb.h2d_page);
  h2d["bare_async"] = median(bb.h2d_async);
  h2d["bare_pageable_async"] = median(bb.h2d_page_async);
  h2d["bare_pageable_chunks"] = median(bb.h2d_page_chunks);
  Json& d2h = add_row(fig, "5.d2h", "device -> host, " + big_name, "GB/s", true);
  d2h["uvcl"] = median(u.d2h);
  d2h["uvcl_host"] = median(u.d2h_host);
  d2h["uvcl_host_spin"] = median(us.d2h_host);
  d2h["bare"] = median(bb.d2h_pin);
  d2h["bare_pageable"] = median(bb.d2h_page);
  d2h["bare_async"] = median(bb.d2h_async);
  Json& d2d = add_row(fig, "5.d2d", "device -> device copy, " + big_name + " (bytes copied / s; traffic is 2x)",
                      "GB/s", true);
  d2d["uvcl"] = median(u.d2d);
  d2d["uvcl_host_spin"] = median(us.d2d);
  d2d["bare"] = median(bb.d2d);
  Json& ws = add_row(fig, "5.h2d_small", "host -> device, 4 KiB, one at a time (issue -> completion seen)", "us",
                     false);
  ws["uvcl"] = median(su.w_seq);
  ws["uvcl_borrow"] = median(su.wb_seq);
  ws["uvcl_host"] = median(su.wh_seq);
  ws["uvcl_host_spin"] = median(sus.wh_seq);
  ws["bare"] = median(sb.w_pin);
  ws["bare_pageable"] = median(sb.w_page);
  Json& rs = add_row(fig, "5.d2h_small", "device -> host, 4 KiB, one at a time (issue -> data on host)", "us", false);
  rs["uvcl"] = median(su.r_seq);
  rs["uvcl_host"] = median(su.rh_seq);
  rs["uvcl_host_spin"] = median(sus.rh_seq);
  rs["bare"] = median(sb.r_pin);
  rs["bare_pageable"] = median(sb.r_page);
  Json& wp = add_row(fig, "5.h2d_small_pipelined", "host -> device, 4 KiB, " + std::to_string(per_round) +
                                                      " back to back: time per transfer", "us", false);
  wp["uvcl"] = median(su.w_pipe);
  wp["uvcl_borrow"] = median(su.wb_pipe);
  wp["uvcl_host"] = median(su.wh_pipe);
  wp["uvcl_host_spin"] = median(sus.wh_pipe);
  wp["bare"] = median(sb.w_pin_pipe);
  Json& rp = add_row(fig, "5.d2h_small_pipelined", "device -> host, 4 KiB, " + std::to_string(per_round) +
                                                      " back to back: time per transfer", "us", false);
  rp["uvcl"] = median(su.r_pipe);
  rp["uvcl_host"] = median(su.rh_pipe);
  rp["uvcl_host_spin"] = median(sus.rh_pipe);
  rp["bare"] = median(sb.r_pin_pipe);
  rp["bare_events"] = median(sb.r_pin_pipe_events);
  return fig;
}

// One copy of `bytes` from `src` (on a's device) to `dst` (on b's) through
// `ring` pinned blocks of `chunk` bytes at `pinned`: chunk i+ring is read
// once chunk i's write is done, and chunk i's write is queued before waiting
// for the write before it, so the destination always has one write waiting.
// Waits spin on the event status, or with `nap_us`, sleep between looks.
// Returns the wall time in microseconds.
double bare_chunked_copy(Bare& a, Bare& b, cl_mem src, cl_mem dst, std::size_t bytes, void* pinned,
                         std::size_t chunk, std::size_t ring, unsigned nap_us) {
  const std::size_t n = (bytes + chunk - 1) / chunk;
  auto chunk_bytes = [&](std::size_t i) { return std::min(chunk, bytes - i * chunk); };
  auto block = [&](std::size_t i) { return static_cast<unsigned char*>(pinned) + (i % ring) * chunk; };
  std::vector<cl_event> reads(n, nullptr), writes(n, nullptr);
  auto read = [&](std::size_t i) {
    ck(a.api.clEnqueueReadBuffer(a.q(), src, CL_FALSE, i * chunk, chunk_bytes(i), block(i), 0, nullptr, &reads[i]),
       "read chunk");
    ck(a.api.clFlush(a.q()), "clFlush");
  };
  auto wait = [&](cl_event& ev) {  // the dispatch table has no blocking wait
    for (cl_int st = CL_QUEUED; st > CL_COMPLETE;) {
      ck(a.api.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, nullptr), "clGetEventInfo");
      if (st < 0) ck(st, "chunk");
      if (st > CL_COMPLETE && nap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
    }
    a.api.clReleaseEvent(ev);
    ev = nullptr;
  };
  const std::uint64_t t0 = now_ns();
  for (std::size_t i = 0; i < std::min(n, ring); ++i) read(i);
  for (std::size_t i = 0; i < n; ++i) {
    wait(reads[i]);
    ck(b.api.clEnqueueWriteBuffer(b.q(), dst, CL_FALSE, i * chunk, chunk_bytes(i), block(i), 0, nullptr, &writes[i]),
       "write chunk");
    ck(b.api.clFlush(b.q()), "clFlush");
    if (i == 0) continue;
    wait(writes[i - 1]);
    if (i - 1 + ring < n) read(i - 1 + ring);
  }
  wait(writes[n - 1]);
  return us_since(t0);
}

// Figure 5x: a copy between two devices (staged through pinned host memory).
Json fig5x(Ctx& c) {
  Json fig = make_figure("5x", "Cross-device copy");
  std::size_t other = 0;
  if (c.opt.device2 >= 0) other = static_cast<std::size_t>(c.opt.device2);
  else {
    other = c.devices.size();
    for (std::size_t i = 0; i < c.devices.size(); ++i)
      if (i != c.opt.device) {
        other = i;
        break;
      }
  }
  if (other >= c.devices.size() || other == c.opt.device) {
    fig["skipped"] = "needs a second OpenCL device (PoCL: POCL_DEVICES=\"pthread pthread\")";
    return fig;
  }
  const uvcl::cl::Device& da = c.dev();
  const uvcl::cl::Device& db = c.devices[other];
  const std::size_t bytes = c.pick<std::size_t>(256u << 20, 64u << 20, 1u << 20);
  const int reps = c.pick(5, 3, 1);
  fig["params"]["bytes"] = bytes;
  fig["params"]["reps"] = reps;
  fig["params"]["src_device"] = da.info.name + " (" + da.info.platform_name + ")";
  fig["params"]["dst_device"] = db.info.name + " (" + db.info.platform_name + ")";
  column(fig, "uvcl", "uvcl copy() across devices");
  column(fig, "bare", "bare: read to pinned, then write (blocking)");
  column(fig, "pyopencl", "pyopencl: read to pinned, then write");
  column(fig, "bare_chunked", "bare: the engine's chunks and ring by hand (4 MiB, 4 blocks), pipelined");
  std::vector<double> ut, bt, bct;
  std::vector<std::size_t> plats{da.info.platform_index};
  if (db.info.platform_index != da.info.platform_index) plats.push_back(db.info.platform_index);
  std::sort(plats.begin(), plats.end());
  // uvcl's copies, GB/s per rep, with the engine's config tweaked by `tweak`
  // (the chunks and ring); the driver table and counters go to `out`.
  auto uvcl_copies = [&](const std::function<void(uvcl::Config&)>& tweak, Json* out) {
    std::vector<double> g;
    auto eng = make_engine(c, 0, {}, plats, std::nullopt, tweak);
    Engine& e = *eng;
    // The engine lists the selected platforms' devices in the same order as
    // the unfiltered enumeration: count the selected ones before each.
    auto engine_index = [&](std::size_t global) {
      std::size_t k = 0;
      for (std::size_t j = 0; j < global; ++j)
        if (std::find(plats.begin(), plats.end(), c.devices[j].info.platform_index) != plats.end()) ++k;
      return k;
    };
    std::optional<std::size_t> ia = engine_index(c.opt.device), ib = engine_index(other);
    if (*ia >= e.device_count() || *ib >= e.device_count() || e.device(*ia)->name != da.info.name ||
        e.device(*ib)->name != db.info.name)
      ia.reset();
    if (!ia || !ib) fail("cross-device: devices not found in the engine");
    Buffer a = must(e.allocate(*ia, bytes), "allocate src");
    Buffer b = must(e.allocate(*ib, bytes), "allocate dst");
    std::vector<unsigned char> host(bytes, 7);
    must(e.write(a, 0, std::as_bytes(std::span(host)), uvcl::WriteMode::Borrow), "write");
    must(e.finish(), "finish");
    driver_time(c, 1);
    const uvcl::EngineStats s0 = e.stats();
    for (int r = 0; r <= reps; ++r) {
      Waiter w;
      const std::uint64_t t0 = now_ns();
      must(e.copy(a, 0, b, 0, bytes, [&](Result<void> res) {
        w.hit(res ? std::nullopt : std::optional<std::string>(res.error().to_string()));
      }), "copy");
      must(e.run_until([&] { return w.done; }), "run_until");
      if (w.error) fail("cross copy: " + *w.error);
      if (r > 0) g.push_back(gbps(bytes, static_cast<double>(w.t1 - t0) / 1e3));
    }
    const Json driver = driver_time(c, reps + 1.0);  // per copy
    if (out) {
      (*out)["driver"]["uvcl"] = driver;
      const uvcl::EngineStats s1 = e.stats();
      Json& per = (*out)["uvcl_per_copy"];
      per["status_queries"] = static_cast<double>(s1.status_queries - s0.status_queries) / (reps + 1.0);
      per["flushes"] = static_cast<double>(s1.flushes - s0.flushes) / (reps + 1.0);
      per["callbacks"] = static_cast<double>(s1.callbacks - s0.callbacks) / (reps + 1.0);
      per["polls"] = static_cast<double>(s1.polls - s0.polls) / (reps + 1.0);
      per["spin_ms"] = static_cast<double>(s1.spin_ns - s0.spin_ns) / 1e6 / (reps + 1.0);
    }
    auto check = must(e.read_sync(b, bytes - 4, 4), "read back");
    if (static_cast<unsigned char>(check[0]) != 7) fail("cross-device copy: wrong data");
    return g;
  };
  ut = uvcl_copies({}, &fig);
  // The same chunk sizes and rings as bare_chunked_variants below, and one
  // chunk for the whole copy (bare's scheme): GB/s, the median of reps.
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  struct Variant {
    const char* name;
    std::size_t chunk, ring;
    unsigned nap_us;
  };
  const Variant variants[] = {Variant{"4MiB x 4, napping 20 us", 4 * kMiB, 4, 20}, Variant{"16MiB x 4", 16 * kMiB, 4, 0},
                              Variant{"64MiB x 2", 64 * kMiB, 2, 0}};
  for (const Variant& v : variants) {
    if (v.nap_us != 0 || v.chunk * v.ring > bytes) continue;
    fig["uvcl_variants"][v.name] = median(uvcl_copies(
        [&](uvcl::Config& cfg) {
          cfg.cross_copy_chunk_mib = static_cast<unsigned>(v.chunk / kMiB);
          cfg.cross_copy_ring = static_cast<unsigned>(v.ring);
        },
        nullptr));
  }
  // Chunks with a ring that covers the whole copy: no block waits for a
  // write to land before its next read, against the whole copy in one.
  if (bytes == 64 * 4 * kMiB)
    fig["uvcl_variants"]["4MiB x 64"] = median(uvcl_copies(
        [&](uvcl::Config& cfg) {
          cfg.cross_copy_chunk_mib = 4;
          cfg.cross_copy_ring = 64;
        },
        nullptr));
  if (bytes >= kMiB && bytes / kMiB <= uvcl::kMaxCrossCopyChunkMib)
    fig["uvcl_variants"]["whole copy x 1"] = median(uvcl_copies(
        [&](uvcl::Config& cfg) {
          cfg.cross_copy_chunk_mib = static_cast<unsigned>(bytes / kMiB);
          cfg.cross_copy_ring = 1;
        },
        nullptr));
  {
    Bare ba(*c.api, da, 1), bb(*c.api, db, 1);
    cl_mem src = ba.buffer(bytes), dst = bb.buffer(bytes);
    cl_mem pin = ba.buffer(bytes, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE);
    cl_int rc = CL_SUCCESS;
    void* hp = ba.api.clEnqueueMapBuffer(ba.q(), pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, nullptr,
                                         nullptr, &rc);
    ck(rc, "clEnqueueMapBuffer");
    std::memset(hp, 7, bytes);
    ck(ba.api.clEnqueueWriteBuffer(ba.q(), src, CL_TRUE, 0, bytes, hp, 0, nullptr, nullptr), "write");
    driver_time(c, 1);
    for (int r = 0; r <= reps; ++r) {
      const std::uint64_t t0 = now_ns();
      ck(ba.api.clEnqueueReadBuffer(ba.q(), src, CL_TRUE, 0, bytes, hp, 0, nullptr, nullptr), "read");
      ck(bb.api.clEnqueueWriteBuffer(bb.q(), dst, CL_TRUE, 0, bytes, hp, 0, nullptr, nullptr), "write");
      if (r > 0) bt.push_back(gbps(bytes, us_since(t0)));
    }
    fig["driver"]["bare"] = driver_time(c, reps + 1.0);  // per copy
    ba.api.clEnqueueUnmapMemObject(ba.q(), pin, hp, 0, nullptr, nullptr);
    ba.finish();
    // The engine's scheme by hand: chunks through a ring of pinned blocks,
    // the next chunk's write queued while the one before it runs.
    driver_time(c, 1);
    for (int r = 0; r <= reps; ++r) {
      const double us = bare_chunked_copy(ba, bb, src, dst, bytes, hp, 4 * kMiB, 4, 0);
      if (r > 0) bct.push_back(gbps(bytes, us));
    }
    fig["driver"]["bare_chunked"] = driver_time(c, reps + 1.0);
    // What the chunks' size and the waiting cost the hand-written scheme:
    // GB/s, the median of reps copies each.
    for (const Variant& v : variants) {
      if (v.chunk * v.ring > bytes) continue;
      std::vector<double> g;
      for (int r = 0; r <= reps; ++r) {
        const double us = bare_chunked_copy(ba, bb, src, dst, bytes, hp, v.chunk, v.ring, v.nap_us);
        if (r > 0) g.push_back(gbps(bytes, us));
      }
      fig["bare_chunked_variants"][v.name] = median(g);
    }
  }
  Json& row = add_row(fig, "5x.cross", "device " + std::to_string(c.opt.device) + " -> device " +
                                           std::to_string(other) + ", " + std::to_string(bytes >> 20) + " MiB",
                      "GB/s", true);
  row["uvcl"] = median(ut);
  row["bare"] = median(bt);
  row["bare_chunked"] = median(bct);
  return fig;
}

// =====================================================================
// Figure 6: frees in flight
// =====================================================================

// Figure 6's uvcl side: an engine with its kernels and the long-lived
// buffers, kept for all repetitions so that the ways can take turns.
class Fig6Uvcl {
 public:
  Fig6Uvcl(const Ctx& c, std::size_t items) : e_(make_engine(c)), device_(c.local), bytes_(items * sizeof(float)) {
    Program p = must(e_->compile_sync(device_, kKernels), "compile");
    io_ = zeroed_buffers(*e_, device_, 2, bytes_);
    produce_.kernel = must(e_->kernel(p, "produce"), "kernel");
    produce_.global = {items};
    consume_.kernel = must(e_->kernel(p, "consume"), "kernel");
    consume_.global = {items};
  }
  Engine& engine() { return *e_; }
  // Microseconds per iteration; the temporaries released in the loop, or
  // kept until its end.
  double run(int iters, bool frees) {
    std::vector<Buffer> kept;
    kept.reserve(static_cast<std::size_t>(iters));
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < iters; ++i) {
      Buffer t = must(e_->allocate(device_, bytes_), "allocate");
      produce_.args = {KernelArg::of(t), KernelArg::of(io_[0])};
      consume_.args = {KernelArg::of(io_[1]), KernelArg::of(t)};
      must(e_->launch(produce_), "launch");
      must(e_->launch(consume_), "launch");
      if (frees) must(e_->release(t), "release");
      else kept.push_back(t);
    }
    must(e_->finish(), "finish");
    const double us = us_since(t0) / iters;
    for (Buffer t : kept) must(e_->release(t), "release");
    must(e_->finish(), "finish");
    return us;
  }

 private:
  std::unique_ptr<Engine> e_;
  std::size_t device_;
  std::size_t bytes_;
  std::vector<Buffer> io_;
  Launch produce_, consume_;
};

// Figure 6's bare side: one in-order queue, no events.
class Fig6Bare {
 public:
  Fig6Bare(const Ctx& c, std::size_t items) : b_(*c.api, c.dev(), 1), items_(items), bytes_(items * sizeof(float)) {
    cl_program p = b_.build(kKernels);
    produce_ = b_.kernel(p, "produce");
    consume_ = b_.kernel(p, "consume");
    in_ = b_.buffer(bytes_);
    out_ = b_.buffer(bytes_);
    b_.zero(in_, bytes_);
    b_.zero(out_, bytes_);
  }
  double run(int iters, bool frees) {
    const uvcl::cl::Api& api = b_.api;
    std::vector<cl_mem> kept;
    kept.reserve(static_cast<std::size_t>(iters));
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < iters; ++i) {
      cl_mem t = b_.buffer(bytes_, CL_MEM_READ_WRITE, false);
      b_.arg(produce_, 0, t);
      b_.arg(produce_, 1, in_);
      ck(api.clEnqueueNDRangeKernel(b_.q(), produce_, 1, nullptr, &items_, nullptr, 0, nullptr, nullptr), "enqueue");
      b_.arg(consume_, 0, out_);
      b_.arg(consume_, 1, t);
      ck(api.clEnqueueNDRangeKernel(b_.q(), consume_, 1, nullptr, &items_, nullptr, 0, nullptr, nullptr), "enqueue");
      if (frees) api.clReleaseMemObject(t);
      else kept.push_back(t);
    }
    b_.finish();
    const double us = us_since(t0) / iters;
    for (cl_mem t : kept) api.clReleaseMemObject(t);
    return us;
  }

 private:
  Bare b_;
  std::size_t items_, bytes_;
  cl_kernel produce_ = nullptr, consume_ = nullptr;
  cl_mem in_ = nullptr, out_ = nullptr;
};

Json fig6(Ctx& c) {
  const int iters = c.pick(2000, 400, 20);
  const int reps = c.pick(7, 3, 1);
  const std::size_t items = 16384;
  Json fig = make_figure("6", "Frees in flight: allocate -> 2 kernels -> release, per iteration");
  fig["params"]["iterations"] = iters;
  fig["params"]["temp_bytes"] = items * sizeof(float);
  fig["params"]["reps"] = reps;
  column(fig, "uvcl", "uvcl");
  column(fig, "bare", "bare");
  column(fig, "pyopencl", "pyopencl");
  Fig6Uvcl uv(c, items);
  Fig6Bare bare(c, items);
  uv.run(iters, true);  // warm-up
  bare.run(iters, true);
  std::vector<double> uw, un, bw, bn;
  const uvcl::EngineStats s0 = uv.engine().stats();
  // The ways take turns, rep by rep: the host's speed drifts within a run.
  for (int r = 0; r < reps; ++r) {
    uw.push_back(uv.run(iters, true));
    bw.push_back(bare.run(iters, true));
    un.push_back(uv.run(iters, false));
    bn.push_back(bare.run(iters, false));
  }
  // What the engine asked of the driver beyond the launches themselves:
  // bare makes no events and flushes only at its finish.
  const uvcl::EngineStats s1 = uv.engine().stats();
  const double n = 2.0 * reps * iters;
  Json& per = fig["uvcl_per_iteration"];
  per["events"] = static_cast<double>(s1.events - s0.events) / n;
  per["fences"] = static_cast<double>(s1.fences - s0.fences) / n;
  per["flushes"] = static_cast<double>(s1.flushes - s0.flushes) / n;
  per["cross_queue_waits"] = static_cast<double>(s1.cross_queue_waits - s0.cross_queue_waits) / n;
  per["status_queries"] = static_cast<double>(s1.status_queries - s0.status_queries) / n;
  fig["uvcl_live_buffers_after"] = uv.engine().stats().live_buffers;
  if (c.cl_timing) {  // the driver's share, in passes of their own (per iteration)
    driver_time(c, 1);
    for (int r = 0; r < reps; ++r) {
      uv.run(iters, true);
      uv.run(iters, false);
    }
    fig["driver"]["uvcl"] = driver_time(c, n);
    for (int r = 0; r < reps; ++r) {
      bare.run(iters, true);
      bare.run(iters, false);
    }
    fig["driver"]["bare"] = driver_time(c, n);
  }
  Json& w = add_row(fig, "6.with_frees", "per iteration, releasing the temporary each time", "us", false);
  w["uvcl"] = median(uw);
  w["bare"] = median(bw);
  Json& nf = add_row(fig, "6.without_frees", "per iteration, temporaries kept until the end", "us", false);
  nf["uvcl"] = median(un);
  nf["bare"] = median(bn);
  Json& r = add_row(fig, "6.ratio", "throughput with frees / without (1.0: frees cost nothing)", "x", true);
  r["uvcl"] = median(un) / median(uw);
  r["bare"] = median(bn) / median(bw);
  return fig;
}

// =====================================================================
// Figure 7: compile, cold and warm
// =====================================================================

std::string temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("uvcl-bench-" + tag + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) fail("mkdtemp failed");
  return tmpl;
}

std::size_t files_in(const std::string& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file()) ++n;
  return n;
}

// compile_sync, then the kernel, a first launch and a 4-byte read-back: the
// build alone and the time until the program has produced a result (PoCL
// finishes code generation at the first launch).
struct CompileTime {
  double build_ms = 0, ready_ms = 0;
};
CompileTime uvcl_compile(Engine& e, std::size_t d, const std::string& src) {
  CompileTime t;
  const std::uint64_t t0 = now_ns();
  Program p = must(e.compile_sync(d, src), "compile");
  t.build_ms = us_since(t0) / 1e3;
  Kernel k = must(e.kernel(p, "tiny"), "kernel");
  Buffer b = must(e.allocate(d, 256), "allocate");
  Launch l;
  l.kernel = k;
  l.args = {KernelArg::of(b)};
  l.global = {1};
  must(e.launch(l), "launch");
  (void)must(e.read_sync(b, 0, 4), "read");
  t.ready_ms = us_since(t0) / 1e3;
  must(e.release(b), "release");
  must(e.release(k), "release");
  must(e.release(p), "release");
  return t;
}

CompileTime bare_compile(Bare& b, const std::string& src, const std::vector<unsigned char>* binary = nullptr) {
  CompileTime t;
  const std::uint64_t t0 = now_ns();
  cl_program p = binary ? b.from_binary(*binary, false) : b.build(src, false);
  t.build_ms = us_since(t0) / 1e3;
  cl_int rc = CL_SUCCESS;
  cl_kernel k = b.api.clCreateKernel(p, "tiny", &rc);
  ck(rc, "clCreateKernel");
  cl_mem m = b.buffer(256, CL_MEM_READ_WRITE, false);
  b.arg(k, 0, m);
  const std::size_t g = 1;
  float host = 0;
  ck(b.api.clEnqueueNDRangeKernel(b.q(), k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr), "enqueue");
  ck(b.api.clEnqueueReadBuffer(b.q(), m, CL_TRUE, 0, 4, &host, 0, nullptr, nullptr), "read");
  t.ready_ms = us_since(t0) / 1e3;
  b.api.clReleaseMemObject(m);
  b.api.clReleaseKernel(k);
  b.api.clReleaseProgram(p);
  return t;
}

Json fig7(Ctx& c) {
  const int cold_n = c.pick(3, 2, 1);
  const int warm_n = c.pick(5, 3, 2);
  Json fig = make_figure("7", "Compile: cold (unique source) and warm (same source)");
  fig["params"]["cold_runs"] = cold_n;
  fig["params"]["warm_runs"] = warm_n;
  fig["params"]["source_bytes"] = compile_source().size() + 30;
  const char* kc = std::getenv("POCL_KERNEL_CACHE");
  fig["params"]["POCL_KERNEL_CACHE"] = kc ? kc : "(unset: on)";
  const char* cd = std::getenv("POCL_CACHE_DIR");
  fig["params"]["POCL_CACHE_DIR"] = cd ? cd : "(unset)";
  column(fig, "uvcl", "uvcl, no cache_dir (driver cache only)");
  column(fig, "uvcl_cache", "uvcl with opencl.cache_dir");
  column(fig, "bare", "bare (source; warm: driver cache)");
  column(fig, "bare_binary", "bare from a program binary");
  column(fig, "pyopencl", "pyopencl (its own binary cache on)");
  std::vector<CompileTime> ucold, uwarm, ccold, cwarm, bcold, bwarm, bbin;
  bool cache_present = false;
  {
    auto eng = make_engine(c);
    std::string src;
    for (int i = 0; i < cold_n; ++i) ucold.push_back(uvcl_compile(*eng, c.local, src = unique_source()));
    for (int i = 0; i < warm_n; ++i) uwarm.push_back(uvcl_compile(*eng, c.local, src));
  }
  {
    const std::string dir = temp_dir("cache");
    std::string src;
    {
      auto eng = make_engine(c, 0, dir);
      for (int i = 0; i < cold_n; ++i) ccold.push_back(uvcl_compile(*eng, c.local, src = unique_source()));
    }
    cache_present = files_in(dir) > 0;
    for (int i = 0; i < warm_n; ++i) {  // a fresh engine each time: a restarted process
      auto eng = make_engine(c, 0, dir);
      cwarm.push_back(uvcl_compile(*eng, c.local, src));
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  {
    Bare b(*c.api, c.dev(), 1);
    std::string src;
    for (int i = 0; i < cold_n; ++i) bcold.push_back(bare_compile(b, src = unique_source()));
    for (int i = 0; i < warm_n; ++i) bwarm.push_back(bare_compile(b, src));
    cl_program p = b.build(src, false);
    std::vector<unsigned char> bin = b.binary(p);
    b.api.clReleaseProgram(p);
    for (int i = 0; i < warm_n; ++i) bbin.push_back(bare_compile(b, src, &bin));
    fig["params"]["binary_bytes"] = bin.size();
  }
  auto med = [](const std::vector<CompileTime>& v, bool ready) {
    std::vector<double> x;
    for (const CompileTime& t : v) x.push_back(ready ? t.ready_ms : t.build_ms);
    return median(x);
  };
  fig["uvcl_cache_present"] = cache_present;
  Json& cold = add_row(fig, "7.cold", "cold build (compile() until built)", "ms", false);
  cold["uvcl"] = med(ucold, false);
  cold["uvcl_cache"] = med(ccold, false);
  cold["bare"] = med(bcold, false);
  Json& warm = add_row(fig, "7.warm", "warm build (same source again)", "ms", false);
  warm["uvcl"] = med(uwarm, false);
  warm["uvcl_cache"] = cache_present ? Json(med(cwarm, false)) : Json();
  warm["bare"] = med(bwarm, false);
  warm["bare_binary"] = med(bbin, false);
  Json& coldr = add_row(fig, "7.cold_ready", "cold: build + first launch + read-back", "ms", false);
  coldr["uvcl"] = med(ucold, true);
  coldr["uvcl_cache"] = med(ccold, true);
  coldr["bare"] = med(bcold, true);
  Json& warmr = add_row(fig, "7.warm_ready", "warm: build + first launch + read-back", "ms", false);
  warmr["uvcl"] = med(uwarm, true);
  warmr["uvcl_cache"] = cache_present ? Json(med(cwarm, true)) : Json();
  warmr["bare"] = med(bwarm, true);
  warmr["bare_binary"] = med(bbin, true);
  Json& sp = add_row(fig, "7.speedup", "cold / warm build time", "x", true);
  sp["uvcl"] = med(ucold, false) / med(uwarm, false);
  sp["uvcl_cache"] = cache_present ? Json(med(ccold, false) / med(cwarm, false)) : Json();
  sp["bare"] = med(bcold, false) / med(bwarm, false);
  sp["bare_binary"] = med(bcold, false) / med(bbin, false);
  Json& spr = add_row(fig, "7.speedup_ready", "cold / warm, until the first result", "x", true);
  spr["uvcl"] = med(ucold, true) / med(uwarm, true);
  spr["uvcl_cache"] = cache_present ? Json(med(ccold, true) / med(cwarm, true)) : Json();
  spr["bare"] = med(bcold, true) / med(bwarm, true);
  spr["bare_binary"] = med(bcold, true) / med(bbin, true);
  return fig;
}

// =====================================================================
// Figure 8: scale
// =====================================================================

Json fig8(Ctx& c) {
  std::vector<std::size_t> lives = c.opt.smoke   ? std::vector<std::size_t>{100, 1000}
                                   : c.opt.quick ? std::vector<std::size_t>{1000, 100000}
                                                 : std::vector<std::size_t>{1000, 100000, 1000000};
  const std::uint64_t launches = c.pick<std::uint64_t>(100000, 20000, 1000);
  const std::uint64_t in_flight = c.pick<std::uint64_t>(100000, 20000, 1000);
  const std::uint64_t growth = c.opt.growth ? c.opt.growth : c.pick<std::uint64_t>(10000000, 1000000, 20000);
  // The same number of buffers in use at every live count, so that only the
  // records around them differ: 1024 in use over 1000 live made a stride of
  // 0, one hot buffer against a thousand cold ones at the larger counts.
  const std::size_t used = std::min<std::size_t>(c.opt.smoke ? 64 : 1024, lives.front());
  const std::size_t bytes = 64;
  Json fig = make_figure("8", "Scale: live buffers, engine memory, no growth");
  fig["params"]["buffer_bytes"] = bytes;
  fig["params"]["launches"] = launches;
  fig["params"]["buffers_used_by_launches"] = used;
  fig["params"]["in_flight_commands"] = in_flight;
  fig["params"]["growth_launches"] = growth;
  column(fig, "uvcl", "uvcl");
  column(fig, "bare", "bare (with event)");
  Json per_launch_u = Json::array(), per_launch_b = Json::array();
  double u_first = 0, u_last = 0, b_first = 0, b_last = 0;
  for (std::size_t live : lives) {
    double u_alloc = 0, u_submit = 0, u_total = 0, u_bytes = 0, b_alloc = 0, b_submit = 0, b_bytes = 0;
    const std::size_t stride = live / used;
    // Both sides hold their `live` buffers at once and take turns, run by
    // run: the host's speed drifts within a run.
    auto eng = make_engine(c);
    Engine& e = *eng;
    const std::size_t d = c.local;
    Program p = must(e.compile_sync(d, kKernels), "compile");
    Kernel k = must(e.kernel(p, "tiny"), "kernel");
    std::vector<Buffer> ubufs;
    ubufs.reserve(live);
    ::malloc_trim(0);  // freed memory of earlier runs must not hide this one's
    std::uint64_t r0 = rss_bytes();
    std::uint64_t t0 = now_ns();
    for (std::size_t i = 0; i < live; ++i) ubufs.push_back(must(e.allocate(d, bytes), "allocate"));
    u_alloc = us_since(t0) / static_cast<double>(live);
    u_bytes = static_cast<double>(rss_bytes() - r0) / static_cast<double>(live);
    Launch l;
    l.kernel = k;
    l.args = {KernelArg::of(ubufs[0])};
    l.global = {1};
    auto run_uvcl = [&](std::uint64_t n) {
      const std::uint64_t s0 = now_ns();
      for (std::uint64_t i = 0; i < n; ++i) {
        l.args[0].buffer = ubufs[(i % used) * stride];
        if (auto r = e.launch(l); !r) fail("launch: " + r.error().to_string());
      }
      const double submit = us_since(s0) / static_cast<double>(n);
      must(e.finish(), "finish");
      return std::pair{submit, us_since(s0) / static_cast<double>(n)};
    };

    Bare b(*c.api, c.dev(), 1);
    const uvcl::cl::Api& api = b.api;
    cl_kernel bk = b.kernel(b.build(kKernels), "tiny");
    std::vector<cl_mem> bbufs;
    bbufs.reserve(live);
    ::malloc_trim(0);
    r0 = rss_bytes();
    t0 = now_ns();
    for (std::size_t i = 0; i < live; ++i) bbufs.push_back(b.buffer(bytes, CL_MEM_READ_WRITE, false));
    b_alloc = us_since(t0) / static_cast<double>(live);
    b_bytes = static_cast<double>(rss_bytes() - r0) / static_cast<double>(live);
    auto run_bare = [&](std::uint64_t n) {
      const std::size_t g = 1;
      const std::uint64_t s0 = now_ns();
      for (std::uint64_t i = 0; i < n; ++i) {
        b.arg(bk, 0, bbufs[(i % used) * stride]);
        cl_event ev = nullptr;
        ck(api.clEnqueueNDRangeKernel(b.q(), bk, 1, nullptr, &g, nullptr, 0, nullptr, &ev), "enqueue");
        api.clReleaseEvent(ev);
      }
      const double submit = us_since(s0) / static_cast<double>(n);
      b.finish();
      return submit;
    };

    run_uvcl(std::min<std::uint64_t>(launches, 2000));
    run_bare(std::min<std::uint64_t>(launches, 2000));
    std::vector<double> subs, tots, bsubs;
    for (int r = 0; r < 2; ++r) {
      auto [s, t] = run_uvcl(launches);
      subs.push_back(s);
      tots.push_back(t);
      bsubs.push_back(run_bare(launches));
    }
    u_submit = min_of(subs);
    u_total = min_of(tots);
    b_submit = min_of(bsubs);
    for (cl_mem m : bbufs) api.clReleaseMemObject(m);
    if (live == lives.front()) b_first = b_submit;
    b_last = b_submit;
    if (live == lives.front()) u_first = u_submit;
    u_last = u_submit;
    Json& r = add_row(fig, "8.launch_" + std::to_string(live), "host time per launch with " + std::to_string(live) +
                                                                   " live buffers", "us", false);
    r["uvcl"] = u_submit;
    r["bare"] = b_submit;
    Json& t = add_row(fig, "8.total_" + std::to_string(live), "wall time per launch until complete, " +
                                                                  std::to_string(live) + " live buffers", "us", false);
    t["uvcl"] = u_total;
    Json& a = add_row(fig, "8.alloc_" + std::to_string(live), "allocate one " + std::to_string(bytes) +
                                                                  "-byte buffer (" + std::to_string(live) + " live)",
                      "us", false);
    a["uvcl"] = u_alloc;
    a["bare"] = b_alloc;
    if (live == lives.back()) {
      Json& m = add_row(fig, "8.bytes_per_buffer", "RSS per live buffer (" + std::to_string(live) + " buffers)",
                        "bytes", false);
      m["uvcl"] = u_bytes;
      m["bare"] = b_bytes;
    }
  }
  Json& flat = add_row(fig, "8.flatness", "per-launch cost, most live buffers / fewest", "x", false);
  flat["uvcl"] = u_last / u_first;
  flat["bare"] = b_last / b_first;  // the driver's own growth, and the host's drift between the counts

  // Memory per in-flight command: commands submitted, their completions not
  // yet collected (the loop does not run), against a bare queue holding the
  // same number of events.
  {
    double u_cmd = 0, b_cmd = 0;
    {
      auto eng = make_engine(c);
      Engine& e = *eng;
      const std::size_t d = c.local;
      Program p = must(e.compile_sync(d, kKernels), "compile");
      Kernel k = must(e.kernel(p, "tiny"), "kernel");
      std::vector<Buffer> bufs = zeroed_buffers(e, d, used, bytes);
      Launch l;
      l.kernel = k;
      l.args = {KernelArg::of(bufs[0])};
      l.global = {1};
      // A fresh engine's first round: its tables grow to hold them all.
      ::malloc_trim(0);
      const std::uint64_t r0 = rss_bytes();
      for (std::uint64_t i = 0; i < in_flight; ++i) {
        l.args[0].buffer = bufs[i % used];
        must(e.launch(l), "launch");
      }
      u_cmd = (static_cast<double>(rss_bytes()) - static_cast<double>(r0)) / static_cast<double>(in_flight);
      must(e.finish(), "finish");
    }
    {
      Bare b(*c.api, c.dev(), 1);
      cl_program p = b.build(kKernels);
      cl_kernel k = b.kernel(p, "tiny");
      std::vector<cl_mem> bufs;
      for (std::size_t i = 0; i < used; ++i) bufs.push_back(b.buffer(bytes));
      std::vector<cl_event> events;
      events.reserve(in_flight);
      ::malloc_trim(0);
      const std::size_t g = 1;
      ::malloc_trim(0);
      const std::uint64_t r0 = rss_bytes();
      for (std::uint64_t i = 0; i < in_flight; ++i) {
        b.arg(k, 0, bufs[i % used]);
        cl_event ev = nullptr;
        ck(b.api.clEnqueueNDRangeKernel(b.q(), k, 1, nullptr, &g, nullptr, 0, nullptr, &ev), "enqueue");
        events.push_back(ev);
      }
      b_cmd = (static_cast<double>(rss_bytes()) - static_cast<double>(r0)) / static_cast<double>(in_flight);
      b.finish();
      for (cl_event ev : events) b.api.clReleaseEvent(ev);
    }
    Json& m = add_row(fig, "8.bytes_per_command", "RSS per in-flight command (" + std::to_string(in_flight) +
                                                      " in flight; bare holds their events)", "bytes", false);
    m["uvcl"] = u_cmd;
    m["bare"] = b_cmd;
  }

  // Growth: `growth` launches with the loop collecting completions; RSS
  // after 100k launches against RSS at the end.
  {
    auto eng = make_engine(c);
    Engine& e = *eng;
    const std::size_t d = c.local;
    Program p = must(e.compile_sync(d, kKernels), "compile");
    Kernel k = must(e.kernel(p, "tiny"), "kernel");
    std::vector<Buffer> bufs = zeroed_buffers(e, d, used, bytes);
    Launch l;
    l.kernel = k;
    l.args = {KernelArg::of(bufs[0])};
    l.global = {1};
    const std::uint64_t batch = std::min<std::uint64_t>(10000, growth);
    const std::uint64_t mark = std::min<std::uint64_t>(100000, growth);
    std::uint64_t done = 0;
    double rss_mark = 0, rss_end = 0;
    Json curve = Json::array();
    const std::uint64_t t0 = now_ns();
    std::uint64_t next_sample = mark;
    while (done < growth) {
      const std::uint64_t n = std::min(batch, growth - done);
      for (std::uint64_t i = 0; i < n; ++i) {
        l.args[0].buffer = bufs[(done + i) % used];
        if (auto r = e.launch(l); !r) fail("launch: " + r.error().to_string());
      }
      done += n;
      must(e.run_until([&] {
        const uvcl::EngineStats s = e.stats();
        return s.in_flight + s.pending < 2 * batch;
      }), "run_until");
      if (done >= next_sample || done == growth) {
        must(e.finish(), "finish");
        ::malloc_trim(0);
        const double rss = static_cast<double>(rss_bytes());
        if (done == mark) rss_mark = rss;
        Json pt = Json::object();
        pt["launches"] = done;
        pt["rss_mib"] = rss / (1 << 20);
        pt["seconds"] = static_cast<double>(now_ns() - t0) / 1e9;
        curve.push(std::move(pt));
        next_sample = next_sample * 2 > growth && next_sample < growth ? growth : next_sample * 2;
      }
    }
    must(e.finish(), "finish");
    ::malloc_trim(0);
    rss_end = static_cast<double>(rss_bytes());
    fig["growth_curve"] = std::move(curve);
    Json& g = add_row(fig, "8.rss_growth", "RSS after " + std::to_string(growth) + " launches / after " +
                                               std::to_string(mark), "x", false);
    g["uvcl"] = rss_end / rss_mark;
    Json& gm = add_row(fig, "8.rss_delta", "RSS growth from launch " + std::to_string(mark) + " to " +
                                               std::to_string(growth), "MiB", false);
    gm["uvcl"] = (rss_end - rss_mark) / (1 << 20);
    Json& rate = add_row(fig, "8.growth_rate", "sustained launches per second (loop collecting)", "1/s", true);
    rate["uvcl"] = static_cast<double>(growth) / (static_cast<double>(now_ns() - t0) / 1e9);
  }
  return fig;
}

// =====================================================================
// Figure 9: idle cost
// =====================================================================

struct IdleResult {
  double cpu_ms_per_s = 0, thread_cpu_ms_per_s = 0, iterations_per_s = 0, seconds = 0;
};

// Runs `loop` for `seconds` with nothing but a 1 s repeating timer of ours
// (and whatever else is on the loop), measuring process CPU time.
IdleResult idle_run(uv_loop_t* loop, double seconds) {
  struct State {
    uv_timer_t timer{};
    uv_check_t check{};
    int ticks = 0, target = 0;
    std::uint64_t iterations = 0;
  } st;
  st.target = std::max(1, static_cast<int>(seconds));
  const std::uint64_t period = seconds < 1 ? static_cast<std::uint64_t>(seconds * 1000) : 1000;
  uv_timer_init(loop, &st.timer);
  uv_check_init(loop, &st.check);
  st.timer.data = &st;
  st.check.data = &st;
  uv_check_start(&st.check, [](uv_check_t* h) { ++static_cast<State*>(h->data)->iterations; });
  uv_unref(reinterpret_cast<uv_handle_t*>(&st.check));
  uv_timer_start(&st.timer, [](uv_timer_t* h) {
    auto* s = static_cast<State*>(h->data);
    if (++s->ticks >= s->target) {
      uv_close(reinterpret_cast<uv_handle_t*>(&s->timer), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&s->check), nullptr);
    }
  }, period, period);
  const double cpu0 = cpu_seconds();
  const double tcpu0 = cpu_seconds(RUSAGE_THREAD);
  const std::uint64_t t0 = now_ns();
  uv_run(loop, UV_RUN_DEFAULT);
  IdleResult r;
  r.seconds = static_cast<double>(now_ns() - t0) / 1e9;
  r.cpu_ms_per_s = (cpu_seconds() - cpu0) * 1e3 / r.seconds;
  r.thread_cpu_ms_per_s = (cpu_seconds(RUSAGE_THREAD) - tcpu0) * 1e3 / r.seconds;
  r.iterations_per_s = static_cast<double>(st.iterations) / r.seconds;
  return r;
}

Json fig9(Ctx& c) {
  const double seconds = c.opt.idle_s > 0 ? c.opt.idle_s : c.pick(10.0, 2.0, 0.3);
  Json fig = make_figure("9", "Idle cost: CPU used while uv_run runs with the engine idle");
  fig["params"]["seconds"] = seconds;
  column(fig, "uvcl", "uvcl engine, idle, on its loop");
  column(fig, "bare", "bare context, idle, plain loop");
  IdleResult u, b;
  std::uint64_t wakeups = 0;
  {
    auto eng = make_engine(c);
    Engine& e = *eng;
    const std::size_t d = c.local;
    Program p = must(e.compile_sync(d, kKernels), "compile");
    Kernel k = must(e.kernel(p, "tiny"), "kernel");
    Buffer buf = zeroed_buffers(e, d, 1, 256)[0];
    Launch l;
    l.kernel = k;
    l.args = {KernelArg::of(buf)};
    l.global = {1};
    for (int i = 0; i < 1000; ++i) must(e.launch(l), "launch");
    (void)must(e.read_sync(buf, 0, 4), "read");
    must(e.finish(), "finish");
    Probe::attach(e.loop());
    Probe::reset();
    u = idle_run(e.loop(), seconds);
    wakeups = Probe::wakeups();
    Probe::detach();
  }
  {
    Bare bare(*c.api, c.dev(), 8);
    cl_program p = bare.build(kKernels);
    cl_kernel k = bare.kernel(p, "tiny");
    cl_mem m = bare.buffer(256);
    bare.zero(m, 256);
    const std::size_t g = 1;
    bare.arg(k, 0, m);
    for (int i = 0; i < 1000; ++i)
      ck(bare.api.clEnqueueNDRangeKernel(bare.q(), k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr), "enqueue");
    bare.finish();
    uv_loop_t loop;
    uv_loop_init(&loop);
    b = idle_run(&loop, seconds);
    uv_loop_close(&loop);
  }
  Json& cpu = add_row(fig, "9.cpu", "process CPU time per second of idle loop", "ms/s", false);
  cpu["uvcl"] = u.cpu_ms_per_s;
  cpu["bare"] = b.cpu_ms_per_s;
  Json& tc = add_row(fig, "9.loop_thread_cpu", "loop thread's own CPU time per second (the rest is driver threads)",
                     "ms/s", false);
  tc["uvcl"] = u.thread_cpu_ms_per_s;
  tc["bare"] = b.thread_cpu_ms_per_s;
  Json& it = add_row(fig, "9.iterations", "loop iterations per second", "1/s", false);
  it["uvcl"] = u.iterations_per_s;
  it["bare"] = b.iterations_per_s;
  Json& w = add_row(fig, "9.wakeups", "engine callbacks (poll timer + async) per second", "1/s", false);
  w["uvcl"] = static_cast<double>(wakeups) / u.seconds;
  return fig;
}

// =====================================================================
// Figure 10: loop stall during a compile
// =====================================================================

struct StallResult {
  double compile_call_us = 0, kernel_call_us = 0, build_ms = 0, ready_ms = 0;
  double max_callback_us = 0, max_hold_us = 0, lag_max_us = 0, lag_p99_us = 0;
  Json probe;
};

// On the engine's loop, from a timer callback: compile(); on built, kernel(),
// a launch and a 4-byte read; the phase ends with the data.
StallResult stall_phase(Engine& e, std::size_t d, const std::string& src) {
  Probe::attach(e.loop());
  Probe::reset();
  StallResult r;
  LagMeter meter;
  meter.start(e.loop());
  Timed go;
  std::optional<std::string> error;
  std::uint64_t t0 = 0;
  Program prog;
  Buffer buf = must(e.allocate(d, 256), "allocate");
  auto finish = [&] { meter.stop(); };
  Timed::schedule(e.loop(), go, 20, [&] {
    t0 = now_ns();
    auto p = Probe::call("compile", [&] {
      return e.compile(d, src, "", [&](Result<void> built) {
        r.build_ms = us_since(t0) / 1e3;
        if (!built) {
          error = built.error().to_string();
          finish();
          return;
        }
        const std::uint64_t k0 = now_ns();
        auto k = Probe::call("kernel", [&] { return e.kernel(prog, "tiny"); });
        r.kernel_call_us = us_since(k0);
        if (!k) {
          error = k.error().to_string();
          finish();
          return;
        }
        Launch l;
        l.kernel = k.value();
        l.args = {KernelArg::of(buf)};
        l.global = {1};
        auto lr = Probe::call("launch", [&] { return e.launch(l); });
        auto rr = Probe::call("read", [&] {
          return e.read(buf, 0, 4, [&](Result<std::span<const std::byte>> data) {
            r.ready_ms = us_since(t0) / 1e3;
            if (!data) error = data.error().to_string();
            finish();
          });
        });
        if (!lr || !rr) {
          error = "launch/read failed";
          finish();
        }
      });
    });
    r.compile_call_us = us_since(t0);
    if (!p) {
      error = p.error().to_string();
      finish();
      return;
    }
    prog = p.value();
  });
  uv_run(e.loop(), UV_RUN_DEFAULT);
  if (error) fail("stall phase: " + *error);
  r.max_callback_us = Probe::max_callback_us();
  r.max_hold_us = Probe::max_us();
  r.lag_max_us = max_of(meter.lag_us);
  r.lag_p99_us = percentile(meter.lag_us, 99);
  r.probe = Probe::json();
  Probe::detach();
  must(e.release(buf), "release");
  return r;
}

// One configuration of figure 10: a cold compile (a source no cache has
// seen; the engine's first, so in process mode it starts the compiler),
// a warm one (the same source again: the memo answers) and another cold one
// (a new source; the compiler is running) in one engine, then, in an
// engine with the memo off, a rebuild: the same source twice, the second
// time with the driver's kernel cache warm and (process mode) the compiler
// process already running: what reaches the compiler.
struct StallSet {
  StallResult cold, warm, cold_next, rebuild;
  Json cold_driver, cold_next_driver;  // per entry point, with --cl-library
};
StallSet stall_set(Ctx& c, uvcl::CompileMode mode, const std::string& cache_dir = {}) {
  StallSet s;
  auto with_mode = [mode](uvcl::Config& cfg) { cfg.compile = mode; };
  const std::string src = unique_source();
  {
    auto eng = make_engine(c, 0, cache_dir, std::nullopt, std::nullopt, with_mode);
    driver_time(c, 1);
    s.cold = stall_phase(*eng, c.local, src);
    s.cold_driver = driver_time(c, 1);
    s.warm = stall_phase(*eng, c.local, src);
    driver_time(c, 1);
    s.cold_next = stall_phase(*eng, c.local, unique_source());
    s.cold_next_driver = driver_time(c, 1);
  }
  {
    auto eng = make_engine(c, 0, cache_dir, std::nullopt, std::nullopt, [mode](uvcl::Config& cfg) {
      cfg.compile = mode;
      cfg.program_memo = 0;
    });
    const std::string again = unique_source();
    (void)stall_phase(*eng, c.local, again);
    s.rebuild = stall_phase(*eng, c.local, again);
  }
  return s;
}

Json fig10(Ctx& c) {
  Json fig = make_figure("10", "Loop stall during a compile: the longest time the loop is held by one engine call");
  column(fig, "uvcl", "uvcl, compiler process (opencl.compile \"process\", the default), no cache_dir");
  column(fig, "uvcl_inline", "uvcl, opencl.compile \"inline\" (clBuildProgram on the loop)");
  column(fig, "uvcl_cache", "uvcl (compiler process) with opencl.cache_dir (warm: binary from the cache)");
  column(fig, "bare", "bare clBuildProgram (blocking)");
  const StallSet u = stall_set(c, uvcl::CompileMode::Process);
  const StallSet in = stall_set(c, uvcl::CompileMode::Inline);
  StallSet cc;
  bool cached = false;
  {
    const std::string dir = temp_dir("stall");
    const std::string src = unique_source();
    {
      auto eng = make_engine(c, 0, dir);
      cc.cold = stall_phase(*eng, c.local, src);
    }
    cached = files_in(dir) > 0;
    {
      auto eng = make_engine(c, 0, dir);
      cc.warm = stall_phase(*eng, c.local, src);
    }
    {
      auto eng = make_engine(c, 0, dir, std::nullopt, std::nullopt, [](uvcl::Config& cfg) { cfg.program_memo = 0; });
      cc.rebuild = stall_phase(*eng, c.local, src);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  double bcold = 0, bwarm = 0;
  {
    Bare b(*c.api, c.dev(), 1);
    const std::string src = unique_source();
    std::uint64_t t0 = now_ns();
    b.build(src, true);
    bcold = us_since(t0);
    t0 = now_ns();
    b.build(src, true);
    bwarm = us_since(t0);
  }
  fig["uvcl_cache_present"] = cached;
  // Which driver calls the cold phases' holds are made of (per phase).
  fig["driver"]["uvcl_cold"] = u.cold_driver;
  fig["driver"]["uvcl_cold_next"] = u.cold_next_driver;
  fig["driver"]["inline_cold"] = in.cold_driver;
  auto rows = [&](const char* phase, const StallResult& pu, const StallResult& pi, const StallResult* pc,
                  std::optional<double> bare_us) {
    const std::string p = phase;
    auto row = [&](const std::string& key, const std::string& label, const char* unit,
                   double StallResult::*field, double scale, bool with_bare) {
      Json& j = add_row(fig, "10." + p + "." + key, p + ": " + label, unit, false);
      j["uvcl"] = pu.*field / scale;
      j["uvcl_inline"] = pi.*field / scale;
      if (pc) j["uvcl_cache"] = pc->*field / scale;
      if (with_bare && bare_us) j["bare"] = *bare_us / 1e3;
    };
    row("compile_call", "time inside compile() (loop blocked)", "ms", &StallResult::compile_call_us, 1e3, true);
    row("max_hold", "longest single engine call or callback on the loop (compile .. first result)", "ms",
        &StallResult::max_hold_us, 1e3, true);
    row("max_callback", "longest engine loop callback (prepare/timer/async)", "ms", &StallResult::max_callback_us,
        1e3, false);
    row("lag_max", "1 ms timer's worst lag", "ms", &StallResult::lag_max_us, 1e3, false);
    row("built", "compile() to on_built (end-to-end compile latency)", "ms", &StallResult::build_ms, 1, false);
    row("ready", "compile() to the first read-back", "ms", &StallResult::ready_ms, 1, false);
    row("kernel_call", "time inside kernel()", "us", &StallResult::kernel_call_us, 1, false);
  };
  rows("cold", u.cold, in.cold, &cc.cold, bcold);
  rows("warm", u.warm, in.warm, &cc.warm, bwarm);
  rows("cold_next", u.cold_next, in.cold_next, nullptr, std::nullopt);
  rows("rebuild", u.rebuild, in.rebuild, &cc.rebuild, bwarm);
  fig["probe"]["uvcl_cold"] = u.cold.probe;
  fig["probe"]["uvcl_warm"] = u.warm.probe;
  fig["probe"]["uvcl_cold_next"] = u.cold_next.probe;
  fig["probe"]["uvcl_rebuild"] = u.rebuild.probe;
  fig["probe"]["inline_cold"] = in.cold.probe;
  fig["probe"]["inline_rebuild"] = in.rebuild.probe;
  fig["probe"]["cache_cold"] = cc.cold.probe;
  fig["probe"]["cache_warm"] = cc.warm.probe;
  return fig;
}

// --- main ----------------------------------------------------------------------

// The first three fields of /proc/loadavg: other work on the machine shows here.
std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      return pos == std::string::npos ? line : line.substr(pos + 2);
    }
  return "unknown";
}

Json meta(const Ctx& c) {
  Json m = Json::object();
  m["tool"] = "uvcl_bench";
  m["uvcl_version"] = UVCL_BENCH_VERSION;
  m["command"] = c.opt.argv;
  char date[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  m["date"] = date;
  m["mode"] = c.opt.smoke ? "smoke" : c.opt.quick ? "quick" : "full";
  m["cpu_model"] = cpu_model();
  m["logical_cpus"] = static_cast<long>(::sysconf(_SC_NPROCESSORS_ONLN));
  utsname u{};
  if (::uname(&u) == 0) m["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  m["memory_gib"] = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
                    (1024.0 * 1024 * 1024);
  m["opencl_library"] = c.api->library_path;
  m["loadavg_start"] = loadavg();
  errno = 0;
  const int niceness = ::getpriority(PRIO_PROCESS, 0);
  if (errno == 0) m["nice"] = niceness;
  const uvcl::DeviceInfo& d = c.dev().info;
  Json dev = Json::object();
  dev["index"] = c.opt.device;
  dev["name"] = d.name;
  dev["vendor"] = d.vendor;
  dev["type"] = uvcl::device_type_name(d.type);
  dev["platform"] = d.platform_name;
  dev["platform_version"] = d.platform_version;
  dev["driver_version"] = d.driver_version;
  dev["device_version"] = d.device_version;
  dev["opencl_c_version"] = d.opencl_c_version;
  dev["compute_units"] = d.compute_units;
  dev["global_memory_gib"] = static_cast<double>(d.global_memory) / (1024.0 * 1024 * 1024);
  dev["max_work_group_size"] = d.max_work_group_size;
  m["device"] = std::move(dev);
  Json all = Json::array();
  for (const auto& x : c.devices) all.push(std::to_string(x.info.index) + ": " + x.info.name + " [" + x.info.platform_name + "]");
  m["devices"] = std::move(all);
  Json env = Json::object();
  for (const char* k : {"POCL_DEVICES", "POCL_MAX_PTHREAD_COUNT", "POCL_CACHE_DIR", "POCL_KERNEL_CACHE", "OCL_ICD_VENDORS"})
    if (const char* v = std::getenv(k)) env[k] = v;
  m["env"] = std::move(env);
  return m;
}

void usage() {
  std::cerr << "usage: uvcl_bench [--json OUT] [--quick] [--smoke] [--figure N[,N..]] [--device N] [--device2 N]\n"
               "                  [--list-devices] [--launches N] [--growth-launches N] [--idle-seconds S]\n"
               "                  [--spin-iters N] [--engine-queues N] [--engine-spin-us N] [--engine-events auto|all|awaited]\n"
               "                  [--engine-loop-budget-us N] [--engine-read-burst-us N] [--engine-window N] [--engine-compile process|inline]\n"
               "                  [--engine-completion auto|callback|poll] [--engine-cross-copy-chunk-mib N]\n"
               "                  [--engine-cross-copy-ring N] [--job JOB.json]... [--job-passes N]\n"
               "                  [--cl-library PATH]\n"
               "figures: 1 2 3 4 5 5x 6 7 8 9 10 11 12 (default: all; 5x only with a second device,\n"
               "         11 only with --job)\n";
}

int run(int argc, char** argv) {
  Ctx c;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) c.opt.argv += ' ';
    c.opt.argv += argv[i];
  }
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) {
      usage();
      std::exit(2);
    }
    return argv[++i];
  };
  // An --engine-* option naming a value of the config key `key`, read by the
  // config parser itself (its error says what the key takes).
  auto engine_option = [](const char* key, const std::string& v) -> std::optional<uvcl::Config> {
    auto cfg = uvcl::parse_config(std::string(R"({"opencl": {")") + key + R"(": ")" + v + "\"}}",
                                  std::string("--engine option ") + key);
    if (!cfg) std::cerr << "uvcl_bench: " << cfg.error().message << "\n";
    return cfg ? std::optional<uvcl::Config>(std::move(cfg).value()) : std::nullopt;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") c.opt.json_path = value(i);
    else if (a == "--quick") c.opt.quick = true;
    else if (a == "--smoke") c.opt.smoke = true;
    else if (a == "--list-devices") c.opt.list = true;
    else if (a == "--figure") {
      std::stringstream ss(value(i));
      std::string f;
      while (std::getline(ss, f, ',')) c.opt.figures.push_back(f);
    } else if (a == "--device") c.opt.device = std::stoul(value(i));
    else if (a == "--device2") c.opt.device2 = std::stol(value(i));
    else if (a == "--launches") c.opt.launches = std::stoull(value(i));
    else if (a == "--growth-launches") c.opt.growth = std::stoull(value(i));
    else if (a == "--idle-seconds") c.opt.idle_s = std::stod(value(i));
    else if (a == "--spin-iters") c.opt.spin_iters = std::stoi(value(i));
    else if (a == "--job") c.opt.jobs.push_back(value(i));
    else if (a == "--cl-library") c.opt.cl_library = value(i);
    else if (a == "--engine-completion") {
      auto cfg = engine_option("completion", value(i));
      if (!cfg) return 2;
      c.opt.engine_completion = cfg->completion;
    }
    else if (a == "--job-passes") c.opt.job_passes = static_cast<unsigned>(std::stoul(value(i)));
    else if (a == "--engine-queues") c.opt.engine_queues = static_cast<unsigned>(std::stoul(value(i)));
    else if (a == "--engine-spin-us") c.opt.engine_spin_us = static_cast<unsigned>(std::stoul(value(i)));  // default "auto"
    else if (a == "--engine-loop-budget-us") c.opt.engine_loop_budget_us = static_cast<unsigned>(std::stoul(value(i)));
    else if (a == "--engine-read-burst-us") c.opt.engine_read_burst_us = static_cast<unsigned>(std::stoul(value(i)));
    else if (a == "--engine-window") c.opt.engine_window = static_cast<unsigned>(std::stoul(value(i)));
    else if (a == "--engine-cross-copy-chunk-mib")
      c.opt.engine_cross_copy_chunk_mib = static_cast<unsigned>(std::stoul(value(i)));
    else if (a == "--engine-cross-copy-ring") c.opt.engine_cross_copy_ring = static_cast<unsigned>(std::stoul(value(i)));
    else if (a == "--engine-compile") {
      auto cfg = engine_option("compile", value(i));
      if (!cfg) return 2;
      c.opt.engine_compile = cfg->compile;
    } else if (a == "--engine-events") {
      auto cfg = engine_option("command_events", value(i));
      if (!cfg) return 2;
      c.opt.engine_events = cfg->command_events;
    }
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      std::cerr << "uvcl_bench: unknown argument " << a << "\n";
      usage();
      return 2;
    }
  }
  if (c.opt.smoke) c.opt.quick = true;

  auto lib = uvcl::cl::Library::open(c.opt.cl_library);
  if (!lib) {
    std::cerr << "uvcl_bench: " << lib.error().to_string() << "\n";
    return 1;
  }
  c.lib = std::move(lib.value());
  c.api = &c.lib->api();
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym gives a data pointer
  c.cl_timing = reinterpret_cast<UvclClTimingTakeFn>(::dlsym(c.api->handle, kUvclClTimingTake));
  auto devs = uvcl::cl::enumerate_devices(*c.api, std::nullopt, false);
  if (!devs) {
    std::cerr << "uvcl_bench: " << devs.error().to_string() << "\n";
    return 1;
  }
  c.devices = std::move(devs.value());
  std::cerr << "uvcl_bench: OpenCL devices (" << c.api->library_path << "):\n";
  for (const auto& d : c.devices)
    std::cerr << "  --device " << d.info.index << ": " << d.info.name << " [" << d.info.platform_name << "; "
              << uvcl::device_type_name(d.info.type) << "; driver " << d.info.driver_version << "]\n";
  if (c.opt.list) return 0;
  if (c.devices.empty()) {
    std::cerr << "uvcl_bench: no OpenCL device\n";
    return 1;
  }
  if (c.opt.device >= c.devices.size()) {
    std::cerr << "uvcl_bench: --device " << c.opt.device << " out of range\n";
    return 2;
  }
  for (std::size_t i = 0; i < c.opt.device; ++i)
    if (c.devices[i].info.platform_index == c.dev().info.platform_index) ++c.local;
  std::cerr << "uvcl_bench: benchmarking device " << c.opt.device << ": " << c.dev().info.name << " ("
            << (c.opt.smoke ? "smoke" : c.opt.quick ? "quick" : "full") << ")\n";

  struct Fig {
    const char* id;
    Json (*fn)(Ctx&);
  };
  const Fig all[] = {{"1", fig1}, {"2", fig2}, {"3", fig3}, {"4", fig4}, {"5", fig5}, {"5x", fig5x},
                     {"6", fig6}, {"7", fig7}, {"8", fig8}, {"9", fig9}, {"10", fig10}, {"11", fig11}, {"12", fig12}};
  std::vector<std::string> wanted = c.opt.figures;
  if (wanted.empty())
    for (const Fig& f : all)
      if (f.id != std::string("11") || !c.opt.jobs.empty()) wanted.push_back(f.id);
  for (const std::string& w : wanted)
    if (std::none_of(std::begin(all), std::end(all), [&](const Fig& f) { return w == f.id; })) {
      std::cerr << "uvcl_bench: unknown figure " << w << "\n";
      usage();
      return 2;
    }

  Json out = Json::object();
  out["meta"] = meta(c);
  out["figures"] = Json::object();
  int errors = 0;
  const std::uint64_t start = now_ns();
  auto save = [&] {
    if (c.opt.json_path.empty()) return;
    out["meta"]["elapsed_s"] = static_cast<double>(now_ns() - start) / 1e9;
    out["meta"]["loadavg_end"] = loadavg();
    std::ofstream f(c.opt.json_path);
    f << out.dump();
    if (!f) std::cerr << "uvcl_bench: cannot write " << c.opt.json_path << "\n";
  };
  for (const Fig& f : all) {
    if (std::find(wanted.begin(), wanted.end(), f.id) == wanted.end()) continue;
    const std::uint64_t t0 = now_ns();
    const std::string load0 = loadavg();
    std::cout << "figure " << f.id << " ..." << std::endl;
    Json result;
    try {
      result = f.fn(c);
    } catch (const std::exception& e) {
      result = make_figure(f.id, "failed");
      result["error"] = e.what();
      ++errors;
      std::cerr << "uvcl_bench: figure " << f.id << " failed: " << e.what() << "\n";
    }
    const double secs = static_cast<double>(now_ns() - t0) / 1e9;
    result["seconds"] = secs;
    result["loadavg_start"] = load0;
    result["loadavg_end"] = loadavg();
    print_figure(result);
    if (const Json* skipped = result.find("skipped")) std::cout << "  skipped: " << skipped->str() << "\n";
    std::cout << "figure " << f.id << " done in " << secs << " s" << std::endl;
    out["figures"][f.id] = std::move(result);
    save();
  }
  save();
  std::cout << "uvcl_bench: " << (errors ? std::to_string(errors) + " figure(s) failed" : "all figures done") << " in "
            << static_cast<double>(now_ns() - start) / 1e9 << " s" << std::endl;
  return errors ? 1 : 0;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) { return bench::run(argc, argv); }
