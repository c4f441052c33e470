// harness.hpp — the shim's interface and the standard fault workload.
//
// The engine loads the shim (Config::library = UVCL_SHIM_PATH) with
// RTLD_LOCAL; the tests reach its uvcl_shim_* functions through
// dlopen(RTLD_NOLOAD) on the same path once an engine has loaded it, and keep
// that handle, so the shim (and its counters) stay loaded for the whole run.
//
// The standard workload: one program, 8 independent streams of buffers (in,
// P, Q), each uploaded, filled, copied and stepped 25 times (ping-pong P/Q),
// so 200 launches spread over the engine's 8 queues; every stream's result is
// read back; everything is released; a drain finishes. With a fault armed,
// every stream must come back either with exactly the expected data or with
// an error — never with wrong data — and the run is checked for hangs,
// delivered errors, recovery, leaks and a clean loop close.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../watchdog.hpp"
#include "uvcl/engine.hpp"

#ifndef UVCL_SHIM_PATH
#error "UVCL_SHIM_PATH must name the built uvcl_clshim library"
#endif

namespace uvcl::faults {

inline constexpr const char* kShimPath = UVCL_SHIM_PATH;

// --- the shim --------------------------------------------------------------

struct ShimApi {
  void* handle = nullptr;
  int (*live)(const char*) = nullptr;
  void (*set_fault)(const char*) = nullptr;
  void (*reset_faults)() = nullptr;
  long (*calls)(const char*) = nullptr;
  int (*fired)() = nullptr;
  int (*armed)() = nullptr;
  int (*lost)() = nullptr;
  int (*anomalies)() = nullptr;
  const char* (*anomaly_log)() = nullptr;
  int (*rescue_user_events)(int) = nullptr;
  void (*mark_order)() = nullptr;
  long (*nth_call_since_mark)(const char*, int) = nullptr;
};

template <class F>
inline void bind(void* handle, const char* name, F& out) {
  void* sym = ::dlsym(handle, name);
  static_assert(sizeof(out) == sizeof(sym));
  std::memcpy(&out, &sym, sizeof sym);
}

inline Config shim_config(unsigned queues = 8, unsigned window = 100) {
  Config c;
  c.library = kShimPath;
  // Faults are armed in this process's shim: builds stay here, where the
  // sweep injects them and counts the calls (a compiler process would load
  // a shim of its own). test/engine/compiler_test.cpp covers the process.
  c.compile = CompileMode::Inline;
  c.queues = queues;
  c.window = window;
  return c;
}

// The shim's functions. The first call loads the shim through an engine if
// no engine has loaded it yet (an engine made and destroyed at once).
inline const ShimApi& shim() {
  static const ShimApi api = [] {
    ShimApi a;
    a.handle = ::dlopen(kShimPath, RTLD_NOW | RTLD_NOLOAD);
    if (a.handle == nullptr) {
      auto e = Engine::create(shim_config(1, 1));
      if (!e.ok()) ADD_FAILURE() << "loading the shim through an engine: " << e.error().to_string();
      a.handle = ::dlopen(kShimPath, RTLD_NOW | RTLD_NOLOAD);
    }
    if (a.handle == nullptr) {
      ADD_FAILURE() << "the shim " << kShimPath << " is not loaded";
      return a;
    }
    bind(a.handle, "uvcl_shim_live", a.live);
    bind(a.handle, "uvcl_shim_set_fault", a.set_fault);
    bind(a.handle, "uvcl_shim_reset_faults", a.reset_faults);
    bind(a.handle, "uvcl_shim_calls", a.calls);
    bind(a.handle, "uvcl_shim_faults_fired", a.fired);
    bind(a.handle, "uvcl_shim_faults_armed", a.armed);
    bind(a.handle, "uvcl_shim_lost", a.lost);
    bind(a.handle, "uvcl_shim_anomalies", a.anomalies);
    bind(a.handle, "uvcl_shim_anomaly_log", a.anomaly_log);
    bind(a.handle, "uvcl_shim_rescue_user_events", a.rescue_user_events);
    bind(a.handle, "uvcl_shim_mark_order", a.mark_order);
    bind(a.handle, "uvcl_shim_nth_call_since_mark", a.nth_call_since_mark);
    return a;
  }();
  return api;
}

inline bool shim_ok() {
  const ShimApi& s = shim();
  return s.live && s.set_fault && s.reset_faults && s.calls && s.fired && s.armed && s.lost && s.anomalies &&
         s.anomaly_log && s.rescue_user_events && s.mark_order && s.nth_call_since_mark;
}

// Live objects relative to a snapshot: what an earlier case leaked (reported
// there) does not fail every later case.
struct LiveSnapshot {
  int all = 0, context = 0, queue = 0, mem = 0, program = 0, kernel = 0, event = 0;
  LiveSnapshot() {
    const ShimApi& s = shim();
    if (s.live == nullptr) return;
    all = s.live("all");
    context = s.live("context");
    queue = s.live("queue");
    mem = s.live("mem");
    program = s.live("program");
    kernel = s.live("kernel");
    event = s.live("event");
  }
  int delta(const char* kind) const {
    const std::string k = kind;
    const int base = k == "all" ? all : k == "context" ? context : k == "queue" ? queue : k == "mem" ? mem
                   : k == "program" ? program : k == "kernel" ? kernel : event;
    return shim().live(kind) - base;
  }
};

// --- helpers ------------------------------------------------------------------

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs the engine's loop until done() or `seconds` pass. Returns "" or why not.
inline std::string run_for(Engine& e, const std::function<bool()>& done, double seconds) {
  const double deadline = now_s() + seconds;
  auto r = e.run_until([&] { return done() || now_s() > deadline; });
  if (!r.ok()) return "run_until: " + r.error().to_string();
  if (!done()) return "timed out after " + std::to_string(seconds) + " s";
  return "";
}

using uvcl::testing::Watchdog;  // ../watchdog.hpp

// An engine on a loop the test owns, so that closing the loop can be checked.
struct LoopEngine {
  std::unique_ptr<uv_loop_t> loop = std::make_unique<uv_loop_t>();
  std::unique_ptr<Engine> engine;
  bool loop_open = false;

