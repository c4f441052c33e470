// tune.hpp — local work size autotuning over Engine::timed_launch.
//
// time_local_sizes() takes one launch and a list of candidate local sizes
// and, for each candidate in turn: checks the launch with that local size
// (Engine::check_launch: a size that does not divide the global size, or
// that the device or kernel cannot run, is skipped with the reason), then
// runs `warmup` timed launches it discards and `repetitions` it keeps, one
// after another (each timed launch runs alone on the device). A timed launch
// that fails on the device skips the candidate with that error.
//
// A candidate has one local size per axis, or one number for a launch of
// several axes: it applies to axis 0 and the other axes keep the launch's own
// local size (1 where the launch has none). Asynchronous: returns at once,
// calls `done` once from the loop (not at all if it returns an error). The
// checks run for every candidate before anything is launched: when none
// passes, time_local_sizes returns an InvalidArgument error that lists each
// candidate with its reason. A report can still hold no measurement, when
// every candidate that passed failed on the device (Report::fastest).
// Kernels are launched as they are: a kernel that updates a buffer in place
// runs warmup + repetitions times per candidate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "uvcl/engine.hpp"

namespace uvcl::tune {

struct Options {
  unsigned warmup = 1;       // untimed runs first (JIT, caches)
  unsigned repetitions = 5;  // timed runs, at least 1
};

struct Measurement {
  std::vector<std::size_t> local;      // as launched, one per axis
  std::string skipped;                 // why the candidate did not run; empty when it did
  std::vector<std::uint64_t> device_ns;  // one per repetition, in run order
  std::uint64_t median_ns = 0, min_ns = 0, max_ns = 0;

  bool ok() const noexcept { return skipped.empty(); }
};

struct Report {
  std::vector<Measurement> rows;  // one per candidate, in the order given
  // Index into rows of the lowest median, or rows.size() when none ran.
  std::size_t fastest = 0;
};

using TuneCallback = std::function<void(Result<Report>)>;

// Candidate text: "64", "16x16", "8x8x4"; comma-separated lists of them
// ("16,32,64" or "8x8,16x16"). An error names the bad item.
Result<std::vector<std::vector<std::size_t>>> parse_candidates(const std::string& text);
// "64", "16x16".
std::string local_text(const std::vector<std::size_t>& local);

Result<void> time_local_sizes(Engine& engine, const Launch& launch,
                              std::vector<std::vector<std::size_t>> candidates, Options options, TuneCallback done);

}  // namespace uvcl::tune
