// fig_job.cpp — figure 11: real workloads.
//
// A job file's launch list (repeats expanded) is replayed, after one warm-up
// pass, in rounds of `passes` passes, four ways taking turns round by round
// (the host's speed drifts; a way's pass time is its median round): uvcl with its default queues, uvcl with one
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
#include "program/job_runner.hpp"
#include "program/job.hpp"

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

// One way's timed round.
struct Round {
  double pass_ms = 0;
  // Host time of the round's calls (e.launch; clSetKernelArg and
  // clEnqueueNDRangeKernel), before the wait for the device: what a launch
  // costs the submitting thread.
  double submit_us_per_launch = 0;
  // With the timing library: host time per driver call per launch, while
  // submitting and in the wait for the device after it.
  Json driver_submit = Json::object(), driver_wait = Json::object();
};

// Times one round: `submit` issues the passes, `wait` waits for the device.
template <class Submit, class Wait>
Round timed_round(const Ctx& c, const job::Job& j, unsigned passes, Submit&& submit, Wait&& wait) {
  const double launches = static_cast<double>(passes * launches_per_pass(j));
  Round r;
  (void)driver_time(c, 1);  // drops what was counted before the round
  const std::uint64_t t0 = now_ns();
  submit();
  r.submit_us_per_launch = us_since(t0) / launches;
  r.driver_submit = driver_time(c, launches);
  wait();
  r.pass_ms = us_since(t0) / 1e3 / passes;
  r.driver_wait = driver_time(c, launches);
  return r;
}

// uvcl: the prepared launches, in job order, each `repeat` times.
class UvclWay {
 public:
  UvclWay(const Ctx& c, const job::Job& j, const std::string& base_dir, unsigned queues)
      : c_(c), j_(j), engine_(make_engine(c, queues)), prepared_(prepare(*engine_, j, base_dir)) {}

  std::vector<Bytes> buffers() {
    std::vector<Bytes> out;
    for (uvcl::Buffer b : prepared_->buffers()) out.push_back(read_all(*engine_, b));
    return out;
  }
  std::vector<Bytes> outputs() {
    std::vector<Bytes> out;
    for (std::size_t o : j_.outputs) out.push_back(read_all(*engine_, prepared_->buffers()[o]));
    return out;
  }
  void warm_up() {
    pass();
    must(engine_->finish(), "finish");
    stats0_ = engine_->stats();
  }
  Round round(unsigned passes) {
    passes_ += passes;
    return timed_round(
        c_, j_, passes,
        [&] {
          for (unsigned p = 0; p < passes; ++p) pass();
        },
        [&] { must(engine_->finish(), "finish"); });
  }
  // The engine's counters per timed pass, over all rounds.
  Json per_pass() const { return counters_per(stats0_, engine_->stats(), static_cast<double>(passes_)); }

 private:
  void pass() {
    const auto& launches = prepared_->launches();
    for (std::size_t i = 0; i < launches.size(); ++i)
      for (std::uint64_t r = 0; r < j_.launches[i].repeat; ++r) must(engine_->launch(launches[i]), "launch");
  }

  const Ctx& c_;
  const job::Job& j_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<job::PreparedJob> prepared_;
  uvcl::EngineStats stats0_{};
  double passes_ = 0;
};

