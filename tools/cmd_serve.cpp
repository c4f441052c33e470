// uvcl serve: an HTTP/1.1 front end to the engine, on ONE libuv loop.
//
// The engine and the HTTP server share the loop this command runs. Jobs are
// started with job::run_job (asynchronous) and answered from its callback:
// nothing here waits for a device, so a slow job delays no other client.
// docs/serve.md has the endpoints, limits, status codes and metrics.
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>
#include <sys/stat.h>

#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>
#include <string>

#include <uv.h>

#include "answer_budget.hpp"
#include "cl/devices.hpp"
#include "program/device_json.hpp"
#include "cli.hpp"
#include "program/job_runner.hpp"
#include "program/kernel_library.hpp"
#include "files.hpp"
#include "program/http/server.hpp"
#include "job_answer.hpp"
#include "program/job.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::cli {
namespace {

constexpr std::uint64_t kLagPeriodMs = 10;
constexpr std::uint64_t kMaxTokenFileBytes = 4096;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 7070;
  std::string token;  // empty: no authentication
  http::Limits limits;
  std::size_t max_jobs = 16;
  std::uint64_t max_buffer_bytes = 256ull << 20;
  std::uint64_t max_launches = 10'000;
  std::uint64_t max_work_items = 1ull << 32;  // per launch; 0: only the 64-bit bound
  std::string kernels_dir;    // --kernels: the server's own kernels, "FILE:ENTRY" in a launch
  bool allow_source = false;  // --allow-source: jobs may carry kernel sources
  std::uint64_t job_timeout_ms = 30'000;
  std::uint64_t max_response_bytes = 64ull << 20;  // 0: no limit
  std::uint64_t answer_budget = 1ull << 30;        // bytes held for answers not yet sent, all jobs
};

// Reserved per answer beyond its outputs' bytes: the piece being formatted
// and its headers (job_answer.cpp writes pieces of 64 KiB or so).
constexpr std::uint64_t kAnswerPieceReserve = 256u << 10;

// Chunks of launches (job::RunOptions::launches_per_turn each) a job keeps
// enqueued ahead of the device: what a cancelled job leaves behind.
constexpr std::uint64_t kChunksAhead = 2;

Error usage_error(std::string message) { return Error{Status::InvalidArgument, std::move(message)}; }

// A count in [min, max], optionally with a binary suffix (k, M, G, T:
// 1024-based). Strict: a value that does not fit 64 bits, or that the
// suffix pushes past them ("17179869184G" is 2^64), or that is out of
// range is an error naming the option and the value, never a wrapped
// number (0 means "no limit" for some options).
Result<std::uint64_t> parse_number(const std::string& flag, const std::string& v, bool suffixes, std::uint64_t min,
                                   std::uint64_t max) {
  std::size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  std::uint64_t mult = 1;
  const std::string rest = v.substr(digits);
  if (suffixes && !rest.empty()) {
    if (rest == "k" || rest == "K" || rest == "KiB") mult = 1ull << 10;
    else if (rest == "m" || rest == "M" || rest == "MiB") mult = 1ull << 20;
    else if (rest == "g" || rest == "G" || rest == "GiB") mult = 1ull << 30;
    else if (rest == "t" || rest == "T" || rest == "TiB") mult = 1ull << 40;
    else mult = 0;
  } else if (!rest.empty()) {
    mult = 0;
  }
  if (digits == 0 || mult == 0)
    return usage_error(flag + ": expected " + (suffixes ? "a byte count (e.g. 8388608 or 8M)" : "an integer") +
                       ", got '" + v + "'");
  std::uint64_t n = 0;
  const auto parsed = std::from_chars(v.data(), v.data() + digits, n);
  const auto range = [&] {
    return usage_error(flag + ": '" + v + "' is out of range (" + std::to_string(min) + ".." + std::to_string(max) +
                       (suffixes ? " bytes)" : ")"));
  };
  if (parsed.ec != std::errc() || __builtin_mul_overflow(n, mult, &n)) return range();
  if (n < min || n > max) return range();
  return n;
}

Result<std::string> read_token(const std::string& path) {
  // A token is one short line: the cap keeps /dev/zero or a wrong path from
  // being read whole (only regular files are read, so a FIFO cannot block).
  auto read = files::read_regular(path, kMaxTokenFileBytes, "the limit for a token file");
  if (!read) return std::move(read).error().context("--token-file");
  std::string t = std::move(read.value());
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ' || t.back() == '\t')) t.pop_back();
  if (t.empty()) return usage_error("--token-file: " + path + " is empty");
  for (char c : t)
    if (c < 0x21 || c > 0x7e)
      return usage_error("--token-file: the token must be printable ASCII without spaces (one line)");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    std::fprintf(stderr, "uvcl serve: warning: %s is readable by other users\n", path.c_str());
  return t;
}

