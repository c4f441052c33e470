#include "program/job_runner.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include <fcntl.h>
#include <unistd.h>
#include <uv.h>

#include "cl/devices.hpp"
#include "program/device_json.hpp"
#include "cl/kernel_info.hpp"
#include "program/disk_pool.hpp"
#include "program/kernel_library.hpp"
#include "cl/param_check.hpp"
#include "files.hpp"
#include "json/json_util.hpp"
#include "program/safetensors.hpp"
#include "program/untrusted_source.hpp"

namespace uvcl::job {

namespace {

constexpr std::size_t kNoProgram = SIZE_MAX;

Error job_error(std::string message) { return Error{Status::InvalidJob, std::move(message)}; }

void keep_polling(uv_idle_t*) {}  // an active idle handle keeps the loop's poll from blocking

std::string join_path(const std::string& dir, const std::string& file) {
  if (file.empty() || file[0] == '/' || dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

// The scalar type a kernel parameter's type name denotes, if it is one.
std::optional<ScalarType> param_scalar(std::string name) {
  if (name.rfind("unsigned ", 0) == 0) name = "u" + name.substr(9);
  return scalar_type_from_name(name);
}

// The element type of a pointer parameter ("float*" -> float).
std::optional<ScalarType> param_pointee(const std::string& name) {
  if (name.empty() || name.back() != '*') return std::nullopt;
  return param_scalar(name.substr(0, name.size() - 1));
}

// A buffer's "safetensors" init: checks the tensor against the buffer and
// uploads it straight from the file's mapping.
Result<void> upload_tensor(Engine& engine, disk::DiskPool& disk, const std::string& path, const job::Buffer& jb,
                           uvcl::Buffer dst, const std::string& where) {
  auto file = disk.safetensors(path, Status::InvalidJob);
  if (!file) return std::move(file).error().context(where);
  const safetensors::Header& h = file.value()->header;
  const safetensors::TensorInfo* t = h.find(jb.init.tensor);
  if (!t) {
    std::string names;
    for (std::size_t i = 0; i < h.tensors.size() && i < 8; ++i)
      names += (i ? ", " : "") + json::quote(h.tensors[i].name);
    if (h.tensors.size() > 8) names += ", ... (" + std::to_string(h.tensors.size()) + " in all)";
    return job_error(where + ".tensor: no tensor " + json::quote(jb.init.tensor) + " in " + path +
                     (names.empty() ? std::string(" (it holds no tensors)") : " (it holds " + names + ")"));
  }
  const std::string what = where + ": tensor " + json::quote(t->name) + " in " + path;
  const std::string dtype(safetensors::dtype_name(t->dtype));
  const auto type = safetensors::scalar_type_of(t->dtype);
  if (!type)
    return job_error(what + " is " + dtype + ", which has no OpenCL C type; convert it (to F32 or F16) first");
  if (*type != jb.type)
    return job_error(what + " is " + dtype + " (OpenCL " + std::string(scalar_type_name(*type)) +
                     "), but the buffer's type is " + std::string(scalar_type_name(jb.type)));
  if (t->elements() != jb.count)
    return job_error(what + " has " + std::to_string(t->elements()) + " elements (shape " +
                     safetensors::shape_text(t->shape) + "), but the buffer's count is " + std::to_string(jb.count));
  return disk::upload(engine, file.value()->mapping, static_cast<std::size_t>(h.data_offset + t->begin),
                      static_cast<std::size_t>(t->bytes()), dst, 0)
      .context(where);
}

// One job's state machine: Building -> Launching (a chunk per loop
// iteration) -> Reading -> Done. Owned by shared_ptr copies in the engine
// callbacks and the launch turns, so it lives until the last one.
//
// Every command the job makes belongs to the job: each turn that makes
// commands (the uploads and the first chunk, each later chunk, the last with
// the reads) runs inside an error scope pushed and popped in that turn.
// Failures of other users' commands on the same engine (another job in uvcl
// serve) go to their own scopes, never into this job's result. A job with
// outputs ends when its reads have called back (a failure upstream of an
// output reaches the read); waiting for its last scope too would wait for
// every command anyone made before it, a slow job's included. A job with no
// outputs ends when its last scope's callback has run (scopes complete in
// closing order: every earlier one has run by then), with the first failure
// of its commands.
class JobRun : public std::enable_shared_from_this<JobRun> {
 public:
  JobRun(Engine& e, Job job, RunOptions opts, RunCallback done)
      : engine_(e), job_(std::move(job)), opts_(std::move(opts)), done_(std::move(done)) {}
  // prepare_job: stops before the launches and hands the job over instead.
  JobRun(Engine& e, Job job, RunOptions opts, PrepareCallback prepared)
      : engine_(e), job_(std::move(job)), opts_(std::move(opts)), prepared_(std::move(prepared)) {}

  Result<void> start();

 private:
  Result<void> place_job();
  friend class Prepared;
  void on_cancel();
  void end_cancelled();
  std::string library_kernel_where(std::size_t kernel) const;
  void built(std::size_t program, Result<void> r);
  void run();
  Result<void> make_kernels();
  Result<void> make_buffers();  // up to a turn's worth, from next_buffer_
  bool first_use_writes_all(std::size_t buffer, std::size_t bytes) const;
  bool reads_arg(const job::Launch& jl, std::size_t arg) const;
  std::size_t valid_slot(std::size_t buffer) const;
  Result<std::size_t> choose_slot(std::size_t li) const;
  Result<void> move_inputs(std::size_t li, std::size_t slot);
  void mark_written(std::size_t li, std::size_t slot);
  std::string on_device(std::size_t slot) const;
  std::string build_where(std::size_t program) const;
  Result<void> enqueue_launches();
  Result<void> build_launch(std::size_t li, std::size_t slot);
  Result<bool> launch_chunk();  // true: launches remain for a later turn
  Result<bool> next_chunk();    // this turn's buffers, then launches; true: more for a later turn
  bool end_turn(Result<bool> launched);
  void settle();
  void open_turns();
  void close_turns();
  static void on_turn(uv_check_t* h);
  void read_outputs();
  void hand_over();
  void fail(Error e);
  void finish();
  void cleanup();
  std::string schedule_entry_json(const ScheduleEntry& s) const;

  Engine& engine_;
  Job job_;
  RunOptions opts_;
  RunCallback done_;
  PrepareCallback prepared_;
  std::size_t device_ = 0;  // the job's device (RunResult::device)
  // The devices the job's launches run on, ascending: a job's objects are
  // kept per slot, X[i * slots + slot]; a job on one device has one slot.
  std::vector<std::size_t> slots_;
  std::vector<std::vector<std::size_t>> candidates_;  // per job launch: the slots it may run on
  std::vector<bool> kernel_on_;  // [kernel * slots + slot]: the kernel is made there
  std::vector<std::size_t> home_;  // per buffer: the slot its contents start on
  std::vector<bool> copy_on_;  // [buffer * slots + slot]: the buffer has a copy there
  std::vector<bool> valid_;  // [buffer * slots + slot]: that copy holds the buffer's current contents
  std::size_t last_slot_ = 0;  // where the launch enqueued last ran
  std::vector<uvcl::Launch> launches_;  // [launch * slots + slot], built and checked by enqueue_launches
  std::vector<uvcl::Program> programs_;           // [distinct (source, options) * slots + slot]
  std::vector<std::size_t> kernel_program_;  // job kernel -> distinct source; kNoProgram: a library kernel
  std::vector<uvcl::Program> library_program_;  // [job kernel * slots + slot]: the library's program
  std::vector<uvcl::Kernel> kernels_;  // [job kernel * slots + slot]; id 0 where it is not made
  std::vector<std::vector<KernelParam>> params_;
  std::vector<uvcl::Buffer> buffers_;  // [buffer * slots + slot]; id 0 where it has no copy
  std::size_t builds_pending_ = 0;
  std::size_t reads_pending_ = 0;
  std::optional<Error> error_;        // a build's, then a read's (first kept)
  std::size_t scopes_pending_ = 0;    // popped, callback not run yet
  std::optional<Error> scope_error_;  // the first failure in the job's scopes
  bool all_made_ = false;             // every launch and read is enqueued
  bool finished_ = false;
  bool cancelled_ = false;            // RunOptions::cancel fired: no new commands
  // RunOptions::chunks_ahead: chunks whose marker read has not called back.
  std::uint64_t chunks_pending_ = 0;
  std::size_t last_launched_ = 0;  // the launch enqueued last
  // Buffers are made (allocated and uploaded) a turn's worth at a time
  // too: a job of 100 000 buffers held the loop for seconds.
  std::size_t next_buffer_ = 0;
  bool launches_built_ = false;  // enqueue_launches ran (every buffer made)
  disk::DiskPool disk_;          // each file mapped and parsed once; uploads keep their mapping
  void mark_chunk();
  RunResult result_;
  EngineStats stats_before_;
  std::uint64_t t_start_ = 0, t_run_ = 0;
  std::vector<std::string> schedule_;
  // The launch enqueued next: launches_[next_launch_], its next_repeat_-th run.
  std::size_t next_launch_ = 0;
  std::uint64_t next_repeat_ = 0;
  // While launches remain after the first chunk: a uv_check handle enqueues
  // the next chunk once per loop iteration (after the poll, so a run_until
  // looking at the engine always sees the chunk in flight), and an idle
  // handle keeps that poll from blocking. Heap block freed by its last close
  // callback; it holds the run alive until closed.
  struct Turns {
    uv_check_t check{};
    uv_idle_t idle{};
    std::shared_ptr<JobRun> run;
    int open = 0;
    BusyHold hold;  // keeps run_until turning the loop between chunks
  };
  Turns* turns_ = nullptr;
  std::weak_ptr<const void> engine_alive_;
  bool engine_gone_ = false;
};

// Where each launch may run and where each buffer starts and has copies:
// the slots. A launch runs on the device it names, else the job's; "any"
// may choose every device (each that has cl_khr_fp16 if a buffer is half).
// A buffer starts where the first launch that uses it runs, if that is one
// device; else on the job's device; else on the first device "any" takes.
// It has a copy there and on every device a launch using it may run on.
Result<void> JobRun::place_job() {
  const std::size_t count = engine_.device_count();
  const std::size_t job_device = opts_.device ? *opts_.device : job_.device.value_or(0);
  const auto out_of_range = [count](const std::string& where, std::size_t d) {
    return job_error(where + "device " + std::to_string(d) + " out of range (" + std::to_string(count) + " devices)");
  };
  if (job_device != kAnyDevice && job_device >= count) return out_of_range("", job_device);
  const auto half = std::find_if(job_.buffers.begin(), job_.buffers.end(),
                                 [](const job::Buffer& b) { return b.type == ScalarType::Half; });
  const auto lacks_fp16 = [&](std::size_t d) { return half != job_.buffers.end() && !engine_.device(d)->fp16; };
  std::vector<std::size_t> any;
  for (std::size_t d = 0; d < count; ++d)
    if (!lacks_fp16(d)) any.push_back(d);
  std::vector<std::vector<std::size_t>> devices(job_.launches.size());
  for (std::size_t li = 0; li < job_.launches.size(); ++li) {
    const std::size_t want = job_.launches[li].device.value_or(job_device);
    const std::string where = "launches[" + std::to_string(li) + "].device: ";
    if (want != kAnyDevice && want >= count) return out_of_range(where, want);
    if (want == kAnyDevice && any.empty())
      return job_error(where + "\"any\", but no device has cl_khr_fp16, which buffers." + half->name +
                       " (type half) needs");
    devices[li] = want == kAnyDevice ? any : std::vector<std::size_t>{want};
  }
  const std::size_t fallback = job_device != kAnyDevice ? job_device : any.empty() ? 0 : any.front();
  std::vector<std::optional<std::size_t>> home(job_.buffers.size());
  std::vector<bool> used(count, false);
  for (std::size_t li = 0; li < job_.launches.size(); ++li) {
    for (std::size_t d : devices[li]) used[d] = true;
    for (const Arg& a : job_.launches[li].args)
      if (a.kind == Arg::Kind::Buffer && !home[a.buffer])
        home[a.buffer] = devices[li].size() == 1 ? devices[li][0] : fallback;
  }
  for (auto& h : home) used[h.value_or(fallback)] = true;
  for (std::size_t d = 0; d < count; ++d)
    if (used[d]) slots_.push_back(d);
  if (slots_.empty()) slots_.push_back(fallback);  // nothing to run: the job's device, for its result
  for (std::size_t d : slots_)
    if (lacks_fp16(d))
      return job_error("buffers." + half->name + ": type half needs cl_khr_fp16, which device " + std::to_string(d) +
                       " lacks");
  if (prepared_ && slots_.size() > 1)
    return job_error("the job runs on " + std::to_string(slots_.size()) +
                     " devices; it can be prepared (uvcl tune) on one only: give every launch the same \"device\"");
  const std::size_t ns = slots_.size();
  std::vector<std::size_t> slot_of(count, 0);
  for (std::size_t s = 0; s < ns; ++s) slot_of[slots_[s]] = s;
  candidates_.resize(job_.launches.size());
  kernel_on_.assign(job_.kernels.size() * ns, false);
  copy_on_.assign(job_.buffers.size() * ns, false);
  for (std::size_t b = 0; b < job_.buffers.size(); ++b) {
    home_.push_back(slot_of[home[b].value_or(fallback)]);
    copy_on_[b * ns + home_.back()] = true;
  }
  for (std::size_t li = 0; li < job_.launches.size(); ++li) {
    const job::Launch& jl = job_.launches[li];
    for (std::size_t d : devices[li]) {
      const std::size_t slot = slot_of[d];
      candidates_[li].push_back(slot);
      kernel_on_[jl.kernel * ns + slot] = true;
      for (const Arg& a : jl.args)
        if (a.kind == Arg::Kind::Buffer) copy_on_[a.buffer * ns + slot] = true;
    }
  }
  for (std::size_t k = 0; k < job_.kernels.size(); ++k)  // a kernel no launch uses is still made, once
    if (std::none_of(kernel_on_.begin() + static_cast<std::ptrdiff_t>(k * ns),
                     kernel_on_.begin() + static_cast<std::ptrdiff_t>((k + 1) * ns), [](bool on) { return on; }))
      kernel_on_[k * ns] = true;
  device_ = job_device != kAnyDevice ? job_device : slots_.front();
  return {};
}

Result<void> JobRun::start() {
  t_start_ = uv_hrtime();
  UVCL_TRY(place_job());
  const std::size_t ns = slots_.size();
  result_.device = device_;
  result_.stats.queues = engine_.device(device_)->queues;
  if (ns > 1) result_.stats.launches_per_device.assign(engine_.device_count(), 0);
  // Sums that wrap would slip past the limits: two repeats of 2^63 made 0
  // launches to check and ran for ever; buffer sizes past 2^64 made a small
  // total. Overflow is refused whatever the limit.
  std::uint64_t total_launches = 0;
  for (std::size_t i = 0; i < job_.launches.size(); ++i)
    if (__builtin_add_overflow(total_launches, job_.launches[i].repeat, &total_launches))
      return job_error("launches[" + std::to_string(i) +
                       "].repeat: the job's launches, repeats counted, pass 2^64 - 1");
  if (opts_.max_launches && total_launches > opts_.max_launches)
    return job_error("launches: " + std::to_string(total_launches) + " launches, the limit is " +
                     std::to_string(opts_.max_launches));
  // A buffer with copies on several devices counts once per copy.
  std::uint64_t total_bytes = 0;
  for (std::size_t bi = 0; bi < job_.buffers.size(); ++bi) {
    const job::Buffer& b = job_.buffers[bi];
    const auto copies = static_cast<std::uint64_t>(
        std::count(copy_on_.begin() + static_cast<std::ptrdiff_t>(bi * ns),
                   copy_on_.begin() + static_cast<std::ptrdiff_t>((bi + 1) * ns), true));
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(b.count, std::uint64_t{scalar_size(b.type)}, &bytes) ||
        __builtin_mul_overflow(bytes, copies, &bytes) || __builtin_add_overflow(total_bytes, bytes, &total_bytes))
      return job_error("buffers." + b.name + ": the job's buffers, counted up to this one, pass 2^64 - 1 bytes");
  }
  if (opts_.cancel) {
    if (opts_.cancel->cancelled()) return *opts_.cancel->reason();
    std::weak_ptr<JobRun> weak = weak_from_this();
    opts_.cancel->set_hook([weak] {
      if (auto self = weak.lock()) self->on_cancel();
    });
  }
  if (opts_.max_buffer_bytes && total_bytes > opts_.max_buffer_bytes)
    return job_error("buffers: " + std::to_string(total_bytes) + " bytes" +
                     (ns > 1 ? std::string(" (a copy on each device a buffer's launches may run on)") : "") +
                     ", the limit is " + std::to_string(opts_.max_buffer_bytes));

  // Sources, deduplicated: one build per distinct (source, options, whether
  // they replace opencl.build_options).
  using BuildKey = std::tuple<std::string, std::string, bool>;
  std::map<BuildKey, std::size_t> seen;
  library_program_.resize(job_.kernels.size() * ns);
  std::vector<BuildKey> sources;
  for (std::size_t ki = 0; ki < job_.kernels.size(); ++ki) {
    const job::Kernel& k = job_.kernels[ki];
    if (!k.library.empty()) {  // "FILE:ENTRY": built at the server's start
      const std::string where = library_kernel_where(ki);
      if (!opts_.library)
        return job_error(where + ": " + json::quote(k.name) +
                         " names a kernel of a library (FILE:ENTRY: uvcl serve --kernels DIR or uvcl run --kernels DIR), "
                         "and none was given");
      for (std::size_t slot = 0; slot < ns; ++slot) {
        if (!kernel_on_[ki * ns + slot]) continue;
        auto p = opts_.library->program(k.library, slots_[slot]);
        if (!p) return std::move(p).error().context(where);
        library_program_[ki * ns + slot] = p.value();
      }
      kernel_program_.push_back(kNoProgram);
      continue;
    }
    if (!opts_.allow_sources)
      return job_error("kernels." + k.name +
                       ": this server runs only its own kernels (launches name them FILE:ENTRY); it was started "
                       "without --allow-source");
    std::string source = k.source;
    if (!k.file.empty()) {
      if (!opts_.allow_files) return job_error("kernels." + k.name + ".file: files are not allowed here");
      auto text = files::read_regular(join_path(opts_.base_dir, k.file));
      if (!text) return std::move(text).error().context("kernels." + k.name + ".file");
      source = std::move(text.value());
    }
    if (opts_.untrusted_kernels) {
      if (auto why = refuse_untrusted_source(source)) return job_error("kernels." + k.name + ".source: " + *why);
      if (auto why = refuse_untrusted_options(k.options)) return job_error("kernels." + k.name + ".options: " + *why);
      if (k.build_options)
        if (auto why = refuse_untrusted_options(*k.build_options))
          return job_error("kernels." + k.name + ".build_options: " + *why);
    }
    std::string options = k.options;
    if (k.build_options) options = *k.build_options + (options.empty() || k.build_options->empty() ? "" : " ") + options;
    BuildKey key{std::move(source), std::move(options), k.build_options.has_value()};
    auto [it, fresh] = seen.emplace(key, sources.size());
    if (fresh) sources.push_back(std::move(key));
    kernel_program_.push_back(it->second);
  }
  // Each source is built on every device one of its kernels is made on.
  std::vector<std::size_t> builds;  // programs_ indexes
  for (std::size_t i = 0; i < sources.size(); ++i)
    for (std::size_t slot = 0; slot < ns; ++slot)
      for (std::size_t k = 0; k < job_.kernels.size(); ++k)
        if (kernel_program_[k] == i && kernel_on_[k * ns + slot]) {
          builds.push_back(i * ns + slot);
          break;
        }
  programs_.resize(sources.size() * ns);
  stats_before_ = engine_.stats();
  builds_pending_ = builds.size();
  auto self = shared_from_this();
  for (std::size_t n = 0; n < builds.size(); ++n) {
    const std::size_t at = builds[n];
    const auto& [source, options, replace] = sources[at / ns];
    auto p = engine_.compile(
        slots_[at % ns], source, options, [self, at](Result<void> r) { self->built(at, std::move(r)); },
        replace ? BuildOptionsMode::Replace : BuildOptionsMode::Add);
    if (!p) {
      builds_pending_ -= builds.size() - n;  // the rest never start
      error_ = std::move(p).error().context(build_where(at));
      if (builds_pending_ == 0) {
        cleanup();
        return std::move(*error_);
      }
      return {};  // the builds started report back; then fail() runs
    }
    programs_[at] = p.value();
  }
  if (builds.empty()) run();
  return {};
}

// A build's kernel, for its errors: the first of the job's kernels it
// makes, and the device where the job runs on several.
std::string JobRun::build_where(std::size_t program) const {
  const std::size_t ns = slots_.size();
  for (std::size_t k = 0; k < job_.kernels.size(); ++k)
    if (kernel_program_[k] == program / ns) return "kernels." + job_.kernels[k].name + on_device(program % ns);
  return "kernels";
}

// " (device N)" where the job runs on several devices; else nothing.
std::string JobRun::on_device(std::size_t slot) const {
  return slots_.size() > 1 ? " (device " + std::to_string(slots_[slot]) + ")" : std::string();
}

void JobRun::built(std::size_t program, Result<void> r) {
  --builds_pending_;
  if (cancelled_) {
    end_cancelled();
    return;
  }
  if (!r && !error_) {
    Error e = std::move(r).error();
    if (opts_.untrusted_kernels) e.message = scrub_paths(e.message);  // the log names the server's files
    error_ = std::move(e).context(build_where(program));
  }
  if (builds_pending_ > 0) return;
  if (error_) {
    Error e = std::move(*error_);
    error_.reset();
    fail(std::move(e));
    return;
  }
  result_.stats.compile_ms = static_cast<double>(uv_hrtime() - t_start_) / 1e6;
  run();
}

void JobRun::run() {
  t_run_ = uv_hrtime();
  if (opts_.record_schedule) {
    auto self = shared_from_this();
    engine_.set_schedule_recorder([self](const ScheduleEntry& s) { self->schedule_.push_back(self->schedule_entry_json(s)); });
  }
  if (auto r = make_kernels(); !r) {
    fail(std::move(r).error());
    return;
  }
  // The uploads and the first chunk: this turn's commands.
  engine_.push_error_scope();
  if (end_turn(next_chunk())) open_turns();
}

Result<bool> JobRun::next_chunk() {
  if (!launches_built_) {
    UVCL_TRY(make_buffers());
    if (next_buffer_ < job_.buffers.size()) return true;
    UVCL_TRY(enqueue_launches());
    launches_built_ = true;
    if (prepared_) return false;  // the caller launches
  }
  return launch_chunk();
}

// Closes the turn that `launched` ends (its error scope open): once no launch
// is left, starts the reads inside the turn's scope, then pops it. Fails the
// job at once on an API error, hands a prepared job over. true: launches
// remain for a later turn.
bool JobRun::end_turn(Result<bool> launched) {
  const bool more = launched && *launched;
  if (more && opts_.chunks_ahead && launches_built_) mark_chunk();
  if (launched && !more && !prepared_) {
    close_turns();
    read_outputs();
    all_made_ = true;
  }
  ++scopes_pending_;
  auto self = shared_from_this();
  auto popped = engine_.pop_error_scope([self](Result<void> r) {
    --self->scopes_pending_;
    if (!r && !self->scope_error_) self->scope_error_ = std::move(r).error();
    self->settle();
  });
  if (!popped) {  // no scope open: this turn's push was popped by another hand
    --scopes_pending_;
    if (!scope_error_) scope_error_ = std::move(popped).error();
  }
  if (!launched) {
    fail(std::move(launched).error());
    return false;
  }
  if (prepared_ && !more) {
    hand_over();
    return false;
  }
  if (!more) settle();  // for a read that failed at once, or a failed pop
  return more;
}

// Ends the job once every launch and read is enqueued and: with outputs,
// every read has called back (the first read error, which names the output,
// fails it); without, every scope's callback has run (the first failure in
// them fails it).
void JobRun::settle() {
  if (cancelled_) {
    end_cancelled();
    return;
  }
  if (finished_ || !all_made_) return;
  const bool by_reads = !job_.outputs.empty();
  if (by_reads ? reads_pending_ > 0 : scopes_pending_ > 0) return;
  std::optional<Error>& error = by_reads ? error_ : scope_error_;
  if (error) {
    Error e = std::move(*error);
    error.reset();
    fail(std::move(e));
    return;
  }
  finish();
}

// Enqueues up to opts_.launches_per_turn launches in program order, inside
// the turn's error scope. true: launches remain for a later turn.
Result<bool> JobRun::launch_chunk() {
  const std::uint64_t budget = opts_.launches_per_turn;
  std::uint64_t n = 0;
  while (next_launch_ < job_.launches.size()) {
    if (next_repeat_ >= job_.launches[next_launch_].repeat) {
      ++next_launch_;
      next_repeat_ = 0;
      continue;
    }
    if (budget && n == budget) return true;  // more next turn
    const std::string where = "launches[" + std::to_string(next_launch_) + "]";
    auto slot = choose_slot(next_launch_);
    if (!slot) return std::move(slot).error().context(where);
    UVCL_TRY(move_inputs(next_launch_, *slot));
    if (auto res = engine_.launch(launches_[next_launch_ * slots_.size() + *slot]); !res)
      return std::move(res).error().context(where);
    mark_written(next_launch_, *slot);
    if (slots_.size() > 1) ++result_.stats.launches_per_device[slots_[*slot]];
    last_launched_ = next_launch_;
    last_slot_ = *slot;
    ++next_repeat_;
    ++result_.stats.launches;
    ++n;
  }
  return false;
}

void JobRun::open_turns() {
  engine_alive_ = engine_.lifetime();
  auto* t = new Turns;
  uv_loop_t* loop = engine_.loop();
  if (int rc = uv_check_init(loop, &t->check); rc != 0) {
    delete t;
    fail(Error{Status::Initialization, std::string("job runner: uv_check_init: ") + uv_strerror(rc)});
    return;
  }
  ++t->open;
  t->check.data = t;
  if (int rc = uv_idle_init(loop, &t->idle); rc != 0) {
    turns_ = t;
    close_turns();
    fail(Error{Status::Initialization, std::string("job runner: uv_idle_init: ") + uv_strerror(rc)});
    return;
  }
  ++t->open;
  t->idle.data = t;
  t->run = shared_from_this();
  turns_ = t;
  // The engine may be idle between two chunks (every enqueued launch done):
  // the hold keeps run_until turning the loop until the last chunk is in.
  t->hold = engine_.hold_busy();
  uv_check_start(&t->check, on_turn);
  uv_idle_start(&t->idle, keep_polling);
}

void JobRun::on_turn(uv_check_t* h) {
  auto* t = static_cast<Turns*>(h->data);
  std::shared_ptr<JobRun> self = t->run;  // close_turns drops t->run
  if (self->engine_alive_.expired() || self->engine_.device_count() == 0) {
    // The engine was destroyed (or is being): nothing of the job is left to
    // release. The callback still runs once, as for work in its windows.
    self->close_turns();
    self->engine_gone_ = true;
    self->fail(Error{Status::Cancelled, "engine destroyed while the job's launches were being enqueued"});
    return;
  }
  if (self->opts_.chunks_ahead && self->chunks_pending_ >= self->opts_.chunks_ahead) {
    // Enough is enqueued: let the loop sleep until a chunk completes (its
    // marker's callback starts the idle handle again).
    uv_idle_stop(&t->idle);
    return;
  }
  self->engine_.push_error_scope();
  self->end_turn(self->next_chunk());
}

// No new command from here on; the job ends once what it made is done.
void JobRun::on_cancel() {
  if (finished_ || prepared_) return;
  cancelled_ = true;
  close_turns();
  end_cancelled();
}

// Ends a cancelled job once no build, chunk or read of it is in flight:
// its objects are released (fail() runs cleanup) and `done` gets the reason.
void JobRun::end_cancelled() {
  if (finished_ || builds_pending_ > 0 || scopes_pending_ > 0 || reads_pending_ > 0 || chunks_pending_ > 0) return;
  fail(*opts_.cancel->reason());
}

void JobRun::close_turns() {
  Turns* t = turns_;
  if (!t) return;
  turns_ = nullptr;
  t->hold.release();
  uv_check_stop(&t->check);
  uv_idle_stop(&t->idle);
  t->run.reset();
  auto on_close = [](uv_handle_t* h) {
    auto* turns = static_cast<Turns*>(h->data);
    if (--turns->open == 0) delete turns;
  };
  if (t->open >= 1) uv_close(reinterpret_cast<uv_handle_t*>(&t->check), on_close);
  if (t->open >= 2) uv_close(reinterpret_cast<uv_handle_t*>(&t->idle), on_close);
}

// A chunk's end, for RunOptions::chunks_ahead: a read of one element of a
// buffer the chunk's last launch writes waits for that launch (a read waits
// for its buffer's last writer only), so unlike an error scope it does not
// wait for other jobs' commands made before it. The launches of a chunk run
// in order on the device's queues, so this is a close, not exact, mark of
// the chunk being done. A launch that writes no buffer gives no mark.
void JobRun::mark_chunk() {
  const job::Launch& jl = job_.launches[last_launched_];
  const auto& params = params_[jl.kernel];
  const Arg* pick = nullptr;
  for (std::size_t ai = 0; ai < jl.args.size(); ++ai) {
    const Arg& a = jl.args[ai];
    if (a.kind != Arg::Kind::Buffer) continue;
    const bool written = ai >= params.size() || (params[ai].access != ParamAccess::ReadOnly);
    if (written) {
      pick = &a;
      break;
    }
  }
  if (!pick) return;
  const job::Buffer& jb = job_.buffers[pick->buffer];
  auto self = shared_from_this();
  auto marked = [self](const Result<std::span<const std::byte>>&) {
    --self->chunks_pending_;  // a failure is the job's scope's to report
    if (self->turns_) uv_idle_start(&self->turns_->idle, keep_polling);  // a chunk held back may go now
    if (self->cancelled_) self->end_cancelled();
  };
  auto r = engine_.read(buffers_[pick->buffer * slots_.size() + last_slot_], 0, scalar_size(jb.type), std::move(marked));
  if (r) ++chunks_pending_;
}

// Where a library kernel ("FILE:ENTRY") is named: its first launch.
std::string JobRun::library_kernel_where(std::size_t kernel) const {
  for (std::size_t li = 0; li < job_.launches.size(); ++li)
    if (job_.launches[li].kernel == kernel) return "launches[" + std::to_string(li) + "].kernel";
  return "kernels." + job_.kernels[kernel].name;
}

Result<void> JobRun::make_kernels() {
  const std::size_t ns = slots_.size();
  kernels_.resize(job_.kernels.size() * ns);
  params_.resize(job_.kernels.size());
  for (std::size_t i = 0; i < job_.kernels.size(); ++i) {
    const job::Kernel& jk = job_.kernels[i];
    for (std::size_t slot = 0; slot < ns; ++slot) {
      if (!kernel_on_[i * ns + slot]) continue;
      const uvcl::Program program = kernel_program_[i] == kNoProgram ? library_program_[i * ns + slot]
                                                                     : programs_[kernel_program_[i] * ns + slot];
      auto k = engine_.kernel(program, jk.entry.empty() ? jk.name : jk.entry);
      if (!k && !jk.library.empty())
        return job_error(library_kernel_where(i) + ": no kernel function " + json::quote(jk.entry) + " in " +
                         jk.library + ".cl of the server's library");
      if (!k) return std::move(k).error().context("kernels." + jk.name + on_device(slot));
      kernels_[i * ns + slot] = k.value();
      if (!params_[i].empty()) continue;  // the same source everywhere: the same parameters
      auto params = engine_.kernel_params(k.value());
      if (!params) return std::move(params).error().context("kernels." + jk.name);
      params_[i] = std::move(params.value());
    }
  }
  return {};
}

// The buffer's first use in the job's launches is a launch that stores all
// of it before anything reads it: a WriteOnly parameter whose kernel stores
// element get_global_id(0) in every work-item (KernelParam::writes_each_item),
// each of its uses in that launch so, over a 1-D range (other axes 1; jobs
// have no global offset) of at least the buffer's elements. A prepared job
// (uvcl tune) runs its launches in no such order: never there.
bool JobRun::first_use_writes_all(std::size_t buffer, std::size_t bytes) const {
  if (prepared_) return false;
  for (const job::Launch& jl : job_.launches) {
    const auto& params = params_[jl.kernel];
    bool used = false;
    for (std::size_t ai = 0; ai < jl.args.size(); ++ai) {
      const Arg& a = jl.args[ai];
      if (a.kind != Arg::Kind::Buffer || a.buffer != buffer) continue;
      used = true;
      if (ai >= params.size()) return false;
      if (!stores_whole_buffer(params[ai], jl.global, bytes)) return false;
    }
    if (used) return true;
  }
  return false;  // no launch uses it: its zeros are the output
}

// Each buffer gets its copies (copy_on_), and its first contents where it
// starts (home_).
Result<void> JobRun::make_buffers() {
  const std::uint64_t budget = opts_.launches_per_turn;
  const std::size_t ns = slots_.size();
  buffers_.resize(job_.buffers.size() * ns);
  valid_.resize(job_.buffers.size() * ns, false);
  for (std::uint64_t n = 0; next_buffer_ < job_.buffers.size() && (budget == 0 || n < budget); ++n) {
    const std::size_t bi = next_buffer_++;
    const job::Buffer& jb = job_.buffers[bi];
    const std::string where = "buffers." + jb.name;
    const std::size_t elem = scalar_size(jb.type);
    const std::size_t bytes = jb.count * elem;
    for (std::size_t slot = 0; slot < ns; ++slot) {
      if (!copy_on_[bi * ns + slot]) continue;
      auto copy = engine_.allocate(slots_[slot], bytes);
      if (!copy) return std::move(copy).error().context(where + on_device(slot));
      buffers_[bi * ns + slot] = copy.value();
    }
    valid_[bi * ns + home_[bi]] = true;
    const uvcl::Buffer b = buffers_[bi * ns + home_[bi]];
    Result<void> r;
    switch (jb.init.kind) {
      case Init::Kind::Zero: {
        if (first_use_writes_all(bi, bytes)) break;  // the zeros would never be seen
        const std::byte zero{0};
        r = engine_.fill(b, std::span<const std::byte>(&zero, 1), 0, bytes);
        break;
      }
      case Init::Kind::Fill: r = engine_.fill(b, jb.init.bytes, 0, bytes); break;
      case Init::Kind::Data: r = engine_.write(b, 0, jb.init.bytes); break;
      case Init::Kind::File: {
        if (!opts_.allow_files) return job_error(where + ".init.file: files are not allowed here");
        // Never more than the buffer holds: "/dev/zero" or a huge file must
        // not grow memory first and be refused after.
        auto data = files::read_regular(join_path(opts_.base_dir, jb.init.path), bytes, "the buffer's size");
        if (!data) return std::move(data).error().context(where + ".init.file");
        if (data->size() != bytes)
          return job_error(where + ".init.file: " + jb.init.path + " has " + std::to_string(data->size()) +
                           " bytes, expected " + std::to_string(bytes) + " (" + std::to_string(jb.count) + " " +
                           std::string(scalar_type_name(jb.type)) + ")");
        r = engine_.write(b, 0, std::as_bytes(std::span<const char>(data->data(), data->size())));
        break;
      }
      case Init::Kind::Safetensors:
        if (!opts_.allow_files) return job_error(where + ".init.safetensors: files are not allowed here");
        if (auto u = upload_tensor(engine_, disk_, join_path(opts_.base_dir, jb.init.path), jb, b,
                                   where + ".init");
            !u)
          return std::move(u).error();  // already says where
        break;
    }
    if (!r) return std::move(r).error().context(where);
  }
  return {};
}

// Whether the launch reads argument `arg` (a buffer), so that its contents
// must be where the launch runs: anything but a write-only parameter the
// launch stores whole (stores_whole_buffer).
bool JobRun::reads_arg(const job::Launch& jl, std::size_t arg) const {
  const auto& params = params_[jl.kernel];
  if (arg >= params.size() || params[arg].access != ParamAccess::WriteOnly) return true;
  const job::Buffer& jb = job_.buffers[jl.args[arg].buffer];
  return !stores_whole_buffer(params[arg], jl.global, jb.count * scalar_size(jb.type));
}

// A slot whose copy of the buffer is current: where it starts if that is.
std::size_t JobRun::valid_slot(std::size_t buffer) const {
  const std::size_t ns = slots_.size();
  if (valid_[buffer * ns + home_[buffer]]) return home_[buffer];
  for (std::size_t slot = 0; slot < ns; ++slot)
    if (valid_[buffer * ns + slot]) return slot;
  return home_[buffer];  // not reached: a buffer always has a current copy
}

// Where the launch runs: its one device, or the one among those "any" may
// take where the engine expects it to end first, counting the inputs it
// would have to move there.
Result<std::size_t> JobRun::choose_slot(std::size_t li) const {
  const std::vector<std::size_t>& candidates = candidates_[li];
  if (candidates.size() == 1) return candidates[0];
  const std::size_t ns = slots_.size();
  const job::Launch& jl = job_.launches[li];
  std::uint64_t work_items = 1;
  for (std::uint64_t g : jl.global) work_items *= g;
  std::vector<DeviceOption> options(candidates.size());
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    const std::size_t slot = candidates[c];
    options[c].kernel = kernels_[jl.kernel * ns + slot];
    options[c].work_items = work_items;
    for (std::size_t ai = 0; ai < jl.args.size(); ++ai) {
      const Arg& a = jl.args[ai];
      if (a.kind != Arg::Kind::Buffer || valid_[a.buffer * ns + slot] || !reads_arg(jl, ai)) continue;
      const job::Buffer& jb = job_.buffers[a.buffer];
      options[c].inputs.push_back({slots_[valid_slot(a.buffer)], jb.count * scalar_size(jb.type)});
    }
  }
  auto chosen = engine_.choose_device(options);
  if (!chosen) return std::move(chosen).error();
  return candidates[*chosen];
}

// Copies what the launch reads to where it runs, if it is not there yet.
Result<void> JobRun::move_inputs(std::size_t li, std::size_t slot) {
  const std::size_t ns = slots_.size();
  const job::Launch& jl = job_.launches[li];
  for (std::size_t ai = 0; ai < jl.args.size(); ++ai) {
    const Arg& a = jl.args[ai];
    if (a.kind != Arg::Kind::Buffer || valid_[a.buffer * ns + slot] || !reads_arg(jl, ai)) continue;
    const job::Buffer& jb = job_.buffers[a.buffer];
    const std::size_t bytes = jb.count * scalar_size(jb.type);
    const std::size_t from = valid_slot(a.buffer);
    if (auto r = engine_.copy(buffers_[a.buffer * ns + from], 0, buffers_[a.buffer * ns + slot], 0, bytes); !r)
      return std::move(r).error().context("launches[" + std::to_string(li) + "]: moving buffers." + jb.name +
                                          " from device " + std::to_string(slots_[from]) + " to device " +
                                          std::to_string(slots_[slot]));
    valid_[a.buffer * ns + slot] = true;
    ++result_.stats.moves;
    result_.stats.bytes_moved += bytes;
  }
  return {};
}

// What the launch writes is current only where it ran.
void JobRun::mark_written(std::size_t li, std::size_t slot) {
  const std::size_t ns = slots_.size();
  if (ns == 1) return;
  const job::Launch& jl = job_.launches[li];
  const auto& params = params_[jl.kernel];
  for (std::size_t ai = 0; ai < jl.args.size(); ++ai) {
    const Arg& a = jl.args[ai];
    if (a.kind != Arg::Kind::Buffer || (ai < params.size() && params[ai].access == ParamAccess::ReadOnly)) continue;
    for (std::size_t other = 0; other < ns; ++other) valid_[a.buffer * ns + other] = other == slot;
  }
}

// Every launch, on every device it may run on, built and checked.
Result<void> JobRun::enqueue_launches() {
  const std::size_t ns = slots_.size();
  launches_.resize(job_.launches.size() * ns);
  for (std::size_t li = 0; li < job_.launches.size(); ++li)
    for (std::size_t slot : candidates_[li]) UVCL_TRY(build_launch(li, slot));
  // Everything checked: nothing runs unless all of it can. launch_chunk
  // enqueues them (prepare_job: the caller launches).
  return {};
}

Result<void> JobRun::build_launch(std::size_t li, std::size_t slot) {
  const std::size_t ns = slots_.size();
  const job::Launch& jl = job_.launches[li];
  const job::Kernel& jk = job_.kernels[jl.kernel];
  const std::string where = "launches[" + std::to_string(li) + "] (kernel " + jk.name + ")" + on_device(slot);
  const auto& params = params_[jl.kernel];
  uvcl::Launch l;
  l.kernel = kernels_[jl.kernel * ns + slot];
  l.tag = li;
  for (std::size_t ai = 0; ai < jl.args.size(); ++ai) {
    const Arg& a = jl.args[ai];
    const std::string at = "launches[" + std::to_string(li) + "].args[" + std::to_string(ai) + "]";
    const KernelParam* p = ai < params.size() ? &params[ai] : nullptr;
    switch (a.kind) {
      case Arg::Kind::Buffer: {
        const job::Buffer& jb = job_.buffers[a.buffer];
        if (p) {
          auto pointee = param_pointee(p->type_name);
          if (pointee && *pointee != jb.type)
            return job_error(at + ": kernel " + jk.name + " parameter " + p->name + " is " + p->type_name +
                             ", buffer " + jb.name + " holds " + std::string(scalar_type_name(jb.type)));
        }
        l.args.push_back(KernelArg::of(buffers_[a.buffer * ns + slot]));
        break;
      }
      case Arg::Kind::Scalar: {
        if (p && p->access == ParamAccess::Scalar) {
          auto want = param_scalar(p->type_name);
          if (want && *want != a.scalar.type)
            return job_error(at + ": kernel " + jk.name + " parameter " + p->name + " is " + p->type_name +
                             ", got " + std::string(scalar_type_name(a.scalar.type)));
        }
        l.args.push_back(KernelArg::of(a.scalar));
        break;
      }
      case Arg::Kind::Local: l.args.push_back(KernelArg::local(a.local_bytes)); break;
    }
  }
  for (std::uint64_t g : jl.global) l.global.emplace_back(static_cast<std::size_t>(g));
  for (std::uint64_t g : jl.local) l.local.push_back(static_cast<std::size_t>(g));
  if (auto r = engine_.check_launch(l); !r) return std::move(r).error().context(where);
  launches_[li * ns + slot] = std::move(l);
  return {};
}

// What prepare_job hands over: the job keeps its buffers, kernels and
// programs until the last reference to this goes.
class Prepared final : public PreparedJob {
 public:
  explicit Prepared(std::shared_ptr<JobRun> run) : run_(std::move(run)) {}
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() override { run_->cleanup(); }
  std::size_t device() const override { return run_->device_; }
  const std::vector<uvcl::Launch>& launches() const override { return run_->launches_; }
  const std::vector<uvcl::Buffer>& buffers() const override { return run_->buffers_; }

