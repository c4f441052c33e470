// uvcl run JOB.json: executes a job, prints one JSON object.
#include <cstdio>
#include <fstream>

#include "cli.hpp"
#include "engine/job_runner.hpp"
#include "json/job.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::cli {
namespace {

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

int cmd_run(const Args& a, const uvcl::Config& config) {
  auto job = uvcl::job::load_job_file(a.positional.at(0));
  if (!job) return fail(job.error());
  uvcl::Config cfg = config;
  if (!a.trace.empty()) cfg.profile = true;  // device start/end times in the trace
  auto engine = uvcl::Engine::create(cfg);
  if (!engine) return fail(engine.error());
  uvcl::job::RunOptions opts;
  opts.device = a.device;
  opts.base_dir = dir_of(a.positional.at(0));
  opts.record_schedule = !a.schedule.empty();
  if (!a.trace.empty()) engine.value()->set_tracing(true);
  auto result = uvcl::job::run_job_sync(*engine.value(), std::move(job.value()), opts);
  if (!result) return fail(result.error());
  if (!a.schedule.empty()) {
    std::ofstream s(a.schedule, std::ios::binary);
    s << result->schedule_json;
    if (!s) return fail(uvcl::Error{uvcl::Status::Io, "cannot write schedule " + a.schedule});
  }
  if (!a.trace.empty()) {
    std::ofstream t(a.trace, std::ios::binary);
    t << engine.value()->trace_json();
    if (!t) return fail(uvcl::Error{uvcl::Status::Io, "cannot write trace " + a.trace});
  }
  if (!a.out.empty()) {
    for (const auto& o : result->outputs)
      if (auto w = uvcl::job::write_npy(a.out + "/" + o.name + ".npy", o); !w) return fail(w.error());
  }
  const std::string json = uvcl::job::result_json(*engine.value(), result.value());
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace uvcl::cli