Result<ServeOptions> parse_options(const Args& a) {
  ServeOptions o;
  if (!a.listen.empty()) {
    const std::string& l = a.listen;
    const auto colon = l.rfind(':');
    if (colon == std::string::npos) return usage_error("--listen: expected HOST:PORT, got '" + l + "'");
    std::string host = l.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    else if (host.find(':') != std::string::npos)
      return usage_error("--listen: write an IPv6 address in brackets: [::1]:7070");
    if (host.empty() || host == "localhost") host = "127.0.0.1";
    auto port = parse_number("--listen", l.substr(colon + 1), false, 0, 65535);
    if (!port) return std::move(port).error();
    o.host = host;
    o.port = static_cast<int>(*port);
  }
  o.kernels_dir = a.values.count("--kernels") ? a.values.at("--kernels") : "";
  if (a.values.count("--kernels") && o.kernels_dir.empty()) return usage_error("--kernels: expected a folder, got ''");
  o.allow_source = a.allow_source;
  if (!a.token_file.empty()) {
    auto t = read_token(a.token_file);
    if (!t) return std::move(t).error();
    o.token = std::move(t.value());
  }
  struct Limit {
    const char* flag;
    bool bytes;
    std::uint64_t min, max;
    std::uint64_t* out;
  };
  constexpr std::uint64_t kAny = UINT64_MAX;
  constexpr std::uint64_t kDayMs = 24ull * 3600 * 1000;
  std::uint64_t max_body = o.limits.max_body_bytes, max_header = o.limits.max_header_bytes,
                max_conn = o.limits.max_connections, max_per_client = o.limits.max_connections_per_client,
                max_jobs = o.max_jobs;
  const Limit limits[] = {
      {"--max-body", true, 1, 4ull << 30, &max_body},  // a body is held in memory whole
      {"--max-header", true, 256, 1ull << 30, &max_header},
      {"--max-buffer-bytes", true, 0, kAny, &o.max_buffer_bytes},
      {"--max-launches", false, 0, kAny, &o.max_launches},
      {"--max-work-items", false, 0, kAny, &o.max_work_items},
      {"--max-jobs", false, 1, 1'000'000, &max_jobs},
      {"--max-connections", false, 1, 1'000'000, &max_conn},
      {"--max-connections-per-client", false, 0, 1'000'000, &max_per_client},
      {"--idle-timeout-ms", false, 1, kDayMs, &o.limits.idle_timeout_ms},
      {"--header-timeout-ms", false, 1, kDayMs, &o.limits.header_timeout_ms},
      {"--request-timeout-ms", false, 1, kDayMs, &o.limits.request_timeout_ms},
      {"--job-timeout-ms", false, 1, kDayMs, &o.job_timeout_ms},
      {"--max-response-bytes", true, 0, kAny, &o.max_response_bytes},
      {"--answer-budget", true, 1ull << 20, kAny, &o.answer_budget},
  };
  for (const Limit& l : limits) {
    auto it = a.values.find(l.flag);
    if (it == a.values.end()) continue;
    auto n = parse_number(l.flag, it->second, l.bytes, l.min, l.max);
    if (!n) return std::move(n).error();
    *l.out = *n;
  }
  o.limits.max_body_bytes = max_body;
  o.limits.max_header_bytes = max_header;
  o.limits.max_connections = max_conn;
  o.limits.max_connections_per_client = max_per_client;
  o.max_jobs = max_jobs;
  return o;
}

// Refuses a launch whose work-items (the product of its global sizes) pass
// 2^64 or `limit` (0: no limit). The engine checks each axis against the
// device, not the product: on PoCL 3.1 a product that wraps to 0
// ({4294967296, 4294967296}) aborts the process in its scheduler, and one
// near 2^64 ties up the device for years.
Result<void> check_work_items(const job::Job& job, std::uint64_t limit) {
  for (std::size_t i = 0; i < job.launches.size(); ++i) {
    const job::Launch& l = job.launches[i];
    std::uint64_t n = 1;
    bool overflow = false;
    std::string sizes;
    for (std::uint64_t g : l.global) {
      if (g != 0 && n > UINT64_MAX / g) overflow = true;
      else n *= g;
      sizes += (sizes.empty() ? "" : " x ") + std::to_string(g);
    }
    const std::string where = "request: launches[" + std::to_string(i) + "].global";
    if (overflow)
      return Error{Status::InvalidArgument, where + ": " + sizes + " work-items overflow 64 bits"};
    if (limit && n > limit)
      return Error{Status::InvalidArgument, where + ": " + sizes + " = " + std::to_string(n) +
                                                " work-items, the limit is " + std::to_string(limit) +
                                                " (--max-work-items)"};
  }
  return {};
}