 private:
  std::shared_ptr<JobRun> run_;
};

void JobRun::hand_over() {
  finished_ = true;
  PrepareCallback prepared = std::move(prepared_);
  prepared(std::shared_ptr<PreparedJob>(std::make_shared<Prepared>(shared_from_this())));
}

// Inside the last turn's scope (a read's own failure is the job's); settle()
// ends the job.
void JobRun::read_outputs() {
  reads_pending_ = job_.outputs.size();
  result_.outputs.resize(job_.outputs.size());
  auto self = shared_from_this();
  for (std::size_t i = 0; i < job_.outputs.size(); ++i) {
    const job::Buffer& jb = job_.buffers[job_.outputs[i]];
    Output& out = result_.outputs[i];
    out.name = jb.name;
    out.type = jb.type;
    const std::size_t bi = job_.outputs[i];
    auto r = engine_.read(buffers_[bi * slots_.size() + valid_slot(bi)], 0, jb.count * scalar_size(jb.type),
                          [self, i](Result<std::span<const std::byte>> data) {
                            --self->reads_pending_;
                            if (!data) {
                              if (!self->error_)
                                self->error_ = std::move(data).error().context(
                                    "outputs." + self->result_.outputs[i].name);
                            } else {
                              self->result_.outputs[i].data.assign(data->begin(), data->end());
                            }
                            self->settle();
                          });
    if (!r) {
      reads_pending_ -= job_.outputs.size() - i;  // the rest never start
      if (!error_) error_ = std::move(r).error().context("outputs." + jb.name);
      return;
    }
  }
}

void JobRun::fail(Error e) {
  if (finished_) return;
  finished_ = true;
  cleanup();
  if (prepared_) {
    PrepareCallback prepared = std::move(prepared_);
    prepared(std::move(e));
    return;
  }
  RunCallback done = std::move(done_);
  done(std::move(e));
}

void JobRun::finish() {
  if (finished_) return;
  finished_ = true;
  const EngineStats after = engine_.stats();
  result_.stats.commands = after.submitted - stats_before_.submitted;
  result_.stats.cross_queue_waits = after.cross_queue_waits - stats_before_.cross_queue_waits;
  result_.stats.run_ms = static_cast<double>(uv_hrtime() - t_run_) / 1e6;
  if (opts_.record_schedule) {
    std::string s = "[";
    for (std::size_t i = 0; i < schedule_.size(); ++i) s += (i ? ",\n" : "\n") + schedule_[i];
    result_.schedule_json = s + "\n]\n";
  }
  cleanup();
  RunCallback done = std::move(done_);
  done(std::move(result_));
}

void JobRun::cleanup() {
  close_turns();
  if (engine_gone_) {  // the engine released everything itself
    buffers_.clear();
    kernels_.clear();
    programs_.clear();
    return;
  }
  if (opts_.record_schedule) engine_.set_schedule_recorder({});
  for (uvcl::Buffer b : buffers_)
    if (b.id != 0) (void)engine_.release(b);
  for (uvcl::Kernel k : kernels_)
    if (k.id != 0) (void)engine_.release(k);
  for (uvcl::Program p : programs_)
    if (p.id != 0) (void)engine_.release(p);
  buffers_.clear();
  kernels_.clear();
  programs_.clear();
}

std::string JobRun::schedule_entry_json(const ScheduleEntry& s) const {
  auto name_of = [&](uvcl::Buffer b) -> std::string {
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (buffers_[i] == b) return job_.buffers[i / slots_.size()].name;
    return "#" + std::to_string(b.id);
  };
  std::string out = "{\"id\": " + std::to_string(s.id) + ", \"op\": \"" + s.op + "\"";
  if (std::strcmp(s.op, "launch") == 0) out += ", \"launch\": " + std::to_string(s.tag);
  out += ", \"device\": " + std::to_string(s.device) + ", \"queue\": " + std::to_string(static_cast<std::int64_t>(
                                                                             s.queue == 0xffffffffu ? -1 : s.queue));
  for (auto [key, list] : {std::pair{"reads", &s.reads}, std::pair{"writes", &s.writes}}) {
    out += std::string(", \"") + key + "\": [";
    for (std::size_t i = 0; i < list->size(); ++i) out += (i ? ", \"" : "\"") + name_of((*list)[i]) + "\"";
    out += "]";
  }
  for (auto [key, list] : {std::pair{"waits", &s.waits}, std::pair{"completed", &s.completed}}) {
    out += std::string(", \"") + key + "\": [";
    for (std::size_t i = 0; i < list->size(); ++i) out += (i ? ", " : "") + std::to_string((*list)[i]);
    out += "]";
  }
  return out + "}";
}

// Shortest text that reads back to the same value.
template <class T>
void append_number(std::string& out, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) {
      out += "\"nan\"";
      return;
    }
    if (std::isinf(v)) {
      out += v > 0 ? "\"inf\"" : "\"-inf\"";
      return;
    }
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

template <class T>
void append_values(std::string& out, const std::vector<std::byte>& data) {
  const std::size_t n = data.size() / sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
    if (i) out += ", ";
    append_number(out, v);
  }
}

void append_output(std::string& out, const Output& o) {
  switch (o.type) {
    case ScalarType::Char: append_values<std::int8_t>(out, o.data); break;
    case ScalarType::UChar: append_values<std::uint8_t>(out, o.data); break;
    case ScalarType::Short: append_values<std::int16_t>(out, o.data); break;
    case ScalarType::UShort: append_values<std::uint16_t>(out, o.data); break;
    case ScalarType::Int: append_values<std::int32_t>(out, o.data); break;
    case ScalarType::UInt: append_values<std::uint32_t>(out, o.data); break;
    case ScalarType::Long: append_values<std::int64_t>(out, o.data); break;
    case ScalarType::ULong: append_values<std::uint64_t>(out, o.data); break;
    case ScalarType::Float: append_values<float>(out, o.data); break;
    case ScalarType::Double: append_values<double>(out, o.data); break;
    case ScalarType::Half: {
      const std::size_t n = o.data.size() / 2;
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t h = 0;
        std::memcpy(&h, o.data.data() + i * 2, 2);
        if (i) out += ", ";
        append_number(out, half_to_float(h));
      }
      break;
    }
  }
}

