#include "program/tune.hpp"

#include <algorithm>
#include <memory>
#include <optional>

namespace uvcl::tune {

namespace {

// One tuning run: candidate by candidate, repetition by repetition, each
// step started from the previous one's callback.
struct TuneRun : std::enable_shared_from_this<TuneRun> {
  Engine& engine;
  Launch base;
  std::vector<std::vector<std::size_t>> candidates;
  Options options;
  TuneCallback done;
  Report report;
  std::size_t current = 0;  // candidate index
  unsigned runs = 0;        // timed launches made for the current candidate
  Launch launch;            // base with the current candidate's local size

  TuneRun(Engine& e, Launch l, std::vector<std::vector<std::size_t>> c, Options o, TuneCallback d)
      : engine(e), base(std::move(l)), candidates(std::move(c)), options(o), done(std::move(d)) {}

  // The launch's local size for a candidate, or why there is none.
  std::optional<std::string> local_for(const std::vector<std::size_t>& c, std::vector<std::size_t>& out) const {
    const std::size_t dims = base.global.size();
    if (c.size() == dims) {
      out = c;
      return std::nullopt;
    }
    if (c.size() == 1) {
      out.assign(dims, 1);
      for (std::size_t i = 1; i < dims && i < base.local.size(); ++i) out[i] = base.local[i];
      out[0] = c[0];
      return std::nullopt;
    }
    return local_text(c) + " has " + std::to_string(c.size()) + " axes, the launch has " + std::to_string(dims);
  }

  // The checks, for every candidate at once. True if any passed.
  bool check_all() {
    bool any = false;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      Measurement& m = report.rows[i];
      if (auto why = local_for(candidates[i], m.local)) {
        m.local = candidates[i];
        m.skipped = *why;
        continue;
      }
      Launch l = base;
      l.local = m.local;
      if (auto r = engine.check_launch(l); !r) m.skipped = r.error().message;
      else any = true;
    }
    return any;
  }

  // Starts the next candidate that passed the checks. False when none is left.
  bool start_next() {
    for (; current < candidates.size(); ++current) {
      if (!report.rows[current].ok()) continue;
      launch = base;
      launch.local = report.rows[current].local;
      runs = 0;
      if (start_run()) return true;  // its callback continues
    }
    return false;
  }

  void next_candidate() {
    if (!start_next()) finish();
  }

  // One timed launch of the current candidate. False (and the candidate
  // skipped) if the engine refused it.
  bool start_run() {
    auto self = shared_from_this();
    auto r = engine.timed_launch(launch, [self](Result<Timing> t) { self->timed(std::move(t)); });
    if (r) return true;
    report.rows[current].skipped = r.error().message;
    report.rows[current].device_ns.clear();
    return false;
  }

  void timed(Result<Timing> t) {
    Measurement& m = report.rows[current];
    if (!t) {
      m.skipped = t.error().message;
      m.device_ns.clear();
      ++current;
      next_candidate();
      return;
    }
    if (runs++ >= options.warmup) m.device_ns.push_back(t->device_ns);
    if (runs < options.warmup + options.repetitions) {
      if (!start_run()) {
        ++current;
        next_candidate();
      }
      return;
    }
    std::vector<std::uint64_t> v = m.device_ns;
    std::sort(v.begin(), v.end());
    m.min_ns = v.front();
    m.max_ns = v.back();
    m.median_ns = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    ++current;
    next_candidate();
  }

  void finish() {
    report.fastest = report.rows.size();
    for (std::size_t i = 0; i < report.rows.size(); ++i)
      if (report.rows[i].ok() && (report.fastest == report.rows.size() ||
                                  report.rows[i].median_ns < report.rows[report.fastest].median_ns))
        report.fastest = i;
    TuneCallback cb = std::move(done);
    cb(std::move(report));
  }
};

}  // namespace

std::string local_text(const std::vector<std::size_t>& local) {
  std::string s;
  for (std::size_t i = 0; i < local.size(); ++i) s += (i ? "x" : "") + std::to_string(local[i]);
  return s;
}

Result<std::vector<std::vector<std::size_t>>> parse_candidates(const std::string& text) {
  std::vector<std::vector<std::size_t>> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::vector<std::size_t> c;
    std::size_t p = 0;
    bool bad = item.empty();
    while (!bad && p <= item.size()) {
      const std::size_t x = std::min(item.find('x', p), item.size());
      const std::string num = item.substr(p, x - p);
      if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(num) == 0) {
        bad = true;
        break;
      }
      c.push_back(std::stoul(num));
      p = x + 1;
    }
    if (bad || c.size() > 3)
      return Error{Status::InvalidArgument, "local size candidate \"" + item +
                                                "\": expected a positive integer per axis, 1 to 3 axes (\"64\", "
                                                "\"16x16\")"};
    out.push_back(std::move(c));
    start = comma + 1;
  }
  return out;
}

Result<void> time_local_sizes(Engine& engine, const Launch& launch, std::vector<std::vector<std::size_t>> candidates,
                              Options options, TuneCallback done) {
  if (!done) return Error{Status::InvalidArgument, "tune: a callback is required"};
  if (candidates.empty()) return Error{Status::InvalidArgument, "tune: no local size candidates"};
  if (options.repetitions == 0) return Error{Status::InvalidArgument, "tune: repetitions must be at least 1"};
  if (launch.global.empty() || launch.global.size() > 3)
    return Error{Status::InvalidArgument, "tune: the launch needs 1 to 3 global axes"};
  auto run = std::make_shared<TuneRun>(engine, launch, std::move(candidates), options, std::move(done));
  run->report.rows.resize(run->candidates.size());
  if (!run->check_all() || !run->start_next()) {
    std::string why;
    for (std::size_t i = 0; i < run->report.rows.size(); ++i)
      why += "\n  " + local_text(run->candidates[i]) + ": " + run->report.rows[i].skipped;
    return Error{Status::InvalidArgument, "tune: no local size candidate can run:" + why};
  }
  return {};
}

}  // namespace uvcl::tune