bool is_loopback(const std::string& host) { return host.rfind("127.", 0) == 0 || host == "::1"; }

// The HTTP status for an error of a job that parsed (422: the job is
// well-formed but cannot run as written) — docs/serve.md.
int status_for_run_error(Status s) {
  switch (s) {
    case Status::InvalidJob:
    case Status::InvalidArgument:
    case Status::IncorrectKernelArg:
    case Status::KernelCompilation:
    case Status::KernelLaunch:
    case Status::MemoryAllocation:
      return 422;
    case Status::DeviceLost:
    case Status::Cancelled:
      return 503;
    default:
      return 500;
  }
}

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  char num[64];
  std::snprintf(num, sizeof num, "%.9g", value);
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + num +
         "\n";
}

void metric(std::string& out, const char* name, const char* type, const char* help, std::uint64_t value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(value) + "\n";
}

class App {
 public:
  App(uv_loop_t* loop, ServeOptions options)
      : loop_(loop),
        opts_(std::move(options)),
        server_(loop, opts_.limits, [this](http::Request req, http::Responder r) { handle(std::move(req), r); }),
        budget_(opts_.answer_budget) {}

  Result<void> start(const Config& config);
  // After uv_run returned: destroys the engine and lets every handle close.
  void finish();

 private:
  // A job started by POST /v1/run, until its runner calls back.
  struct Running {
    App* app = nullptr;
    http::Responder r;
    std::shared_ptr<job::JobCancel> cancel = std::make_shared<job::JobCancel>();
    uv_timer_t* timer = nullptr;  // --job-timeout-ms; freed by its close callback
    bool answered = false;        // answered 504 or 503, or the client went away: the result is not sent
    bool timed_out = false;       // cancelled by --job-timeout-ms
    bool stopped = false;         // cancelled by a signal (else, if cancelled, by the client leaving)
    AnswerFormat format = AnswerFormat::Json;
    std::shared_ptr<void> hold;   // the answer budget's reservation: goes with the answer
  };

  void handle(http::Request req, http::Responder r);
  void run(http::Request& req, http::Responder r);
  Result<void> check_compiler_process();
  void start_timer(const std::shared_ptr<Running>& j);
  static void stop_timer(Running& j);
  void job_done(const std::shared_ptr<Running>& j, Result<job::RunResult> result);
  void answer(const http::Responder& r, http::Response resp);
  std::string devices_json() const;
  std::string metrics() const;

  static void on_lag_timer(uv_timer_t* t);
  static void on_signal(uv_signal_t* s, int signum);
  void begin_stop(const char* signal_name);
  void maybe_stopped();
  void close_handles();

  uv_loop_t* loop_;
  ServeOptions opts_;
  http::Server server_;
  uv_timer_t lag_timer_{};
  uv_signal_t sigint_{}, sigterm_{};
  bool lag_open_ = false, sigint_open_ = false, sigterm_open_ = false;
  bool stopping_ = false, server_closed_ = false, handles_closed_ = false;
  std::uint64_t jobs_started_ = 0, jobs_succeeded_ = 0, jobs_failed_ = 0;
  std::uint64_t jobs_invalid_ = 0, jobs_busy_ = 0, jobs_forbidden_ = 0, jobs_too_large_ = 0, responses_dropped_ = 0;
  std::uint64_t jobs_timed_out_ = 0, jobs_abandoned_ = 0, jobs_stopped_ = 0;
  std::uint64_t jobs_not_acceptable_ = 0, jobs_over_budget_ = 0;
  AnswerBudget budget_;
  std::set<std::shared_ptr<Running>> running_;  // until the runner calls back: a signal cancels them
  std::uint64_t inline_builds_at_start_ = 0;
  std::size_t jobs_running_ = 0;
  std::uint64_t last_tick_ns_ = 0, lag_last_ns_ = 0, lag_max_ns_ = 0;
  std::unique_ptr<job::KernelLibrary> library_;  // --kernels; released before the engine (finish)
  // Last: destroyed first, while everything its callbacks touch still lives.
  std::unique_ptr<Engine> engine_;
};