const char* npy_descr(ScalarType t) {
  switch (t) {
    case ScalarType::Char: return "|i1";
    case ScalarType::UChar: return "|u1";
    case ScalarType::Short: return "<i2";
    case ScalarType::UShort: return "<u2";
    case ScalarType::Int: return "<i4";
    case ScalarType::UInt: return "<u4";
    case ScalarType::Long: return "<i8";
    case ScalarType::ULong: return "<u8";
    case ScalarType::Half: return "<f2";
    case ScalarType::Float: return "<f4";
    case ScalarType::Double: return "<f8";
  }
  return "|u1";
}

}  // namespace

void JobCancel::cancel(Error reason) {
  if (reason_) return;
  reason_ = std::move(reason);
  if (auto hook = std::move(hook_)) hook();
}

Result<void> run_job(Engine& engine, Job job, RunOptions options, RunCallback done) {
  auto run = std::make_shared<JobRun>(engine, std::move(job), std::move(options), std::move(done));
  return run->start();
}

Result<void> prepare_job(Engine& engine, Job job, RunOptions options, PrepareCallback done) {
  auto run = std::make_shared<JobRun>(engine, std::move(job), std::move(options), std::move(done));
  return run->start();
}

Result<RunResult> run_job_sync(Engine& engine, Job job, RunOptions options) {
  // Shared with the callback: should run_until refuse (a call from inside a
  // callback), the job still runs and must not write into this frame.
  auto out = std::make_shared<std::optional<Result<RunResult>>>();
  UVCL_TRY(run_job(engine, std::move(job), std::move(options), [out](Result<RunResult> r) { *out = std::move(r); }));
  UVCL_TRY(engine.run_until([&] { return out->has_value(); }));
  return std::move(**out);
}

