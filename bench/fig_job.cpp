// fig_job.cpp — figure 11: real workloads.
//
// A job file's launch list (repeats expanded) is replayed `passes` times, after
// one warm-up pass, four ways: uvcl with its default queues, uvcl with one
// queue, the bare API on one in-order queue without events (what a framework's
// own OpenCL loop does), and the bare API on as many queues as uvcl's default,
// launch i on queue i % n, with an event per launch and the waits its buffer
// hazards need (a hand-written multi-queue loop). Every way starts from the job's
// initial buffers and makes the same passes, so their outputs must be equal to
// the byte; a pass's outputs also equal the warm-up's where the job is
// idempotent (a forward pass is), which the figure reports.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_cl.hpp"
#include "bench_figure.hpp"
#include "engine/job_runner.hpp"
#include "json/job.hpp"

namespace bench {
namespace {

namespace job = uvcl::job;
using Bytes = std::vector<std::byte>;

// The job prepared on `e`: kernels built, buffers initialised.
std::shared_ptr<job::PreparedJob> prepare(Engine& e, const job::Job& j, const std::string& base_dir) {
  job::RunOptions opts;
  opts.base_dir = base_dir;
  std::shared_ptr<job::PreparedJob> prepared;
  std::optional<uvcl::Error> error;
  must(job::prepare_job(e, j, opts,
                        [&](Result<std::shared_ptr<job::PreparedJob>> r) {
                          if (r) prepared = std::move(r).value();
                          else error = r.error();
                        }),
       "prepare_job");
  must(e.run_until([&] { return prepared || error; }), "run_until(prepared)");
  if (error) fail("prepare_job: " + error->to_string());
  must(e.finish(), "finish(prepared)");
  return prepared;
}

Bytes read_all(Engine& e, uvcl::Buffer b) {
  auto got = must(e.read_sync(b, 0, must(e.buffer_size(b), "buffer_size")), "read_sync");
  return {got.begin(), got.end()};
}

std::uint64_t launches_per_pass(const job::Job& j) {
  std::uint64_t n = 0;
  for (const job::Launch& l : j.launches) n += l.repeat;
  return n;
}

struct Timed {
  double pass_ms = 0;
  // Host time of the timed passes' calls (e.launch; clSetKernelArg and
  // clEnqueueNDRangeKernel), before the wait for the device: what a launch
  // costs the submitting thread.
  double submit_us_per_launch = 0;
  std::vector<Bytes> warm_up_outputs, outputs;
  Json per_pass = Json::object();  // uvcl: the engine's counters per timed pass
  // With the timing library: host time per driver call per launch, while
  // submitting and in the wait for the device after it.
  Json driver_submit = Json::object(), driver_wait = Json::object();
};

// Starts the timed passes: drops the driver time counted so far.
std::uint64_t start_timed(const Ctx& c) {
  (void)driver_time(c, 1);
  return now_ns();
}

void end_submission(const Ctx& c, const job::Job& j, unsigned passes, std::uint64_t t0, Timed& t) {
  const double launches = static_cast<double>(passes * launches_per_pass(j));
  t.submit_us_per_launch = us_since(t0) / launches;
  t.driver_submit = driver_time(c, launches);
}

void end_wait(const Ctx& c, const job::Job& j, unsigned passes, std::uint64_t t0, Timed& t) {
  t.pass_ms = us_since(t0) / 1e3 / passes;
  t.driver_wait = driver_time(c, static_cast<double>(passes * launches_per_pass(j)));
}

// uvcl: the prepared launches, in job order, each `repeat` times.
Timed run_uvcl(const Ctx& c, const job::Job& j, const std::string& base_dir, unsigned queues, unsigned passes,
               std::vector<Bytes>* initial) {
  auto eng = make_engine(c, queues);
  Engine& e = *eng;
  auto prepared = prepare(e, j, base_dir);
  if (initial)
    for (uvcl::Buffer b : prepared->buffers()) initial->push_back(read_all(e, b));
  const auto& launches = prepared->launches();
  auto pass = [&] {
    for (std::size_t i = 0; i < launches.size(); ++i)
      for (std::uint64_t r = 0; r < j.launches[i].repeat; ++r) must(e.launch(launches[i]), "launch");
  };
  auto outputs = [&] {
    std::vector<Bytes> out;
    for (std::size_t o : j.outputs) out.push_back(read_all(e, prepared->buffers()[o]));
    return out;
  };
  Timed t;
  pass();
  t.warm_up_outputs = outputs();
  const uvcl::EngineStats s0 = e.stats();
  const std::uint64_t t0 = start_timed(c);
  for (unsigned p = 0; p < passes; ++p) pass();
  end_submission(c, j, passes, t0, t);
  must(e.finish(), "finish");
  end_wait(c, j, passes, t0, t);
  const uvcl::EngineStats s1 = e.stats();
  auto per = [&](std::uint64_t a, std::uint64_t b) { return static_cast<double>(b - a) / passes; };
  t.per_pass["cross_queue_waits"] = per(s0.cross_queue_waits, s1.cross_queue_waits);
  t.per_pass["fences"] = per(s0.fences, s1.fences);
  t.per_pass["events"] = per(s0.events, s1.events);
  t.per_pass["status_queries"] = per(s0.status_queries, s1.status_queries);
  t.per_pass["flushes"] = per(s0.flushes, s1.flushes);
  t.outputs = outputs();
  return t;
}

std::string kernel_source(const job::Kernel& k, const std::string& base_dir) {
  if (k.file.empty()) return k.source;
  std::ifstream f(std::filesystem::path(base_dir) / k.file, std::ios::binary);
  if (!f) fail("cannot read kernel file " + k.file);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The bare API. `queues` == 1: no events; more: round-robin with waits.
Timed run_bare(const Ctx& c, const job::Job& j, const std::string& base_dir, const std::vector<Bytes>& initial,
               unsigned queues, unsigned passes) {
  Bare b(*c.api, c.dev(), queues);
  std::vector<cl_kernel> kernels;
  for (const job::Kernel& k : j.kernels) {
    cl_program p = b.build(kernel_source(k, base_dir), true, k.options);
    kernels.push_back(b.kernel(p, (k.entry.empty() ? k.name : k.entry).c_str()));
  }
  std::vector<cl_mem> mems;
  for (const Bytes& init : initial) {
    mems.push_back(b.buffer(init.size()));
    ck(b.api.clEnqueueWriteBuffer(b.q(), mems.back(), CL_TRUE, 0, init.size(), init.data(), 0, nullptr, nullptr),
       "clEnqueueWriteBuffer");
  }
  // Which buffer arguments a launch writes: every pointer not to const.
  std::vector<std::vector<bool>> writes(j.launches.size());
  for (std::size_t i = 0; i < j.launches.size(); ++i)
    for (std::size_t a = 0; a < j.launches[i].args.size(); ++a) {
      cl_kernel_arg_type_qualifier q = 0;
      ck(b.api.clGetKernelArgInfo(kernels[j.launches[i].kernel], static_cast<cl_uint>(a),
                                  CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof q, &q, nullptr),
         "clGetKernelArgInfo");
      writes[i].push_back((q & CL_KERNEL_ARG_TYPE_CONST) == 0);
    }

  // Hazards for the round-robin way: per buffer its last writer and the
  // readers since, as (event, queue).
  struct Use {
    cl_event ev;
    std::size_t queue;
  };
  struct Hazard {
    std::optional<Use> writer;
    std::vector<Use> readers;
  };
  std::vector<Hazard> hazards(mems.size());
  std::vector<cl_event> live;  // released once the replay has finished
  std::size_t next_queue = 0;
  auto launch = [&](std::size_t i) {
    const job::Launch& l = j.launches[i];
    cl_kernel k = kernels[l.kernel];
    std::vector<cl_event> waits;
    const std::size_t q = queues == 1 ? 0 : next_queue++ % queues;
    auto wait = [&](const Use& u) {
      if (u.queue != q) waits.push_back(u.ev);
    };
    for (std::size_t a = 0; a < l.args.size(); ++a) {
      const job::Arg& arg = l.args[a];
      const auto ai = static_cast<cl_uint>(a);
      if (arg.kind == job::Arg::Kind::Buffer) {
        b.arg(k, ai, mems[arg.buffer]);
        if (queues == 1) continue;
        Hazard& h = hazards[arg.buffer];
        if (h.writer) wait(*h.writer);
        if (writes[i][a])
          for (const Use& r : h.readers) wait(r);
      } else if (arg.kind == job::Arg::Kind::Scalar) {
        ck(b.api.clSetKernelArg(k, ai, arg.scalar.size(), arg.scalar.bytes.data()), "clSetKernelArg");
      } else {
        ck(b.api.clSetKernelArg(k, ai, arg.local_bytes, nullptr), "clSetKernelArg(local)");
      }
    }
    std::vector<std::size_t> global(l.global.begin(), l.global.end()), local(l.local.begin(), l.local.end());
    cl_event ev = nullptr;
    for (std::uint64_t r = 0; r < l.repeat; ++r) {
      if (ev) b.api.clReleaseEvent(ev);  // an in-order queue: the last repeat's event stands for all
      ck(b.api.clEnqueueNDRangeKernel(b.q(q), k, static_cast<cl_uint>(global.size()), nullptr, global.data(),
                                      local.empty() ? nullptr : local.data(), static_cast<cl_uint>(waits.size()),
                                      waits.empty() ? nullptr : waits.data(), queues == 1 ? nullptr : &ev),
         "clEnqueueNDRangeKernel");
    }
    if (!ev) return;
    live.push_back(ev);
    for (std::size_t a = 0; a < l.args.size(); ++a) {
      if (l.args[a].kind != job::Arg::Kind::Buffer) continue;
      Hazard& h = hazards[l.args[a].buffer];
      if (writes[i][a]) {
        h.writer = Use{ev, q};
        h.readers.clear();
      } else {
        h.readers.push_back(Use{ev, q});
      }
    }
  };
  auto pass = [&] {
    for (std::size_t i = 0; i < j.launches.size(); ++i) launch(i);
  };
  auto settle = [&] {
    b.finish();
    for (Hazard& h : hazards) h = Hazard{};
    for (cl_event ev : live) b.api.clReleaseEvent(ev);
    live.clear();
  };
  auto outputs = [&] {
    std::vector<Bytes> out;
    for (std::size_t o : j.outputs) {
      Bytes bytes(initial[o].size());
      ck(b.api.clEnqueueReadBuffer(b.q(), mems[o], CL_TRUE, 0, bytes.size(), bytes.data(), 0, nullptr, nullptr),
         "clEnqueueReadBuffer");
      out.push_back(std::move(bytes));
    }
    return out;
  };
  Timed t;
  pass();
  settle();
  t.warm_up_outputs = outputs();
  const std::uint64_t t0 = start_timed(c);
  for (unsigned p = 0; p < passes; ++p) pass();
  end_submission(c, j, passes, t0, t);
  settle();  // the events of every pass live until here, as a hand-written loop would keep them
  end_wait(c, j, passes, t0, t);
  t.outputs = outputs();
  return t;
}

}  // namespace

Json fig11(Ctx& c) {
  Json fig = make_figure("11", "Real workloads: a job's launches replayed");
  column(fig, "uvcl", "uvcl (default queues: " + std::to_string(default_queues(c)) + ")");
  column(fig, "uvcl1", "uvcl (1 queue)");
  column(fig, "bare", "bare, 1 in-order queue, no events");
  column(fig, "bare_rr", "bare, 8 queues round-robin, an event per launch and hazard waits");
  if (c.opt.jobs.empty()) {
    fig["skipped"] = "no --job given";
    return fig;
  }
  constexpr unsigned kRoundRobinQueues = 8;
  Json jobs = Json::array();
  for (const std::string& path : c.opt.jobs) {
    const job::Job j = must(job::load_job_file(path), "load_job_file " + path);
    const std::string base_dir = std::filesystem::path(path).parent_path().string();
    const std::string name = std::filesystem::path(path).stem().string();
    const std::uint64_t per_pass = launches_per_pass(j);
    const std::uint64_t budget = c.pick<std::uint64_t>(20000, 2000, 50);
    const unsigned passes = c.opt.job_passes
                                ? c.opt.job_passes
                                : static_cast<unsigned>(std::clamp<std::uint64_t>(budget / std::max<std::uint64_t>(per_pass, 1), 2, 1000));
    std::vector<Bytes> initial;
    const Timed u = run_uvcl(c, j, base_dir, 0, passes, &initial);  // 0: the default queue count
    const Timed u1 = run_uvcl(c, j, base_dir, 1, passes, nullptr);
    const Timed bare = run_bare(c, j, base_dir, initial, 1, passes);
    const Timed rr = run_bare(c, j, base_dir, initial, kRoundRobinQueues, passes);
    for (const auto& [way, t] : {std::pair<const char*, const Timed*>{"uvcl (1 queue)", &u1},
                                 {"bare (1 queue)", &bare}, {"bare (round-robin)", &rr}})
      if (t->outputs != u.outputs) fail(name + ": " + way + " outputs differ from uvcl's after the same passes");
    Json& row = add_row(fig, "11." + name, name + ": one pass (" + std::to_string(per_pass) + " launches)", "ms",
                        false);
    row["uvcl"] = u.pass_ms;
    row["uvcl1"] = u1.pass_ms;
    row["bare"] = bare.pass_ms;
    row["bare_rr"] = rr.pass_ms;
    Json info = Json::object();
    info["job"] = name;
    info["launches_per_pass"] = per_pass;
    info["kernels"] = j.kernels.size();
    info["buffers"] = j.buffers.size();
    info["passes"] = static_cast<double>(passes);
    info["idempotent"] = u.outputs == u.warm_up_outputs;
    info["uvcl_per_pass"] = u.per_pass;
    info["uvcl1_per_pass"] = u1.per_pass;
    Json submit = Json::object();
    submit["uvcl"] = u.submit_us_per_launch;
    submit["uvcl1"] = u1.submit_us_per_launch;
    submit["bare"] = bare.submit_us_per_launch;
    submit["bare_rr"] = rr.submit_us_per_launch;
    info["submit_us_per_launch"] = std::move(submit);
    if (c.cl_timing) {
      Json driver = Json::object();
      for (const auto& [way, t] : {std::pair<const char*, const Timed*>{"uvcl", &u}, {"uvcl1", &u1},
                                   {"bare", &bare}, {"bare_rr", &rr}}) {
        driver[way]["submit"] = t->driver_submit;
        driver[way]["wait"] = t->driver_wait;
      }
      info["driver_per_launch"] = std::move(driver);
    }
    jobs.push(std::move(info));
  }
  fig["jobs"] = std::move(jobs);
  fig["params"]["queues"] = default_queues(c);
  fig["params"]["round_robin_queues"] = kRoundRobinQueues;
  return fig;
}

}  // namespace bench