Result<void> App::start(const Config& config) {
  auto engine = Engine::create(config, loop_);
  if (!engine) return std::move(engine).error();
  engine_ = std::move(engine.value());
  // Before listening: a library that does not build stops the start.
  if (!opts_.kernels_dir.empty()) {
    auto lib = job::KernelLibrary::load(*engine_, opts_.kernels_dir);
    if (!lib) return std::move(lib).error();
    library_ = std::move(lib.value());
    std::string names;
    for (const std::string& f : library_->files()) names += (names.empty() ? "" : " ") + f;
    std::fprintf(stderr, "uvcl serve: --kernels %s: built %s\n", opts_.kernels_dir.c_str(), names.c_str());
  }
  if (opts_.allow_source) UVCL_TRY(check_compiler_process());
  server_.set_token(opts_.token);
  UVCL_TRY(server_.listen(opts_.host, opts_.port));

  uv_timer_init(loop_, &lag_timer_);
  lag_timer_.data = this;
  lag_open_ = true;
  uv_timer_start(&lag_timer_, on_lag_timer, kLagPeriodMs, kLagPeriodMs);
  uv_unref(reinterpret_cast<uv_handle_t*>(&lag_timer_));
  struct Sig {
    int signum;
    uv_signal_t* handle;
    bool* open;
  };
  for (const Sig& s : {Sig{SIGINT, &sigint_, &sigint_open_}, Sig{SIGTERM, &sigterm_, &sigterm_open_}}) {
    uv_signal_init(loop_, s.handle);
    s.handle->data = this;
    *s.open = true;
    if (int rc = uv_signal_start(s.handle, on_signal, s.signum); rc != 0)
      return Error{Status::Initialization, std::string("uv_signal_start: ") + uv_strerror(rc)};
    uv_unref(reinterpret_cast<uv_handle_t*>(s.handle));
  }
  const std::string where = server_.address();
  if (!is_loopback(opts_.host) && opts_.token.empty())
    std::fprintf(stderr,
                 "uvcl serve: warning: listening on %s without --token-file: anyone who can reach it can run "
                 "kernels\n",
                 where.c_str());
  std::fprintf(stderr, "uvcl serve: listening on %s\n", where.c_str());
  std::fflush(stderr);
  return {};
}

void App::finish() {
  running_.clear();
  if (!stopping_) {  // start() failed half-way
    stopping_ = true;
    server_.shutdown([this] { server_closed_ = true; });
  }
  close_handles();
  library_.reset();
  engine_.reset();  // cancels what is left; closes its handles
  uv_run(loop_, UV_RUN_DEFAULT);
}

// --- routes ---------------------------------------------------------------------

void App::handle(http::Request req, http::Responder r) {
  struct Route {
    const char* path;
    const char* method;
  };
  static constexpr Route kRoutes[] = {
      {"/v1/run", "POST"}, {"/v1/devices", "GET"}, {"/v1/health", "GET"}, {"/metrics", "GET"}};
  const Route* route = nullptr;
  for (const Route& rt : kRoutes)
    if (req.path == rt.path) route = &rt;
  if (!route) {
    answer(r, http::error_response(404, "NotFound", "no such endpoint: " + req.path));
    return;
  }
  if (req.method == "HEAD" && std::strcmp(route->method, "GET") == 0) req.method = "GET";  // body left out
  if (req.method != route->method) {
    http::Response resp = http::error_response(405, "MethodNotAllowed",
                                               req.path + " takes " + route->method + ", not " + req.method);
    resp.headers.push_back({"Allow", route->method});
    answer(r, std::move(resp));
    return;
  }
  if (req.path == "/v1/run") {
    run(req, r);
  } else if (req.path == "/v1/devices") {
    http::Response resp;
    resp.body = devices_json();
    answer(r, std::move(resp));
  } else if (req.path == "/v1/health") {
    http::Response resp;
    resp.body = "{\"status\":\"ok\"}\n";
    answer(r, std::move(resp));
  } else {
    http::Response resp;
    resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp.body = metrics();
    answer(r, std::move(resp));
  }
}

void App::answer(const http::Responder& r, http::Response resp) {
  if (!r.connected()) {
    ++responses_dropped_;
    return;
  }
  r.send(std::move(resp));
}