std::string result_json(const Engine& engine, const RunResult& r) {
  std::string out = "{\"device\": " + device_info_json(*engine.device(r.device)) + ", \"outputs\": {";
  for (std::size_t i = 0; i < r.outputs.size(); ++i) {
    if (i) out += ", ";
    out += json::quote(r.outputs[i].name) + ": [";
    append_output(out, r.outputs[i]);
    out += "]";
  }
  char stats[320];
  std::snprintf(stats, sizeof stats,
                "}, \"stats\": {\"launches\": %llu, \"commands\": %llu, \"cross_queue_waits\": %llu, "
                "\"queues\": %u, \"compile_ms\": %.3f, \"run_ms\": %.3f",
                static_cast<unsigned long long>(r.stats.launches), static_cast<unsigned long long>(r.stats.commands),
                static_cast<unsigned long long>(r.stats.cross_queue_waits), r.stats.queues, r.stats.compile_ms,
                r.stats.run_ms);
  out += stats;
  if (!r.stats.launches_per_device.empty()) {
    out += ", \"launches_per_device\": [";
    for (std::size_t d = 0; d < r.stats.launches_per_device.size(); ++d)
      out += (d ? ", " : "") + std::to_string(r.stats.launches_per_device[d]);
    out += "], \"moves\": " + std::to_string(r.stats.moves) + ", \"bytes_moved\": " + std::to_string(r.stats.bytes_moved);
  }
  return out + "}}";
}

std::string npy_header(const Output& o) {
  const std::size_t n = o.data.size() / scalar_size(o.type);
  std::string dict = std::string("{'descr': '") + npy_descr(o.type) + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(n) + ",), }";
  const std::size_t preamble = 10;  // magic (6) + version (2) + header length (2)
  while ((preamble + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  const auto len = static_cast<std::uint16_t>(dict.size());
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  return out + dict;
}

Result<void> write_npy(const std::string& path, const Output& o) {
  const std::string header = npy_header(o);
  // O_NOFOLLOW: a symbolic link planted at the output's name is not followed
  // out of the folder.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  std::FILE* f = fd < 0 ? nullptr : ::fdopen(fd, "wb");
  if (!f) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return Error{Status::Io, "cannot write " + path + ": " + std::strerror(err)};
  }
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(o.data.data(), 1, o.data.size(), f) == o.data.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return Error{Status::Io, "cannot write " + path};
  return {};
}

}  // namespace uvcl::job
