// bench_figure.hpp — what every figure of uvcl_bench shares: the options,
// the benchmarked device, engines made for it, and the figure's JSON rows.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cl_timing/cl_timing.h"
#include "cl/api.hpp"
#include "cl/devices.hpp"
#include "uvcl/engine.hpp"

namespace bench {

using uvcl::Engine;
using uvcl::Result;

struct Options {
  std::string json_path;
  bool quick = false, smoke = false, list = false;
  std::vector<std::string> figures;  // empty: the default set
  std::size_t device = 0;
  long device2 = -1;
  std::uint64_t launches = 0, growth = 0;
  double idle_s = 0;
  int spin_iters = 0;
  std::optional<unsigned> engine_queues;  // opencl.queues of every engine a figure does not size itself (nullopt: "auto")
  std::optional<unsigned> engine_spin_us;  // opencl.spin_us of every engine, nullopt: "auto" (figures 3 and 5 also measure their own)
  uvcl::CommandEvents engine_events = uvcl::CommandEvents::Auto;  // opencl.command_events of every engine
  uvcl::CompletionMode engine_completion = uvcl::CompletionMode::Auto;  // opencl.completion of every engine
  std::optional<unsigned> engine_loop_budget_us;                   // opencl.loop_budget_us of every engine
  std::optional<unsigned> engine_read_burst_us;                    // opencl.read_burst_us of every engine
  std::optional<unsigned> engine_window;                           // opencl.window of every engine
  std::optional<unsigned> engine_cross_copy_chunk_mib, engine_cross_copy_ring;  // of every engine
  std::optional<uvcl::CompileMode> engine_compile;                 // opencl.compile of every engine
  std::string cl_library;         // the OpenCL library of both sides (empty: the default names)
  std::vector<std::string> jobs;  // figure 11's job files
  unsigned job_passes = 0;        // 0: about 20000 launches' worth
  std::string argv;
};

struct Ctx {
  Options opt;
  std::unique_ptr<uvcl::cl::Library> lib;
  const uvcl::cl::Api* api = nullptr;
  std::vector<uvcl::cl::Device> devices;  // every platform, engine order
  std::size_t local = 0;                  // the device's index in a platform-restricted engine
  int spin_iters = 0;                     // work per ~100 us kernel (figure 2 calibrates)
  double spin_us = 0;
  UvclClTimingTakeFn cl_timing = nullptr;  // when the library is cl_timing/: its totals