void App::run(http::Request& req, http::Responder r) {
  if (jobs_running_ >= opts_.max_jobs) {
    ++jobs_busy_;
    http::Response resp = http::error_response(
        429, "TooManyRequests", std::to_string(jobs_running_) + " jobs are running, the limit is " +
                                    std::to_string(opts_.max_jobs) + "; retry later");
    resp.headers.push_back({"Retry-After", "1"});
    answer(r, std::move(resp));
    return;
  }
  job::ParseOptions parse;
  parse.allow_files = false;
  parse.untrusted_kernels = true;
  auto parsed = job::parse_job(req.body, "request", parse);
  req.body.clear();
  req.body.shrink_to_fit();
  if (!parsed) {
    ++jobs_invalid_;
    const Error& e = parsed.error();
    answer(r, http::error_response(400, status_name(e.status), e.message));
    return;
  }
  // The kernels a server runs are the operator's (--kernels) unless it was
  // started with --allow-source; and even then only if builds run in the
  // compiler process, never inside this one.
  for (const job::Kernel& k : parsed->kernels) {
    if (!k.library.empty()) continue;
    std::string why;
    if (!opts_.allow_source)
      why = "request: kernels." + k.name +
            ": this server does not build kernels sent to it (it was started without --allow-source); name a "
            "kernel of its library as \"FILE:ENTRY\" in the launch" +
            (library_ ? std::string() : std::string(" (this server has none: --kernels DIR)"));
    else if (engine_->stats().inline_builds != inline_builds_at_start_)
      why = "request: kernels." + k.name +
            ": the compiler process is unavailable and a build would run inside the server process; sources are "
            "refused";
    if (why.empty()) continue;
    ++jobs_forbidden_;
    answer(r, http::error_response(403, "Forbidden", why));
    return;
  }
  const AnswerFormat format = answer_format(req.header("accept"));
  if (auto acceptable = check_answer_format(format, parsed.value()); !acceptable) {
    ++jobs_not_acceptable_;
    answer(r, http::error_response(406, "NotAcceptable", "request: " + acceptable.error().message));
    return;
  }
  if (auto sized = check_answer_size(format, parsed.value(), opts_.max_response_bytes); !sized) {
    ++jobs_too_large_;
    answer(r, http::error_response(413, "ResponseTooLarge", sized.error().message));
    return;
  }
  // Its outputs are held from the read until the answer's last piece: the
  // bytes are reserved now, or the job is refused (answer_budget.hpp).
  std::uint64_t need = output_bytes(parsed.value());
  need = need > UINT64_MAX - kAnswerPieceReserve ? UINT64_MAX : need + kAnswerPieceReserve;
  std::shared_ptr<void> hold = budget_.reserve(need);
  if (!hold) {
    const std::string what = "the job's outputs take " + std::to_string(need) + " bytes until its answer is sent; ";
    if (need > budget_.limit()) {
      ++jobs_too_large_;
      answer(r, http::error_response(413, "ResponseTooLarge",
                                     "request: outputs: " + what + "the server's answer budget is " +
                                         std::to_string(budget_.limit()) + " bytes (--answer-budget)"));
      return;
    }
    ++jobs_over_budget_;
    http::Response resp = http::error_response(
        503, "AnswerBudgetFull",
        what + "answers not yet sent hold " + std::to_string(budget_.held()) + " of the server's " +
            std::to_string(budget_.limit()) + " bytes (--answer-budget); retry later");
    resp.headers.push_back({"Retry-After", "1"});
    answer(r, std::move(resp));
    return;
  }
  job::RunOptions options;
  options.allow_files = false;
  options.untrusted_kernels = true;
  options.base_dir.clear();
  options.max_buffer_bytes = opts_.max_buffer_bytes;
  options.max_launches = opts_.max_launches;
  options.library = library_.get();
  options.allow_sources = opts_.allow_source;
  options.chunks_ahead = kChunksAhead;
  auto j = std::make_shared<Running>();
  j->app = this;
  j->r = r;
  j->format = format;
  j->hold = std::move(hold);
  options.cancel = j->cancel;
  running_.insert(j);
  ++jobs_running_;
  ++jobs_started_;
  // Counted like the runner's own limits (--max-launches): started, failed.
  if (auto sized = check_work_items(parsed.value(), opts_.max_work_items); !sized) {
    job_done(j, std::move(sized).error());
    return;
  }
  // A client that goes away cancels its job: no more launches are enqueued,
  // the job's objects are released once what is on the device is done.
  std::weak_ptr<Running> weak = j;
  r.on_abandoned([weak] {
    auto job = weak.lock();
    if (!job || job->answered) return;
    job->answered = true;
    stop_timer(*job);  // cancelled now: no timeout later
    job->cancel->cancel(Error{Status::Cancelled, "the client closed its connection"});
  });
  start_timer(j);
  // The callback may run before run_job returns, or long after the client
  // went away: it only counts and hands the answer to the Responder, which
  // does nothing once its connection closed.
  auto started = job::run_job(*engine_, std::move(parsed.value()), std::move(options),
                              [this, j](Result<job::RunResult> result) { job_done(j, std::move(result)); });
  if (!started) job_done(j, std::move(started).error());
}

// --job-timeout-ms: answers 504 at once and cancels the job; its slot
// (--max-jobs) stays taken until the runner calls back, after the work
// already on the device.
void App::start_timer(const std::shared_ptr<Running>& j) {
  auto* t = new uv_timer_t;
  uv_timer_init(loop_, t);
  t->data = j.get();
  j->timer = t;
  uv_timer_start(
      t,
      [](uv_timer_t* h) {
        Running& job = *static_cast<Running*>(h->data);
        App& a = *job.app;
        stop_timer(job);
        job.timed_out = true;
        if (!job.answered) {
          job.answered = true;
          a.answer(job.r, http::error_response(
                              504, "JobTimeout",
                              "the job did not finish within " + std::to_string(a.opts_.job_timeout_ms) +
                                  " ms (--job-timeout-ms); its launches not yet enqueued were cancelled"));
        }
        // May call job_done at once (nothing in flight): `job` is held by
        // the runner's callback until then, not after.
        job.cancel->cancel(Error{Status::Cancelled, "the job timed out"});
      },
      opts_.job_timeout_ms, 0);
}

