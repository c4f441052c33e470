// job_runner.hpp — executes a parsed job (docs/job-format.md) on an engine.
//
// Asynchronous: run_job returns at once and calls `done` exactly once from
// the loop (unless it returns an error itself, libuv's rule). Several jobs
// may run on one engine at the same time (uvcl serve): each job's commands
// are made inside its own error scopes (Engine::push_error_scope), so a job
// fails with failures of its own commands only: with outputs, those that
// reach an output's read; without, the first of any. Errors say where:
// "kernels.scale: ...", "launches[3] (kernel scale): argument 1 ...".
// Everything the job created is released before `done` runs.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "program/job.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::job {

class KernelLibrary;  // kernel_library.hpp

// Stops a running job from outside (uvcl serve: --job-timeout-ms, a client
// that went away). Give one to run_job in RunOptions::cancel; cancel() may
// be called from the loop at any time, before the job ends or after (then
// it does nothing).
//
// A cancelled job makes no new command: no launch after a build still
// running, no further chunk of launches, no read. What it already enqueued
// cannot be taken back (OpenCL can neither remove a command from a queue
// nor stop a running kernel): the job waits for it, then releases its
// buffers, kernels and programs and calls `done` with the reason given here.
// RunOptions::chunks_ahead bounds that tail.
class JobCancel {
 public:
  void cancel(Error reason);
  bool cancelled() const { return reason_.has_value(); }
  const std::optional<Error>& reason() const { return reason_; }
  // For the job runner: what cancel() calls, once.
  void set_hook(std::function<void()> hook) { hook_ = std::move(hook); }

 private:
  std::optional<Error> reason_;
  std::function<void()> hook_;
};

struct RunOptions {
  // Overrides the job's "device" (an index, or kAnyDevice); a launch's own
  // "device" still wins.
  std::optional<std::size_t> device;
  std::string base_dir = ".";          // "file" keys resolve against it
  bool allow_files = true;
  // Kernels from the network (uvcl serve): sources and options are checked
  // again (program/untrusted_source.hpp), and build logs lose the server's paths.
  bool untrusted_kernels = false;
  bool record_schedule = false;        // fills RunResult::schedule_json
  std::uint64_t max_buffer_bytes = 0;  // 0: no limit beyond the device's
  std::uint64_t max_launches = 0;      // 0: no limit
  // Launches enqueued per loop iteration. A job's launches (repeats
  // expanded) are enqueued in program order, this many at a time, from a
  // uv_check handle on the engine's loop, so other handles (a server's
  // clients, timers) run between the chunks. Its buffers are made (allocated
  // and uploaded) before them the same way, this many per iteration. 0: all
  // in one go.
  std::uint64_t launches_per_turn = 256;
  // Chunks of launches enqueued and not yet complete, at most; the next
  // chunk waits for the oldest to complete. 0: no bound (every chunk is
  // enqueued on the next loop iteration, whatever the device's pace). With
  // a bound, a cancelled job leaves at most chunks_ahead * launches_per_turn
  // launches behind it on the device.
  std::uint64_t chunks_ahead = 0;
  // The server's kernels ("FILE:ENTRY" in a launch); null: a job naming one
  // is an InvalidJob error.
  const KernelLibrary* library = nullptr;
  // false: a job carrying its own kernels (source or file) is an InvalidJob
  // error (uvcl serve without --allow-source).
  bool allow_sources = true;
  std::shared_ptr<JobCancel> cancel;
};

struct Output {
  std::string name;
  ScalarType type = ScalarType::Float;
  std::vector<std::byte> data;
};

struct RunStats {
  std::uint64_t launches = 0;     // kernel launches, repeats counted
  std::uint64_t commands = 0;     // commands submitted for the job
  std::uint64_t cross_queue_waits = 0;
  double compile_ms = 0, run_ms = 0;
  unsigned queues = 0;  // the job's device's
  // A job on several devices ("device" per launch, or "any"): launches by
  // device index, and the copies that moved a buffer to where a launch read
  // it. Empty and 0 on one device.
  std::vector<std::uint64_t> launches_per_device;
  std::uint64_t moves = 0, bytes_moved = 0;
};

struct RunResult {
  std::size_t device = 0;
  std::vector<Output> outputs;
  RunStats stats;
  std::string schedule_json;  // with RunOptions::record_schedule
};

using RunCallback = std::function<void(Result<RunResult>)>;

Result<void> run_job(Engine& engine, Job job, RunOptions options, RunCallback done);
// Runs the engine's loop until the job is done (CLI, tests).
Result<RunResult> run_job_sync(Engine& engine, Job job, RunOptions options);

// A job set up but not run (uvcl tune): its kernels built, its buffers made
// and initialised (the writes may still be in flight; commands enqueued
// later wait for them), each of its launches built and checked, in job
// order, repeats not expanded. Its buffers, kernels and programs are
// released when the last reference to it goes.
class PreparedJob {
 public:
  virtual ~PreparedJob() = default;
  virtual std::size_t device() const = 0;
  virtual const std::vector<uvcl::Launch>& launches() const = 0;
  virtual const std::vector<uvcl::Buffer>& buffers() const = 0;  // Job::buffers' order
};
using PrepareCallback = std::function<void(Result<std::shared_ptr<PreparedJob>>)>;
// run_job up to the launches: `done` gets the prepared job, or the error
// run_job would have reported. Same callback rule as run_job.
Result<void> prepare_job(Engine& engine, Job job, RunOptions options, PrepareCallback done);

// {"device": {...}, "outputs": {NAME: [numbers...]}, "stats": {...}}:
// numbers in shortest round-trip form, non-finite floats as "nan", "inf",
// "-inf".
std::string result_json(const Engine& engine, const RunResult& result);
// One output as a NumPy .npy file (format 1.0, little-endian, 1-D).
Result<void> write_npy(const std::string& path, const Output& output);
// The bytes of that file before its data (magic, version, header).
std::string npy_header(const Output& output);

}  // namespace uvcl::job