std::string kernel_source(const job::Kernel& k, const std::string& base_dir) {
  if (k.file.empty()) return k.source;
  std::ifstream f(std::filesystem::path(base_dir) / k.file, std::ios::binary);
  if (!f) fail("cannot read kernel file " + k.file);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The bare API. `queues` == 1: no events; more: round-robin with waits.
class BareWay {
 public:
  BareWay(const Ctx& c, const job::Job& j, const std::string& base_dir, const std::vector<Bytes>& initial,
          unsigned queues)
      : c_(c), j_(j), b_(*c.api, c.dev(), queues), queues_(queues), sizes_(initial.size()) {
    for (const job::Kernel& k : j.kernels) {
      cl_program p = b_.build(kernel_source(k, base_dir), true, k.options);
      kernels_.push_back(b_.kernel(p, (k.entry.empty() ? k.name : k.entry).c_str()));
    }
    for (std::size_t i = 0; i < initial.size(); ++i) {
      sizes_[i] = initial[i].size();
      mems_.push_back(b_.buffer(sizes_[i]));
      ck(b_.api.clEnqueueWriteBuffer(b_.q(), mems_.back(), CL_TRUE, 0, sizes_[i], initial[i].data(), 0, nullptr,
                                     nullptr),
         "clEnqueueWriteBuffer");
    }
    // Which buffer arguments a launch writes: every pointer not to const.
    writes_.resize(j.launches.size());
    for (std::size_t i = 0; i < j.launches.size(); ++i)
      for (std::size_t a = 0; a < j.launches[i].args.size(); ++a) {
        cl_kernel_arg_type_qualifier q = 0;
        ck(b_.api.clGetKernelArgInfo(kernels_[j.launches[i].kernel], static_cast<cl_uint>(a),
                                     CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof q, &q, nullptr),
           "clGetKernelArgInfo");
        writes_[i].push_back((q & CL_KERNEL_ARG_TYPE_CONST) == 0);
      }
    hazards_.resize(mems_.size());
  }

  std::vector<Bytes> outputs() {
    std::vector<Bytes> out;
    for (std::size_t o : j_.outputs) {
      Bytes bytes(sizes_[o]);
      ck(b_.api.clEnqueueReadBuffer(b_.q(), mems_[o], CL_TRUE, 0, bytes.size(), bytes.data(), 0, nullptr, nullptr),
         "clEnqueueReadBuffer");
      out.push_back(std::move(bytes));
    }
    return out;
  }
  void warm_up() {
    pass();
    settle();
  }
  Round round(unsigned passes) {
    return timed_round(
        c_, j_, passes,
        [&] {
          for (unsigned p = 0; p < passes; ++p) pass();
        },
        [&] { settle(); });  // the events of every pass live until here, as a hand-written loop would keep them
  }

 private:
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

  void pass() {
    for (std::size_t i = 0; i < j_.launches.size(); ++i) launch(i);
  }
  void settle() {
    b_.finish();
    for (Hazard& h : hazards_) h = Hazard{};
    for (cl_event ev : live_) b_.api.clReleaseEvent(ev);
    live_.clear();
  }
  void launch(std::size_t i) {
    const job::Launch& l = j_.launches[i];
    cl_kernel k = kernels_[l.kernel];
    std::vector<cl_event> waits;
    const std::size_t q = queues_ == 1 ? 0 : next_queue_++ % queues_;
    auto wait = [&](const Use& u) {
      if (u.queue != q) waits.push_back(u.ev);
    };
    for (std::size_t a = 0; a < l.args.size(); ++a) {
      const job::Arg& arg = l.args[a];
      const auto ai = static_cast<cl_uint>(a);
      if (arg.kind == job::Arg::Kind::Buffer) {
        b_.arg(k, ai, mems_[arg.buffer]);
        if (queues_ == 1) continue;
        Hazard& h = hazards_[arg.buffer];
        if (h.writer) wait(*h.writer);
        if (writes_[i][a])
          for (const Use& r : h.readers) wait(r);
      } else if (arg.kind == job::Arg::Kind::Scalar) {
        ck(b_.api.clSetKernelArg(k, ai, arg.scalar.size(), arg.scalar.bytes.data()), "clSetKernelArg");
      } else {
        ck(b_.api.clSetKernelArg(k, ai, arg.local_bytes, nullptr), "clSetKernelArg(local)");
      }
    }
    std::vector<std::size_t> global(l.global.begin(), l.global.end()), local(l.local.begin(), l.local.end());
    cl_event ev = nullptr;
    for (std::uint64_t r = 0; r < l.repeat; ++r) {
      if (ev) b_.api.clReleaseEvent(ev);  // an in-order queue: the last repeat's event stands for all
      ck(b_.api.clEnqueueNDRangeKernel(b_.q(q), k, static_cast<cl_uint>(global.size()), nullptr, global.data(),
                                       local.empty() ? nullptr : local.data(), static_cast<cl_uint>(waits.size()),
                                       waits.empty() ? nullptr : waits.data(), queues_ == 1 ? nullptr : &ev),
         "clEnqueueNDRangeKernel");
    }
    if (!ev) return;
    live_.push_back(ev);
    for (std::size_t a = 0; a < l.args.size(); ++a) {
      if (l.args[a].kind != job::Arg::Kind::Buffer) continue;
      Hazard& h = hazards_[l.args[a].buffer];
      if (writes_[i][a]) {
        h.writer = Use{ev, q};
        h.readers.clear();
      } else {
        h.readers.push_back(Use{ev, q});
      }
    }
  }

  const Ctx& c_;
  const job::Job& j_;
  Bare b_;
  unsigned queues_;
  std::vector<std::size_t> sizes_;
  std::vector<cl_kernel> kernels_;
  std::vector<cl_mem> mems_;
  std::vector<std::vector<bool>> writes_;
  std::vector<Hazard> hazards_;
  std::vector<cl_event> live_;  // released once the round has finished
  std::size_t next_queue_ = 0;
};

// A way's rounds: the median round's times, and the last round's driver tables.
struct Rounds {
  std::vector<Round> all;
  double median(double Round::*field) const {
    std::vector<double> v;
    for (const Round& r : all) v.push_back(r.*field);
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
};

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
  const unsigned rounds = c.pick(7u, 3u, 1u);
  static constexpr const char* kWays[] = {"uvcl", "uvcl1", "bare", "bare_rr"};
  Json jobs = Json::array();
  for (const std::string& path : c.opt.jobs) {
    const job::Job j = must(job::load_job_file(path), "load_job_file " + path);
    const std::string base_dir = std::filesystem::path(path).parent_path().string();
    const std::string name = std::filesystem::path(path).stem().string();
    const std::uint64_t per_pass = launches_per_pass(j);
    const std::uint64_t budget = c.pick<std::uint64_t>(4000, 2000, 50);
    const unsigned passes = c.opt.job_passes
                                ? c.opt.job_passes
                                : static_cast<unsigned>(std::clamp<std::uint64_t>(budget / std::max<std::uint64_t>(per_pass, 1), 2, 300));
    UvclWay u(c, j, base_dir, 0);  // 0: the default queue count
    const std::vector<Bytes> initial = u.buffers();
    UvclWay u1(c, j, base_dir, 1);
    BareWay bare(c, j, base_dir, initial, 1);
    BareWay rr(c, j, base_dir, initial, kRoundRobinQueues);
    u.warm_up();
    const std::vector<Bytes> warm_up_outputs = u.outputs();
    u1.warm_up();
    bare.warm_up();
    rr.warm_up();
    std::array<Rounds, 4> got;
    for (unsigned r = 0; r < rounds; ++r) {  // the ways take turns
      got[0].all.push_back(u.round(passes));
      got[1].all.push_back(u1.round(passes));
      got[2].all.push_back(bare.round(passes));
      got[3].all.push_back(rr.round(passes));
    }
    const std::vector<Bytes> outputs = u.outputs();
    for (const auto& [way, other] : {std::pair<const char*, std::vector<Bytes>>{"uvcl (1 queue)", u1.outputs()},
                                     {"bare (1 queue)", bare.outputs()}, {"bare (round-robin)", rr.outputs()}})
      if (other != outputs) fail(name + ": " + way + " outputs differ from uvcl's after the same passes");
    Json& row = add_row(fig, "11." + name, name + ": one pass (" + std::to_string(per_pass) + " launches)", "ms",
                        false);
    Json info = Json::object();
    info["job"] = name;
    info["launches_per_pass"] = per_pass;
    info["kernels"] = j.kernels.size();
    info["buffers"] = j.buffers.size();
    info["passes"] = static_cast<double>(passes);
    info["rounds"] = rounds;
    info["idempotent"] = outputs == warm_up_outputs;
    info["uvcl_per_pass"] = u.per_pass();
    info["uvcl1_per_pass"] = u1.per_pass();
    Json submit = Json::object(), spread = Json::object(), driver = Json::object();
    for (std::size_t w = 0; w < got.size(); ++w) {
      row[kWays[w]] = got[w].median(&Round::pass_ms);
      submit[kWays[w]] = got[w].median(&Round::submit_us_per_launch);
      std::vector<double> ms;
      for (const Round& r : got[w].all) ms.push_back(r.pass_ms);
      spread[kWays[w]] = Json::array_of(ms);
      if (c.cl_timing) {
        driver[kWays[w]]["submit"] = got[w].all.back().driver_submit;
        driver[kWays[w]]["wait"] = got[w].all.back().driver_wait;
      }
    }
    info["submit_us_per_launch"] = std::move(submit);
    info["round_pass_ms"] = std::move(spread);
    if (c.cl_timing) info["driver_per_launch"] = std::move(driver);  // the last round's
    jobs.push(std::move(info));
  }
  fig["jobs"] = std::move(jobs);
  fig["params"]["queues"] = default_queues(c);
  fig["params"]["round_robin_queues"] = kRoundRobinQueues;
  fig["params"]["rounds"] = rounds;
  return fig;
}

}  // namespace bench