void App::stop_timer(Running& j) {
  if (!j.timer) return;
  uv_close(reinterpret_cast<uv_handle_t*>(j.timer), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  j.timer = nullptr;
}

void App::job_done(const std::shared_ptr<Running>& j, Result<job::RunResult> result) {
  --jobs_running_;
  running_.erase(j);
  stop_timer(*j);
  j->r.on_abandoned(nullptr);
  std::shared_ptr<void> hold = std::move(j->hold);  // released here unless the answer takes it
  // A cancelled job is counted as such (uvcl_jobs_cancelled_total), not as
  // failed: nothing was wrong with it.
  if (j->cancel->cancelled()) ++(j->timed_out ? jobs_timed_out_ : j->stopped ? jobs_stopped_ : jobs_abandoned_);
  else if (result) ++jobs_succeeded_;
  else ++jobs_failed_;
  if (j->answered || !j->r.connected()) {  // answered 504 or 503, or the client left
    ++responses_dropped_;
  } else if (result) {
    if (engine_)  // null while it is being destroyed
      j->r.stream(job_answer(*engine_, std::move(result.value()), j->format, std::move(hold)));
  } else {
    const Error& e = result.error();
    answer(j->r, http::error_response(status_for_run_error(e.status), status_name(e.status), e.message));
  }
  maybe_stopped();
}

// With --allow-source, a network source must be built in a compiler
// process: on PoCL an inline build runs the compiler inside this process.
// opencl.compile "inline" is refused, and so is an engine that fell back to
// building inline (no uvcl-compiler to start): a probe build per device,
// which no cache can answer, must have run in a process.
Result<void> App::check_compiler_process() {
  if (engine_->config().compile == CompileMode::Inline)
    return usage_error("--allow-source: opencl.compile is \"inline\": network sources would be built inside the "
                       "server process; use \"process\" (the default)");
  const EngineStats before = engine_->stats();
  const std::string probe = "// uvcl serve start-up probe " + std::to_string(uv_hrtime()) + " " +
                            std::to_string(::getpid()) + "\nkernel void uvcl_probe(global int* p) { p[0] = 1; }\n";
  for (std::size_t d = 0; d < engine_->device_count(); ++d) {
    auto p = engine_->compile_sync(d, probe);
    if (!p) return std::move(p).error().context("--allow-source: probe build on device " + std::to_string(d));
    (void)engine_->release(p.value());
  }
  const EngineStats after = engine_->stats();
  inline_builds_at_start_ = after.inline_builds;
  if (after.inline_builds != before.inline_builds)
    return Error{Status::Initialization,
                 "--allow-source: builds run inside the server process (the uvcl-compiler program cannot be "
                 "started; UVCL_DEBUG_BACKENDS=1 or opencl.debug_backends says why): network sources would be "
                 "compiled and, on a CPU device, run in it unguarded by a process boundary for the compiler"};
  return {};
}

std::string App::devices_json() const {
  std::string out = "[";
  for (std::size_t i = 0; i < engine_->device_count(); ++i) {
    if (i) out += ", ";
    out += device_info_json(*engine_->device(i));
  }
  return out + "]\n";
}

std::string App::metrics() const {
  const EngineStats s = engine_->stats();
  const http::ServerStats& h = server_.stats();
  std::string out;
  out.reserve(4096);
  metric(out, "uvcl_jobs_started_total", "counter", "Jobs accepted by POST /v1/run and started.", jobs_started_);
  metric(out, "uvcl_jobs_succeeded_total", "counter", "Jobs that completed and were answered 200.", jobs_succeeded_);
  metric(out, "uvcl_jobs_failed_total", "counter", "Started jobs that ended with an error.", jobs_failed_);
  metric(out, "uvcl_jobs_running", "gauge", "Jobs running now.", static_cast<std::uint64_t>(jobs_running_));
  out += "# HELP uvcl_jobs_rejected_total Jobs refused before they started.\n"
         "# TYPE uvcl_jobs_rejected_total counter\n"
         "uvcl_jobs_rejected_total{reason=\"invalid\"} " + std::to_string(jobs_invalid_) + "\n"
         "uvcl_jobs_rejected_total{reason=\"busy\"} " + std::to_string(jobs_busy_) + "\n"
         "uvcl_jobs_rejected_total{reason=\"forbidden\"} " + std::to_string(jobs_forbidden_) + "\n"
         "uvcl_jobs_rejected_total{reason=\"response_too_large\"} " + std::to_string(jobs_too_large_) + "\n"
         "uvcl_jobs_rejected_total{reason=\"not_acceptable\"} " + std::to_string(jobs_not_acceptable_) + "\n"
         "uvcl_jobs_rejected_total{reason=\"answer_budget\"} " + std::to_string(jobs_over_budget_) + "\n"
         "# HELP uvcl_jobs_cancelled_total Started jobs that ended cancelled.\n"
         "# TYPE uvcl_jobs_cancelled_total counter\n"
         "uvcl_jobs_cancelled_total{reason=\"timeout\"} " + std::to_string(jobs_timed_out_) + "\n"
         "uvcl_jobs_cancelled_total{reason=\"client_gone\"} " + std::to_string(jobs_abandoned_) + "\n"
         "uvcl_jobs_cancelled_total{reason=\"stopping\"} " + std::to_string(jobs_stopped_) + "\n";
  metric(out, "uvcl_answer_bytes_held", "gauge",
         "Bytes reserved for answers not yet sent (outputs of running jobs and of answers being streamed).",
         budget_.held());
  metric(out, "uvcl_answer_budget_bytes", "gauge", "The answer budget (--answer-budget).", budget_.limit());
  metric(out, "uvcl_devices", "gauge", "OpenCL devices the engine drives.",
         static_cast<std::uint64_t>(engine_->device_count()));
  metric(out, "uvcl_launches_total", "counter", "Kernel launches submitted by the engine.", s.launches);
  metric(out, "uvcl_writes_total", "counter", "Host-to-device writes and fills.", s.writes);
  metric(out, "uvcl_reads_total", "counter", "Device-to-host reads.", s.reads);
  metric(out, "uvcl_copies_total", "counter", "Buffer-to-buffer copies.", s.copies);
  metric(out, "uvcl_bytes_to_device_total", "counter", "Bytes moved from host to device.", s.bytes_to_device);
  metric(out, "uvcl_bytes_from_device_total", "counter", "Bytes moved from device to host.", s.bytes_from_device);
  metric(out, "uvcl_bytes_copied_total", "counter", "Bytes copied between buffers.", s.bytes_copied);
  metric(out, "uvcl_commands_submitted_total", "counter", "Commands submitted to device queues.", s.submitted);
  metric(out, "uvcl_commands_failed_total", "counter", "Commands that failed.", s.failed);
  metric(out, "uvcl_cross_queue_waits_total", "counter", "Waits on events of another queue.", s.cross_queue_waits);
  metric(out, "uvcl_queue_in_flight", "gauge", "Commands submitted and not yet complete.", s.in_flight);
  metric(out, "uvcl_queue_pending", "gauge", "Commands waiting in micro-batch windows.", s.pending);
  metric(out, "uvcl_live_buffers", "gauge", "Device buffers alive.", s.live_buffers);
  metric(out, "uvcl_loop_lag_seconds", "gauge", "Lateness of the last 10 ms loop timer tick.",
         static_cast<double>(lag_last_ns_) / 1e9);
  metric(out, "uvcl_loop_lag_max_seconds", "gauge", "Largest lateness of a 10 ms loop timer tick since start.",
         static_cast<double>(lag_max_ns_) / 1e9);
  metric(out, "uvcl_http_connections_active", "gauge", "Open HTTP connections.", h.connections_active);
  metric(out, "uvcl_http_connections_total", "counter", "HTTP connections accepted.", h.connections_total);
  metric(out, "uvcl_http_connections_rejected_total", "counter",
         "Connections closed at once (over --max-connections or --max-connections-per-client, or stopping).",
         h.connections_rejected);
  metric(out, "uvcl_http_requests_total", "counter", "Complete HTTP requests received.", h.requests_total);
  out += "# HELP uvcl_http_responses_total HTTP responses sent, by status code.\n"
         "# TYPE uvcl_http_responses_total counter\n";
  for (const auto& [code, n] : h.responses)
    out += "uvcl_http_responses_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  out += "# HELP uvcl_http_timeouts_total Connections closed by a timeout.\n"
         "# TYPE uvcl_http_timeouts_total counter\n"
         "uvcl_http_timeouts_total{kind=\"idle\"} " + std::to_string(h.timeouts_idle) + "\n"
         "uvcl_http_timeouts_total{kind=\"header\"} " + std::to_string(h.timeouts_header) + "\n"
         "uvcl_http_timeouts_total{kind=\"request\"} " + std::to_string(h.timeouts_request) + "\n";
  metric(out, "uvcl_http_responses_dropped_total", "counter",
         "Answers not sent because the client had closed the connection.", responses_dropped_);
  metric(out, "uvcl_http_streams_cut_total", "counter",
         "Streamed answers whose connection closed before their last piece.", h.streams_cut);
  return out;
}

// --- loop lag, signals, shutdown ----------------------------------------------

void App::on_lag_timer(uv_timer_t* t) {
  App& a = *static_cast<App*>(t->data);
  const std::uint64_t now = uv_hrtime();
  if (a.last_tick_ns_ != 0) {
    const std::uint64_t due = a.last_tick_ns_ + kLagPeriodMs * 1'000'000;
    a.lag_last_ns_ = now > due ? now - due : 0;
    if (a.lag_last_ns_ > a.lag_max_ns_) a.lag_max_ns_ = a.lag_last_ns_;
  }
  a.last_tick_ns_ = now;
}

void App::on_signal(uv_signal_t* s, int signum) {
  App& a = *static_cast<App*>(s->data);
  const char* name = signum == SIGINT ? "SIGINT" : "SIGTERM";
  if (!a.stopping_) {
    std::fprintf(stderr, "uvcl serve: %s: stopping, %zu job(s) in flight: cancelling them\n", name, a.jobs_running_);
    a.begin_stop(name);
    return;
  }
  // A second signal: exit now, with 128 + the signal's number. Nothing is
  // waited for: destroying the engine would wait for the kernels on the
  // devices (OpenCL cannot stop one), which is what a second signal is
  // meant to cut short. The process's end closes sockets and frees the rest.
  std::fprintf(stderr, "uvcl serve: %s again: exiting now, abandoning %zu job(s)\n", name, a.jobs_running_);
  std::fflush(stderr);
  std::_Exit(128 + signum);
}

// Stops listening and cancels every job: each is answered 503 now (its
// connection closes after the answer), and the process exits once the
// runner released them, after the work they left on the devices.
void App::begin_stop(const char* signal_name) {
  stopping_ = true;
  server_.shutdown([this] {
    server_closed_ = true;
    maybe_stopped();
  });
  const std::vector<std::shared_ptr<Running>> jobs(running_.begin(), running_.end());
  for (const auto& j : jobs) {
    if (j->cancel->cancelled()) continue;  // timed out or left: ending already
    j->stopped = true;
    stop_timer(*j);
    if (!j->answered) {
      j->answered = true;
      answer(j->r, http::error_response(503, "Cancelled",
                                        std::string("the server is stopping (") + signal_name +
                                            "): the job was cancelled; its launches not yet enqueued will not run"));
    }
    j->cancel->cancel(Error{Status::Cancelled, "the server is stopping"});  // may call job_done at once
  }
}

void App::maybe_stopped() {
  if (stopping_ && server_closed_ && jobs_running_ == 0) close_handles();
}

void App::close_handles() {
  if (handles_closed_) return;
  handles_closed_ = true;
  if (lag_open_) uv_close(reinterpret_cast<uv_handle_t*>(&lag_timer_), nullptr);
  if (sigint_open_) uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
  if (sigterm_open_) uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
}

}  // namespace

