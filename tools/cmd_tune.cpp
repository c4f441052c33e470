// uvcl tune JOB.json: times one launch of a job with each candidate local
// size (docs/tune.md) and prints a table and the fastest on stdout.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <optional>

#include "cli.hpp"
#include "program/job_runner.hpp"
#include "program/tune.hpp"
#include "program/job.hpp"
#include "json/json_util.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::cli {
namespace {

constexpr const char* kDefaultCandidates = "16,32,64,128,256,512,1024";

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// --warmup / --reps: a small non-negative integer.
Result<unsigned> count_option(const Args& a, const char* name, unsigned fallback, unsigned lo) {
  auto it = a.values.find(name);
  if (it == a.values.end()) return fallback;
  const std::string& v = it->second;
  if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos || std::stoul(v) < lo)
    return Error{Status::InvalidArgument, std::string(name) + ": expected an integer " + std::to_string(lo) +
                                              "..9999, got '" + v + "'"};
  return static_cast<unsigned>(std::stoul(v));
}

std::string global_text(const uvcl::Launch& l) {
  std::string s;
  for (std::size_t i = 0; i < l.global.size(); ++i) s += (i ? "x" : "") + std::to_string(l.global[i].items);
  return s;
}

std::string sizes_json(const std::vector<std::size_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// --json: the report as one JSON object (the fields `uvcl tune --help` lists).
std::string report_json(const uvcl::tune::Report& rep, const uvcl::Launch& launch, std::size_t index,
                        const std::string& kernel, std::size_t device, const DeviceInfo& dev,
                        const uvcl::tune::Options& o) {
  std::vector<std::size_t> global;
  for (const auto& g : launch.global) global.push_back(g.items);
  std::string out = "{\"launch\": " + std::to_string(index) + ", \"kernel\": " + json::quote(kernel) +
                    ", \"global\": " + sizes_json(global) + ", \"device\": " + std::to_string(device) +
                    ", \"device_name\": " + json::quote(dev.name) + ", \"warmup\": " + std::to_string(o.warmup) +
                    ", \"reps\": " + std::to_string(o.repetitions) + ", \"rows\": [";
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    const auto& m = rep.rows[i];
    out += std::string(i ? ",\n  " : "\n  ") + "{\"local\": " + sizes_json(m.local);
    if (m.ok()) {
      out += ", \"median_ns\": " + std::to_string(m.median_ns) + ", \"min_ns\": " + std::to_string(m.min_ns) +
             ", \"max_ns\": " + std::to_string(m.max_ns) + ", \"device_ns\": [";
      for (std::size_t r = 0; r < m.device_ns.size(); ++r) out += (r ? ", " : "") + std::to_string(m.device_ns[r]);
      out += "]}";
    } else {
      out += ", \"skipped\": " + json::quote(m.skipped) + "}";
    }
  }
  const auto& best = rep.rows[rep.fastest];
  return out + "],\n \"fastest\": {\"local\": " + sizes_json(best.local) +
         ", \"median_ns\": " + std::to_string(best.median_ns) + "}}";
}

}  // namespace

int cmd_tune(const Args& a, const uvcl::Config& config) {
  const std::string& path = a.positional.at(0);
  auto candidates = uvcl::tune::parse_candidates(a.local.empty() ? kDefaultCandidates : a.local);
  if (!candidates) return fail(std::move(candidates).error().context("--local"));
  uvcl::tune::Options topts;
  auto warmup = count_option(a, "--warmup", topts.warmup, 0);
  if (!warmup) return fail(warmup.error());
  auto reps = count_option(a, "--reps", topts.repetitions, 1);
  if (!reps) return fail(reps.error());
  topts.warmup = warmup.value();
  topts.repetitions = reps.value();

  auto job = uvcl::job::load_job_file(path);
  if (!job) return fail(job.error());
  const std::size_t index = a.launch.value_or(0);
  if (index >= job->launches.size())
    return fail(Error{Status::InvalidArgument, "--launch " + std::to_string(index) + ": " + path + " has " +
                                                   std::to_string(job->launches.size()) + " launches"});
  const std::string kernel_name = job->kernels[job->launches[index].kernel].name;
  auto engine = uvcl::Engine::create(config);
  if (!engine) return fail(engine.error());
  Engine& eng = *engine.value();

  uvcl::job::RunOptions opts;
  opts.device = a.device;
  opts.base_dir = dir_of(path);
  std::optional<Result<std::shared_ptr<uvcl::job::PreparedJob>>> prepared;
  if (auto r = uvcl::job::prepare_job(eng, std::move(job.value()), opts,
                                      [&](Result<std::shared_ptr<uvcl::job::PreparedJob>> p) {
                                        prepared = std::move(p);
                                      });
      !r)
    return fail(r.error());
  if (auto r = eng.run_until([&] { return prepared.has_value(); }); !r) return fail(r.error());
  if (!*prepared) return fail(prepared->error());
  std::shared_ptr<uvcl::job::PreparedJob> pj = std::move(prepared->value());
  const uvcl::Launch launch = pj->launches().at(index);
  const std::size_t device = pj->device();

  std::optional<Result<uvcl::tune::Report>> report;
  if (auto r = uvcl::tune::time_local_sizes(eng, launch, std::move(candidates.value()), topts,
                                            [&](Result<uvcl::tune::Report> rep) { report = std::move(rep); });
      !r)
    return fail(std::move(r).error().context("launches[" + std::to_string(index) + "] (kernel " + kernel_name + ")"));
  if (auto r = eng.run_until([&] { return report.has_value(); }); !r) return fail(r.error());
  pj.reset();  // the job's buffers and kernels go before the engine does
  if (!*report) return fail(report->error());
  const uvcl::tune::Report& rep = report->value();
  if (rep.fastest >= rep.rows.size()) {
    std::string why;
    for (const auto& m : rep.rows) why += "\n  " + uvcl::tune::local_text(m.local) + ": " + m.skipped;
    return fail(Error{Status::KernelLaunch, "tune: launches[" + std::to_string(index) + "] (kernel " + kernel_name +
                                                "): no local size candidate ran:" + why});
  }

  const DeviceInfo dev = *eng.device(device);
  if (a.json) {
    std::printf("%s\n", report_json(rep, launch, index, kernel_name, device, dev, topts).c_str());
    return 0;
  }
  std::printf("launch %zu (kernel %s), global %s, device %zu (%s): %u warm-up + %u timed runs per local size\n", index,
              kernel_name.c_str(), global_text(launch).c_str(), device, dev.name.c_str(), topts.warmup,
              topts.repetitions);
  std::printf("%-12s %12s %12s %12s\n", "local", "median_ns", "min_ns", "max_ns");
  for (const auto& m : rep.rows) {
    const std::string local = uvcl::tune::local_text(m.local);
    if (m.ok())
      std::printf("%-12s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n", local.c_str(), m.median_ns, m.min_ns,
                  m.max_ns);
    else
      std::printf("%-12s skipped: %s\n", local.c_str(), m.skipped.c_str());
  }
  const auto& best = rep.rows[rep.fastest];
  std::printf("fastest: %s (median %" PRIu64 " ns)\n", uvcl::tune::local_text(best.local).c_str(), best.median_ns);
  return 0;
}

}  // namespace uvcl::cli