  Result<void> create(const Config& c) {
    if (uv_loop_init(loop.get()) != 0) return Error{Status::Initialization, "uv_loop_init"};
    loop_open = true;
    auto e = Engine::create(c, loop.get());
    if (!e.ok()) return std::move(e).error();
    engine = std::move(e.value());
    return {};
  }
  // Destroys the engine, lets the close callbacks run, closes the loop.
  // Returns uv_loop_close's result (0: every handle was closed).
  int destroy() {
    engine.reset();
    if (!loop_open) return 0;
    for (int i = 0; i < 8; ++i) uv_run(loop.get(), UV_RUN_NOWAIT);
    const int rc = uv_loop_close(loop.get());
    loop_open = rc != 0;
    return rc;
  }
  ~LoopEngine() {
    if (loop_open) destroy();
  }
};

inline const char* kSource = R"CL(
__kernel void advance(__global const uint* in, __global uint* out, uint mul, uint add, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = in[i] * mul + add + (uint)i;
}
)CL";

// --- the workload ----------------------------------------------------------------

struct WorkloadOptions {
  std::string fault;             // a shim fault spec armed before the engine is made ("" none)
  std::string fault_after_init;  // armed once the engine exists (faults in the work, not the setup)
  unsigned streams = 8;
  unsigned steps = 25;           // launches per stream
  std::size_t n = 4096;          // uints per buffer
  bool recovery = true;          // run a fresh launch + read afterwards
  double budget_s = 20;          // watchdog for each wait
  std::vector<std::string> count_calls;  // entry points whose calls to count
  bool teardown_fault = false;  // keep the fault armed through the engine's destruction
};

struct StreamResult {
  bool aborted = false;  // a call on the stream failed at the API edge
  int callbacks = 0;     // read callbacks received (must be 0 or 1)
  bool read_ok = false;
  bool correct = false;
};

struct Outcome {
  bool created = false;
  std::vector<std::string> errors;  // every error the caller saw, in order
  std::vector<StreamResult> streams;
  std::vector<std::string> hangs;   // waits that did not finish
  bool device_lost = false;
  bool lost_rejects_new_work = false;  // when lost: allocate/compile/launch give DeviceLost
  bool recovered = false;
  std::string recovery_error;
  int loop_close_rc = 0;
  int live_after = -1;  // live OpenCL objects after destruction, minus those before the case
  int anomalies = 0;  // new shim anomalies during the run
  std::string anomaly_log;
  int fired = 0;
  std::uint32_t queues_used = 0;  // distinct compute queues in the schedule
  bool went_idle = false;
  std::vector<long> call_counts;   // per WorkloadOptions::count_calls, before recovery
  std::vector<long> total_counts;  // the same, up to the engine's destruction