  const uvcl::cl::Device& dev() const { return devices[opt.device]; }
  template <class T>
  T pick(T full, T quick, T smoke) const {
    return opt.smoke ? smoke : opt.quick ? quick : full;
  }
};

template <class T>
inline T must(Result<T> r, const std::string& what) {
  if (!r) fail(what + ": " + r.error().to_string());
  return std::move(r).value();
}
inline void must(Result<void> r, const std::string& what) {
  if (!r) fail(what + ": " + r.error().to_string());
}

// Engines see only the platform of the benchmarked device (so no other
// driver's threads run in the process); `local` is the device's index there.
inline std::unique_ptr<Engine> make_engine(const Ctx& c, unsigned queues = 0, const std::string& cache_dir = {},
                                           std::optional<std::vector<std::size_t>> platforms = std::nullopt,
                                           std::optional<unsigned> spin_us = std::nullopt,
                                           const std::function<void(uvcl::Config&)>& tweak = {}) {
  uvcl::Config cfg;
  cfg.queues = queues ? std::optional<unsigned>(queues) : c.opt.engine_queues;
  cfg.spin_us = spin_us ? spin_us : c.opt.engine_spin_us;  // nullopt: "auto"
  cfg.command_events = c.opt.engine_events;
  cfg.completion = c.opt.engine_completion;
  if (c.opt.engine_loop_budget_us) cfg.loop_budget_us = *c.opt.engine_loop_budget_us;
  if (c.opt.engine_read_burst_us) cfg.read_burst_us = *c.opt.engine_read_burst_us;
  if (c.opt.engine_window) cfg.window = *c.opt.engine_window;
  if (c.opt.engine_cross_copy_chunk_mib) cfg.cross_copy_chunk_mib = *c.opt.engine_cross_copy_chunk_mib;
  if (c.opt.engine_cross_copy_ring) cfg.cross_copy_ring = *c.opt.engine_cross_copy_ring;
  if (c.opt.engine_compile) cfg.compile = *c.opt.engine_compile;
  cfg.cache_dir = cache_dir;
  cfg.library = c.opt.cl_library;
  if (tweak) tweak(cfg);
  cfg.platform_ids = platforms ? *platforms : std::vector<std::size_t>{c.dev().info.platform_index};
  auto e = must(Engine::create(cfg), "Engine::create");
  if (!platforms && (e->device_count() <= c.local || e->device(c.local)->name != c.dev().info.name))
    fail("engine device " + std::to_string(c.local) + " is not the benchmarked device");
  return e;
}

// Time spent in each driver call since the last call, per `launches`
// launches: {"clEnqueueNDRangeKernel": {"per_launch": calls, "us_per_launch":
// time}, ...} plus "us_per_launch" over all calls. Empty without
// --cl-library pointing at the timing library.
inline Json driver_time(const Ctx& c, double launches) {
  Json out = Json::object();
  if (!c.cl_timing) return out;
  std::vector<UvclClTiming> t(64);
  t.resize(std::min(t.size(), c.cl_timing(t.data(), t.size())));
  double total_ns = 0;
  for (const UvclClTiming& e : t) {
    if (e.calls == 0) continue;
    Json row = Json::object();
    row["per_launch"] = static_cast<double>(e.calls) / launches;
    row["us_per_launch"] = static_cast<double>(e.ns) / 1e3 / launches;
    row["us_per_call"] = static_cast<double>(e.ns) / 1e3 / static_cast<double>(e.calls);
    out[e.name] = std::move(row);
    total_ns += static_cast<double>(e.ns);
  }
  out["us_per_launch"] = total_ns / 1e3 / launches;
  return out;
}

// The compute queues an engine made by make_engine(c) has on the benchmarked device.
// The engine's counters between two snapshots, per `n` (passes, iterations).
inline Json counters_per(const uvcl::EngineStats& a, const uvcl::EngineStats& b, double n) {
  auto per = [n](std::uint64_t x, std::uint64_t y) { return static_cast<double>(y - x) / n; };
  Json out = Json::object();
  out["cross_queue_waits"] = per(a.cross_queue_waits, b.cross_queue_waits);
  out["events"] = per(a.events, b.events);
  out["fences"] = per(a.fences, b.fences);
  out["flushes"] = per(a.flushes, b.flushes);
  out["status_queries"] = per(a.status_queries, b.status_queries);
  out["callbacks"] = per(a.callbacks, b.callbacks);
  out["polls"] = per(a.polls, b.polls);
  return out;
}

inline unsigned default_queues(const Ctx& c) {
  return c.opt.engine_queues.value_or(c.dev().info.type == uvcl::DeviceType::Cpu ? uvcl::kAutoCpuQueues
                                                                                 : uvcl::kAutoGpuQueues);
}

inline Json make_figure(const std::string& id, const std::string& title) {
  Json f = Json::object();
  f["id"] = id;
  f["title"] = title;
  f["rows"] = Json::array();
  f["columns"] = Json::object();
  return f;
}

inline Json& add_row(Json& fig, const std::string& key, const std::string& label, const std::string& unit,
                     bool higher_better) {
  Json r = Json::object();
  r["key"] = key;
  r["label"] = label;
  r["unit"] = unit;
  r["better"] = higher_better ? "higher" : "lower";
  fig["rows"].push(std::move(r));
  return fig["rows"].back();
}

inline void column(Json& fig, const std::string& key, const std::string& label) { fig["columns"][key] = label; }

// Figure 11: real workloads (fig_job.cpp), one job file per --job.
Json fig11(Ctx& c);
// Figure 12: DAG makespan against one queue, a hand schedule and the lower bound (fig_dag.cpp).
Json fig12(Ctx& c);

}  // namespace bench