int cmd_serve(const Args& a, const Config& config) {
  auto options = parse_options(a);
  if (!options) return fail(options.error());
  std::signal(SIGPIPE, SIG_IGN);  // a peer gone mid-write is an error code, not a signal
  // The server writes nothing to stdout (its log is stderr), but on PoCL a
  // kernel runs in this process: should one print despite the printf check
  // (job::ParseOptions::untrusted_kernels), its output goes nowhere.
  if (const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) {
    std::fflush(stdout);
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  // Answers of several MB are built and freed at a high rate. glibc raises
  // its mmap threshold after each such free, so later ones come from the
  // heap, where fragmentation keeps the peaks resident; a fixed threshold
  // keeps every block of 1 MiB or more in its own mapping, returned on free.
#ifdef M_MMAP_THRESHOLD  // glibc
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  uv_loop_t loop;
  if (int rc = uv_loop_init(&loop); rc != 0)
    return fail(Error{Status::Initialization, std::string("uv_loop_init: ") + uv_strerror(rc)});
  int code = 0;
  {
    App app(&loop, std::move(options.value()));
    if (auto started = app.start(config); !started) {
      code = fail(started.error());
    } else {
      uv_run(&loop, UV_RUN_DEFAULT);
    }
    app.finish();
  }
  if (int rc = uv_loop_close(&loop); rc != 0) {
    std::fprintf(stderr, "uvcl serve: error: uv_loop_close: %s (a handle was left open)\n", uv_strerror(rc));
    return 1;
  }
  if (code == 0) std::fprintf(stderr, "uvcl serve: stopped\n");
  return code;
}

}  // namespace uvcl::cli