  int failed_streams() const {
    int n = 0;
    for (const StreamResult& s : streams) n += s.aborted || !s.read_ok;
    return n;
  }
  int wrong_streams() const {
    int n = 0;
    for (const StreamResult& s : streams) n += s.read_ok && !s.correct;
    return n;
  }
  bool names(const std::string& a, const std::string& b = "") const {
    for (const std::string& e : errors)
      if (e.find(a) != std::string::npos || (!b.empty() && e.find(b) != std::string::npos)) return true;
    return false;
  }
  std::string all_errors() const {
    std::string s;
    for (const std::string& e : errors) s += "  - " + e.substr(0, 300) + "\n";
    return s;
  }
};

inline std::uint32_t input_value(unsigned s, std::size_t i) {
  return static_cast<std::uint32_t>(s * 1000003u + i * 7u);
}

inline std::vector<std::uint32_t> expected(unsigned s, const WorkloadOptions& o) {
  std::vector<std::uint32_t> x(o.n);
  for (std::size_t i = 0; i < o.n; ++i) x[i] = input_value(s, i);
  for (unsigned k = 0; k < o.steps; ++k)
    for (std::size_t i = 0; i < o.n; ++i) x[i] = x[i] * (3u + s) + k + static_cast<std::uint32_t>(i);
  return x;
}

// A fresh small job on an engine: compile (unless a kernel is given), launch,
// read, check. "" or what went wrong.
inline std::string fresh_job(Engine& e, std::optional<Kernel> k, double budget) {
  std::optional<Program> prog;
  if (!k) {
    bool built = false;
    std::optional<Error> build_error;
    auto p = e.compile(0, kSource, "", [&](Result<void> r) {
      built = true;
      if (!r) build_error = r.error();
    });
    if (!p) return "compile: " + p.error().to_string();
    prog = p.value();
    if (std::string w = run_for(e, [&] { return built; }, budget); !w.empty()) return "compile: " + w;
    if (build_error) return "build: " + build_error->to_string();
    auto kk = e.kernel(*prog, "advance");
    if (!kk) return "kernel: " + kk.error().to_string();
    k = kk.value();
  }
  const std::size_t n = 256;
  std::vector<std::uint32_t> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint32_t>(i * 5);
  auto a = e.allocate(0, n * 4);
  auto b = e.allocate(0, n * 4);
  if (!a || !b) return "allocate: " + (a ? b.error() : a.error()).to_string();
  std::string why;
  if (auto w = e.write(*a, 0, std::as_bytes(std::span<const std::uint32_t>(in))); !w) why = "write: " + w.error().to_string();
  Launch l{*k, {KernelArg::of(*a), KernelArg::of(*b), KernelArg::value<std::uint32_t>(2),
                KernelArg::value<std::uint32_t>(1), KernelArg::value<std::uint32_t>(n)},
           {n}, {64}};
  if (why.empty())
    if (auto r = e.launch(l); !r) why = "launch: " + r.error().to_string();
  bool got = false;
  std::vector<std::uint32_t> out;
  if (why.empty()) {
    auto r = e.read(*b, 0, n * 4, [&](Result<std::span<const std::byte>> d) {
      got = true;
      if (!d) {
        why = "read callback: " + d.error().to_string();
        return;
      }
      out.resize(n);
      std::memcpy(out.data(), d->data(), n * 4);
    });
    if (!r) why = "read: " + r.error().to_string();
    else if (std::string w = run_for(e, [&] { return got; }, budget); !w.empty()) why = "read: " + w;
  }
  if (why.empty())
    for (std::size_t i = 0; i < n; ++i)
      if (out[i] != in[i] * 2 + 1 + i) {
        why = "wrong data at " + std::to_string(i);
        break;
      }
  (void)e.release(*a);
  (void)e.release(*b);
  if (prog) {
    (void)e.release(*k);
    (void)e.release(*prog);
  }
  return why;
}

