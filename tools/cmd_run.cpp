// uvcl run JOB.json: executes a job, prints one JSON object.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <unistd.h>
#include <uv.h>

#include "cli.hpp"
#include "program/job_runner.hpp"
#include "program/kernel_library.hpp"
#include "program/job.hpp"
#include "json/json_util.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::cli {
namespace {

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Progress on stderr while a job runs, when stderr is a terminal: launches
// done / total and the rate, redrawn at most 10 times a second, from a timer
// on the engine's loop polling Engine::stats(). Done = launches enqueued
// minus commands not yet completed (in windows or in flight): an estimate
// that never counts a launch early by more than the job's other commands.
// Shown once the job has run for half a second; the line is cleared at the end.
class Progress {
 public:
  Progress(Engine& e, std::uint64_t total) : engine_(e), total_(total) {
    if (total_ == 0 || !::isatty(2)) return;
    timer_ = new uv_timer_t;
    uv_timer_init(e.loop(), timer_);
    timer_->data = this;
    uv_timer_start(timer_, [](uv_timer_t* t) { static_cast<Progress*>(t->data)->tick(); }, 100, 100);
    uv_unref(reinterpret_cast<uv_handle_t*>(timer_));  // never keeps the loop alive
    start_ns_ = uv_hrtime();
    base_ = e.stats().launches;
  }
  ~Progress() {
    if (!timer_) return;
    uv_timer_stop(timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    if (shown_) std::fputs("\r\033[K", stderr);
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  void tick() {
    const std::uint64_t now = uv_hrtime();
    const EngineStats s = engine_.stats();
    const std::uint64_t enqueued = s.launches - base_;
    if (enqueued > 0 && launch_ns_ == 0) launch_ns_ = now;  // the rate counts from the first launch
    if (now - start_ns_ < 500'000'000) return;
    const std::uint64_t open = s.in_flight + s.pending;
    std::uint64_t done = enqueued > open ? enqueued - open : 0;
    if (done > total_) done = total_;
    const double secs = launch_ns_ ? static_cast<double>(now - launch_ns_) / 1e9 : 0;
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    const double percent = 100.0 * static_cast<double>(done) / static_cast<double>(total_);
    std::fprintf(stderr, "\r\033[Kuvcl: launches %llu/%llu (%.0f%%), %.*f/s", static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total_), percent, rate < 10 ? 1 : 0, rate);
    std::fflush(stderr);
    shown_ = true;
  }

  Engine& engine_;
  std::uint64_t total_;
  uv_timer_t* timer_ = nullptr;
  std::uint64_t start_ns_ = 0, launch_ns_ = 0, base_ = 0;
  bool shown_ = false;
};

// --out DIR: the folder is made if missing, and every output must be a
// plain file name, checked before the job runs: a buffer named "../../x"
// was written outside DIR.
Result<void> prepare_out_dir(const std::string& dir, const job::Job& job) {
  for (std::size_t o : job.outputs) {
    const std::string& name = job.buffers[o].name;
    if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
      return Error{Status::InvalidArgument, "--out " + dir + ": output " + json::quote(name) +
                                                " is not a plain file name (NAME.npy would be written outside " +
                                                dir + ")"};
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{Status::Io, "--out " + dir + ": cannot create the folder: " + ec.message()};
  if (!std::filesystem::is_directory(dir, ec))
    return Error{Status::Io, "--out " + dir + ": not a folder"};
  return {};
}

}  // namespace

int cmd_run(const Args& a, const uvcl::Config& config) {
  auto job = uvcl::job::load_job_file(a.positional.at(0));
  if (!job) return fail(job.error());
  if (!a.out.empty())
    if (auto out = prepare_out_dir(a.out, job.value()); !out) return fail(out.error());
  uvcl::Config cfg = config;
  if (!a.trace.empty()) cfg.profile = true;  // device start/end times in the trace
  auto engine = uvcl::Engine::create(cfg);
  if (!engine) return fail(engine.error());
  // --kernels DIR: launches may name "FILE:ENTRY" of the folder, as with
  // uvcl serve. Declared after the engine: its programs go first.
  std::unique_ptr<uvcl::job::KernelLibrary> library;
  if (auto dir = a.values.find("--kernels"); dir != a.values.end()) {
    if (dir->second.empty()) return fail(uvcl::Error{uvcl::Status::InvalidArgument, "--kernels: expected a folder, got ''"});
    auto loaded = uvcl::job::KernelLibrary::load(*engine.value(), dir->second, "--kernels");
    if (!loaded) return fail(loaded.error());
    library = std::move(loaded.value());
  }
  uvcl::job::RunOptions opts;
  opts.library = library.get();
  opts.device = a.device;
  opts.base_dir = dir_of(a.positional.at(0));
  opts.record_schedule = !a.schedule.empty();
  if (!a.trace.empty()) engine.value()->set_tracing(true);
  std::uint64_t total_launches = 0;
  for (const auto& l : job->launches)  // for the progress line only: run_job refuses a sum past 2^64
    if (__builtin_add_overflow(total_launches, l.repeat, &total_launches)) total_launches = UINT64_MAX;
  std::optional<Progress> progress;
  if (!a.quiet) progress.emplace(*engine.value(), total_launches);
  auto result = uvcl::job::run_job_sync(*engine.value(), std::move(job.value()), opts);
  progress.reset();
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
  if (a.no_outputs) result->outputs.clear();  // written to --out above; not printed
  const std::string json = uvcl::job::result_json(*engine.value(), result.value());
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace uvcl::cli