inline Outcome run_workload(const WorkloadOptions& o) {
  Outcome out;
  const ShimApi& sh = shim();
  sh.reset_faults();
  const int anomalies0 = sh.anomalies();
  const int live0 = sh.live("all");  // objects an earlier case leaked are not this case's
  if (!o.fault.empty()) {
    sh.set_fault(o.fault.c_str());
    if (sh.armed() != 1) ADD_FAILURE() << "the shim did not accept the fault spec " << o.fault;
  }
  out.streams.resize(o.streams);
  std::vector<long> calls0;
  for (const std::string& name : o.count_calls) calls0.push_back(sh.calls(name.c_str()));
  auto count_calls = [&] {
    out.call_counts.clear();
    for (std::size_t i = 0; i < calls0.size(); ++i)
      out.call_counts.push_back(sh.calls(o.count_calls[i].c_str()) - calls0[i]);
  };
  auto note = [&](const Error& e) { out.errors.push_back(e.to_string()); };

  LoopEngine le;
  if (auto c = le.create(shim_config()); !c) {
    note(c.error());
  } else {
    out.created = true;
    Engine& e = *le.engine;
    e.set_error_listener([&](const Error& err) { out.errors.push_back("listener: " + err.to_string()); });
    std::vector<bool> queue_seen(64, false);
    e.set_schedule_recorder([&](const ScheduleEntry& s) {
      if (s.queue < queue_seen.size()) queue_seen[s.queue] = true;
    });
    if (!o.fault_after_init.empty()) {
      sh.set_fault(o.fault_after_init.c_str());
      if (sh.armed() != 1) ADD_FAILURE() << "the shim did not accept the fault spec " << o.fault_after_init;
    }

    // Compile.
    std::optional<Program> prog;
    std::optional<Kernel> kern;
    bool built = false;
    bool build_ok = false;
    auto p = e.compile(0, kSource, "", [&](Result<void> r) {
      built = true;
      build_ok = r.ok();
      if (!r) note(r.error());
    });
    if (!p) {
      note(p.error());
    } else {
      prog = p.value();
      if (std::string w = run_for(e, [&] { return built; }, o.budget_s); !w.empty()) out.hangs.push_back("build: " + w);
      if (build_ok) {
        auto k = e.kernel(*prog, "advance");
        if (!k) note(k.error());
        else kern = k.value();
      }
    }

    // Streams.
    struct Bufs {
      std::optional<Buffer> in, p, q;
    };
    std::vector<Bufs> bufs(o.streams);
    std::vector<std::vector<std::uint32_t>> inputs(o.streams);
    const std::uint32_t pattern = 0xdeadbeefu;
    for (unsigned s = 0; s < o.streams; ++s) {
      StreamResult& sr = out.streams[s];
      if (!kern) {
        sr.aborted = true;
        continue;
      }
      for (std::optional<Buffer>* b : {&bufs[s].in, &bufs[s].p, &bufs[s].q}) {
        auto a = e.allocate(0, o.n * 4);
        if (!a) {
          note(a.error());
          sr.aborted = true;
          break;
        }
        *b = a.value();
      }
      if (sr.aborted) continue;
      inputs[s].resize(o.n);
      for (std::size_t i = 0; i < o.n; ++i) inputs[s][i] = input_value(s, i);
      if (auto w = e.write(*bufs[s].in, 0, std::as_bytes(std::span<const std::uint32_t>(inputs[s]))); !w) {
        note(w.error());
        sr.aborted = true;
        continue;
      }
      if (auto f = e.fill(*bufs[s].q, std::as_bytes(std::span<const std::uint32_t>(&pattern, 1)), 0, o.n * 4); !f) {
        note(f.error());
        sr.aborted = true;
        continue;
      }
      if (auto c = e.copy(*bufs[s].in, 0, *bufs[s].p, 0, o.n * 4); !c) {
        note(c.error());
        sr.aborted = true;
        continue;
      }
    }
    for (unsigned k = 0; k < o.steps; ++k) {
      for (unsigned s = 0; s < o.streams; ++s) {
        StreamResult& sr = out.streams[s];
        if (sr.aborted) continue;
        const Buffer src = k % 2 == 0 ? *bufs[s].p : *bufs[s].q;
        const Buffer dst = k % 2 == 0 ? *bufs[s].q : *bufs[s].p;
        Launch l{*kern,
                 {KernelArg::of(src), KernelArg::of(dst), KernelArg::value<std::uint32_t>(3 + s),
                  KernelArg::value<std::uint32_t>(k), KernelArg::value<std::uint32_t>(static_cast<std::uint32_t>(o.n))},
                 {o.n},
                 {64}};
        l.tag = s * 1000 + k;
        if (auto r = e.launch(l); !r) {
          note(r.error());
          sr.aborted = true;
        }
      }
    }
    // Read back every stream's result.
    std::vector<std::vector<std::uint32_t>> results(o.streams);
    int reads_pending = 0;
    for (unsigned s = 0; s < o.streams; ++s) {
      StreamResult& sr = out.streams[s];
      if (sr.aborted) continue;
      const Buffer last = (o.steps - 1) % 2 == 0 ? *bufs[s].q : *bufs[s].p;
      ++reads_pending;
      auto r = e.read(last, 0, o.n * 4, [&, s](Result<std::span<const std::byte>> d) {
        StreamResult& r2 = out.streams[s];
        if (++r2.callbacks == 1) --reads_pending;
        if (!d) {
          note(d.error());
          return;
        }
        r2.read_ok = true;
        results[s].resize(o.n);
        std::memcpy(results[s].data(), d->data(), o.n * 4);
      });
      if (!r) {
        --reads_pending;
        note(r.error());
        sr.aborted = true;
      }
    }
    // Release everything while the reads are in flight (buffers are Dying).
    for (Bufs& b : bufs)
      for (std::optional<Buffer>* x : {&b.in, &b.p, &b.q})
        if (*x)
          if (auto r = e.release(**x); !r) ADD_FAILURE() << "release: " << r.error().to_string();
    if (std::string w = run_for(e, [&] { return reads_pending == 0; }, o.budget_s); !w.empty())
      out.hangs.push_back("reads: " + w + " (" + std::to_string(reads_pending) + " pending)");
    bool drained = false;
    e.drain([&](Result<void> r) {
      drained = true;
      if (!r) note(r.error());
    });
    if (std::string w = run_for(e, [&] { return drained; }, o.budget_s); !w.empty())
      out.hangs.push_back("drain: " + w);

    for (unsigned s = 0; s < o.streams; ++s) {
      StreamResult& sr = out.streams[s];
      if (sr.read_ok) sr.correct = results[s] == expected(s, o);
    }
    for (std::uint32_t q = 0; q < queue_seen.size(); ++q) out.queues_used += queue_seen[q];

    count_calls();
    out.device_lost = e.device_lost(0);
    out.fired = sh.fired();
    // Unfired faults must not hit the checks below (unless the fault is
    // meant for the teardown).
    if (!o.teardown_fault) sh.reset_faults();
    if (out.device_lost) {
      auto a = e.allocate(0, 64);
      auto c = e.compile(0, kSource, "", [](Result<void>) {});
      bool launch_lost = true;
      if (kern) {
        Launch l{*kern, {}, {64}, {}};
        launch_lost = e.launch(l).status() == Status::DeviceLost;
      }
      out.lost_rejects_new_work =
          a.status() == Status::DeviceLost && c.status() == Status::DeviceLost && launch_lost;
    } else if (o.recovery) {
      out.recovery_error = fresh_job(e, kern, o.budget_s);
      out.recovered = out.recovery_error.empty();
    }
    if (kern) (void)e.release(*kern);
    if (prog) (void)e.release(*prog);
    // With nothing left to do the engine must go idle (not keep the loop alive).
    out.went_idle = run_for(e, [] { return false; }, 5.0).find("nothing in flight") != std::string::npos;
  }
  if (!out.created) {
    out.fired = sh.fired();
    count_calls();
  }
  if (!o.teardown_fault) sh.reset_faults();
  out.loop_close_rc = le.destroy();
  if (o.teardown_fault) {
    out.fired = sh.fired();
    sh.reset_faults();
  }
  out.live_after = sh.live("all") - live0;
  for (std::size_t i = 0; i < calls0.size(); ++i)
    out.total_counts.push_back(sh.calls(o.count_calls[i].c_str()) - calls0[i]);
  out.anomalies = sh.anomalies() - anomalies0;
  if (out.anomalies > 0) out.anomaly_log = sh.anomaly_log();
  return out;
}

}  // namespace uvcl::faults
