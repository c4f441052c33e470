// uvcl/engine.hpp — OpenCL on every device, from one libuv loop.
//
// Contract:
// - One thread. Every call is made on the loop thread and returns without
//   waiting on a device. Results arrive through callbacks on the loop thread.
//   As in libuv: when a call that takes a callback returns an error, the
//   callback is never called; otherwise it is called exactly once.
// - Launches, writes, fills and copies are fire-and-forget: they enter the
//   device's micro-batch window and are submitted when it is full, once per
//   loop iteration, or at a sync point (a read, unless it is in a burst;
//   a timed launch; a drain).
//   Whatever queues they land on, results equal running every command one
//   after another in program order.
// - Errors at the API edge (a released buffer, a wrong argument) are returned
//   at once. Errors that happen on the device are delivered to the work they
//   concern: the failed command's own callback, its dependents', its error
//   scope (push_error_scope) or drain, and to the error listener. A
//   failed command poisons the buffers it would have written: later commands
//   reading them fail with that error until the buffer is written again.
// - Destroying the engine cancels work still in windows (its callbacks get
//   Status::Cancelled), waits for work already on the devices (the one
//   blocking step, at teardown), releases every OpenCL object and closes every
//   handle. On the engine's own loop that is complete at once; on a caller's
//   loop the handles finish closing on the caller's next uv_run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "uvcl/config.hpp"
#include "uvcl/device_info.hpp"
#include "uvcl/kernel_param.hpp"
#include "uvcl/status.hpp"
#include "uvcl/types.hpp"

struct uv_loop_s;

namespace uvcl {

// Handles are plain ids; a stale or foreign one is an InvalidArgument error.
struct Buffer {
  std::uint64_t id = 0;
  friend bool operator==(Buffer, Buffer) = default;
};
struct Program {
  std::uint64_t id = 0;
  friend bool operator==(Program, Program) = default;
};
struct Kernel {
  std::uint64_t id = 0;
  friend bool operator==(Kernel, Kernel) = default;
};

struct KernelArg {
  enum class Kind { Buffer, Scalar, Local };
  Kind kind = Kind::Scalar;
  uvcl::Buffer buffer;
  uvcl::Scalar scalar;
  std::size_t local_bytes = 0;

  static KernelArg of(uvcl::Buffer b) { KernelArg a; a.kind = Kind::Buffer; a.buffer = b; return a; }
  static KernelArg of(const uvcl::Scalar& s) { KernelArg a; a.kind = Kind::Scalar; a.scalar = s; return a; }
  template <class T>
  static KernelArg value(T v) { return of(uvcl::Scalar::of(v)); }
  static KernelArg local(std::size_t bytes) { KernelArg a; a.kind = Kind::Local; a.local_bytes = bytes; return a; }
};

// One axis of the global size: a work-item count, or — as in zyx — the
// value of a scalar launch argument times the local size of that axis.
struct GlobalAxis {
  std::size_t items = 0;
  int groups_from_arg = -1;  // >= 0: index of an integer scalar argument

  GlobalAxis(std::size_t n = 0) : items(n) {}  // NOLINT: {1024, 16} reads naturally
  static GlobalAxis groups_in_arg(int arg) { GlobalAxis g; g.groups_from_arg = arg; return g; }
};

// Every member has a default member initializer, so {kernel, args, {n}}
// leaves the rest defaulted without -Wmissing-field-initializers warnings.
struct Launch {
  uvcl::Kernel kernel{};
  std::vector<KernelArg> args{};
  std::vector<GlobalAxis> global{};  // 1..3 axes
  std::vector<std::size_t> local{};  // empty (driver's choice) or one per axis
  std::uint64_t tag = 0;             // echoed in the schedule record
};

// Data a launch reads that is on another device (DeviceOption).
struct InputMove {
  std::size_t from_device = 0;
  std::uint64_t bytes = 0;
};

// A device a launch could run on (Engine::choose_device).
struct DeviceOption {
  uvcl::Kernel kernel{};            // the launch's kernel, from a program built for that device
  std::uint64_t work_items = 1;     // the launch's global size, its axes multiplied
  std::vector<InputMove> inputs{};  // what would have to move there first
};

struct Timing {
  std::uint64_t device_ns = 0;  // profiling end - start
  std::uint64_t wall_ns = 0;    // submission to observed completion
};

enum class WriteMode {
  Copy,    // the bytes are copied into pinned staging before write() returns
  Borrow,  // the caller keeps the bytes alive and unchanged until on_done
};

// Pinned host memory of one device's context (Engine::alloc_host). Borrow
// writes from it and read_into() into it run at the pinned transfer rate
// with no copy on the host; from pageable memory the driver stages the bytes
// itself, several times slower on a GPU. The bytes stay valid
// until release(HostMemory) or the engine's destruction, whichever is first.
struct HostMemory {
  std::uint64_t id = 0;
  std::span<std::byte> bytes{};
};

// What the scheduler decided for one command (Engine::set_schedule_recorder).
struct ScheduleEntry {
  std::uint64_t id = 0;
  const char* op = "";  // "launch" | "write" | "read" | "copy" | "fill"
  std::uint64_t tag = 0;
  std::size_t device = 0;
  std::uint32_t queue = 0;
  std::vector<Buffer> reads, writes;
  std::vector<std::uint64_t> waits;
  // Producers on other queues it would have waited for, had they not
  // completed before it was submitted (the wait was dropped): ordered
  // before it all the same.
  std::vector<std::uint64_t> completed;
};

struct EngineStats {
  std::uint64_t launches = 0, writes = 0, reads = 0, copies = 0;
  std::uint64_t bytes_to_device = 0, bytes_from_device = 0, bytes_copied = 0;
  // flushes: clFlush calls: at a window's submission, one per queue with
  // unflushed commands (a window that filled while the caller issues: only
  // queues with long runs of them), and one before another queue waits on
  // an event of a queue not yet flushed.
  std::uint64_t submitted = 0, failed = 0, flushes = 0, cross_queue_waits = 0;
  // clGetEventInfo status reads, each a driver call: hazard checks at
  // submission, completion polling, a cross-device copy's waits and chunks.
  std::uint64_t status_queries = 0;
  // OpenCL events the engine created: a command's own (someone awaits it:
  // a read, a timed launch, a callback; or tracing is on), and fences — one
  // per queue per flushed window, or where another queue must wait on an
  // event-less command. Every other command is completed by the next event
  // on its in-order queue.
  std::uint64_t events = 0, fences = 0;
  // Driver completion callbacks asked for: before the loop may sleep, one
  // per queue on the last awaited command placed there since it last
  // could (the earlier ones complete before it); per awaited command still
  // running when a spin ends; on each queue's last command in finish().
  // None on a device whose completion is polled for (Config::completion).
  std::uint64_t callbacks = 0;
  // Where completion is polled for instead: the polls the loop's fine timer
  // was set for (from kFirstPollUs into a wait, each a little later).
  std::uint64_t polls = 0;
  // Cross-device copies larger than their ring of pinned chunks read the
  // source in place; a command that writes the source while chunks are
  // unread first has the rest copied aside on the source device: how often.
  std::uint64_t snapshots = 0;
  // Wall time the loop spent spinning for completions (opencl.spin_us)
  // instead of sleeping: CPU time of the loop's core. Delivering commands'
  // outcomes meanwhile (their callbacks) is not counted: work the loop does
  // awake anyway. Other callbacks are (the error listener, compile
  // callbacks, the loop's other handles).
  std::uint64_t spin_ns = 0;
  std::uint64_t in_flight = 0, pending = 0;
  // Commands made whose callback has not run yet (not final): in windows, in
  // flight, or done and waiting for delivery (opencl.loop_budget_us).
  std::uint64_t unfinished = 0;
  std::uint64_t live_buffers = 0;
  std::uint64_t host_memory_bytes = 0;  // alloc_host() memory not yet freed
  // Pinned staging memory in use: alloc_host() blocks, and transfers' and
  // cross-device copies' blocks while they run (a copy holds a bounded ring
  // of chunks, whatever its size).
  std::uint64_t staging_bytes = 0;
  // compile() calls served from the in-memory program memo / built anew.
  std::uint64_t program_memo_hits = 0, program_memo_misses = 0;
  // Builds from source done in a compiler process / with clBuildProgram on
  // the loop (opencl.compile "inline", or the fallback); compiler processes
  // started; builds a compiler process took down (a crash, a timeout, a
  // protocol violation).
  std::uint64_t process_builds = 0, inline_builds = 0, compiler_starts = 0, compiler_failures = 0;
  // Devices that fell back to inline builds under opencl.compile "process":
  // no uvcl-compiler found, or it could not start, refused the device or
  // exited before it was ready (said once per engine on stderr).
  std::uint64_t compiler_fallbacks = 0;
};

// How compile() combines its options with opencl.build_options: after them
// (Add), or instead of them (Replace). -cl-kernel-arg-info is always added.
enum class BuildOptionsMode { Add, Replace };

using DoneCallback = std::function<void(Result<void>)>;
using ReadCallback = std::function<void(Result<std::span<const std::byte>>)>;
using TimingCallback = std::function<void(Result<Timing>)>;
using BuildCallback = std::function<void(Result<void>)>;
using ErrorListener = std::function<void(const Error&)>;

class Engine;

// Keeps an engine busy while code built on it waits for something of its own
// (a file read on the same loop, say) that will give the engine more work:
// while a hold lives, run_until and finish keep turning the loop even when
// no command is in flight, as they would for the engine's own work. Made by
// Engine::hold_busy(); released by release() or the destructor, which may
// run after the engine is gone (it then does nothing). Move-only.
class UVCL_EXPORT BusyHold {
 public:
  BusyHold() = default;
  BusyHold(BusyHold&& other) noexcept;
  BusyHold& operator=(BusyHold&& other) noexcept;
  BusyHold(const BusyHold&) = delete;
  BusyHold& operator=(const BusyHold&) = delete;
  ~BusyHold();
  void release();
  bool held() const { return engine_ != nullptr; }

 private:
  friend class Engine;
  BusyHold(Engine* engine, std::weak_ptr<const void> alive) : engine_(engine), alive_(std::move(alive)) {}
  Engine* engine_ = nullptr;
  std::weak_ptr<const void> alive_;
};

class UVCL_EXPORT Engine {
 public:
  // Loads OpenCL, enumerates devices, creates one context and
  // config.queues in-order queues per device (DeviceInfo::queues).
  // loop == nullptr: the engine creates and owns a loop.
  static Result<std::unique_ptr<Engine>> create(const Config& config, uv_loop_s* loop = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  uv_loop_s* loop() const;
  const Config& config() const;
  std::size_t device_count() const;
  // A copy of device `index`'s description; InvalidArgument, naming the
  // index and the count, when index >= device_count().
  Result<DeviceInfo> device(std::size_t index) const;
  bool device_lost(std::size_t index) const;

  // --- memory ---------------------------------------------------------
  Result<Buffer> allocate(std::size_t device, std::size_t bytes);
  Result<void> retain(Buffer b);
  // At zero references the buffer is Dying: freed once its last uses
  // complete. Never drains a queue.
  Result<void> release(Buffer b);
  Result<std::size_t> buffer_size(Buffer b) const;
  std::uint64_t free_bytes(std::size_t device) const;
  // Pinned host memory for fast transfers to and from `device` (see
  // HostMemory). Its release takes effect once no transfer in flight uses it.
  Result<HostMemory> alloc_host(std::size_t device, std::size_t bytes);
  Result<void> release(HostMemory h);

  // --- transfers (all asynchronous and hazard-tracked) ----------------
  Result<void> write(Buffer dst, std::size_t offset, std::span<const std::byte> src,
                     WriteMode mode = WriteMode::Copy, DoneCallback on_done = {});
  // Fills `bytes` bytes at `offset` with a repeated pattern (1..128 bytes,
  // a power of two; offset and size multiples of it).
  Result<void> fill(Buffer dst, std::span<const std::byte> pattern, std::size_t offset, std::size_t bytes,
                    DoneCallback on_done = {});
  // A sync point: waits for the buffer's last writer only. The span passed to
  // on_data points into pinned staging and is valid during the callback.
  // Submitted at once with the commands before it — except in a burst (a
  // read issued within Config::read_burst_us after the previous one
  // returned, with no prepare step of the loop in between), whose reads go
  // together when the window fills, at the prepare step (before the loop
  // may wait) or at the end of poll(). The same for read_into.
  Result<void> read(Buffer src, std::size_t offset, std::size_t bytes, ReadCallback on_data);
  // Reads dst.size() bytes into caller memory, which stays alive and
  // untouched until on_done; into HostMemory it runs at the pinned rate.
  Result<void> read_into(Buffer src, std::size_t offset, std::span<std::byte> dst, DoneCallback on_done);
  // Same device: clEnqueueCopyBuffer. Across devices or platforms: staged
  // through pinned host memory in chunks, so reading and writing overlap.
  Result<void> copy(Buffer src, std::size_t src_offset, Buffer dst, std::size_t dst_offset, std::size_t bytes,
                    DoneCallback on_done = {});

  // --- programs -------------------------------------------------------
  // Builds OpenCL C for a device with opencl.build_options (default
  // -cl-finite-math-only -cl-no-signed-zeros -cl-mad-enable) and `options`
  // (added to them, or instead of them: `mode`), plus -cl-kernel-arg-info.
  // The build runs in a compiler process (opencl.compile), never on the
  // loop. The handle is valid at once; on_built reports success or a
  // KernelCompilation error carrying the build log, or saying how the
  // compiler process failed (a crash, a timeout).
  Result<Program> compile(std::size_t device, const std::string& source, const std::string& options,
                          BuildCallback on_built, BuildOptionsMode mode = BuildOptionsMode::Add);
  // Requires a built program. A missing entry point is an error naming it.
  // `declared`, if non-empty, gives every parameter's access explicitly.
  Result<Kernel> kernel(Program p, const std::string& entry, std::vector<ParamAccess> declared = {});
  Result<std::vector<KernelParam>> kernel_params(Kernel k) const;
  // Releases take effect once no launch in flight uses the object.
  Result<void> release(Program p);
  Result<void> release(Kernel k);

  // --- launches -------------------------------------------------------
  Result<void> launch(const Launch& l);
  // launch() with a callback as a plain function and a pointer, in the C
  // API's shape (uvcl/uvcl.h, uvcl_done_cb): status 0, or a negated Status
  // (Status(-status)); message null on success, else Error::to_string(),
  // valid during the call. on_done runs once the launch is final (success,
  // its own or an inherited failure, or Cancelled). The engine holds it
  // without a heap allocation, where a std::function capturing more than
  // two pointers allocates: a callback per launch costs nothing more.
  // Null on_done: launch(l).
  using LaunchDoneFn = void (*)(int status, const char* message, void* user_data);
  Result<void> launch(const Launch& l, LaunchDoneFn on_done, void* user_data);
  // The checks launch() makes (arguments against the kernel's signature,
  // sizes against the device), without launching.
  Result<void> check_launch(const Launch& l);
  // Which of several devices a launch would end first on: the index into
  // `options`. Counts each device's queues and the work waiting in its
  // window, how long the kernel at that size took there before (else that
  // device's average over all it measured, else a default), and how long the
  // inputs take to move there (read from their device, then written to
  // this one, at the rates those devices' transfers have shown; a slow
  // guess before any, so data stays where it is). A lost device is chosen
  // only when every option is lost. The engine moves nothing: the caller
  // copies the inputs (copy()) and launches there. The same state gives
  // the same answer; ties go to the option that moves less, then the first.
  Result<std::size_t> choose_device(std::span<const DeviceOption> options) const;
  // Runs the kernel alone once the device's earlier work is done (waiting
  // asynchronously) and reports device and wall nanoseconds.
  Result<void> timed_launch(const Launch& l, TimingCallback on_timed);
  // A sync point for everything submitted so far on every device: on_done
  // runs once all of it is done, with the first error of the commands made
  // since the previous drain outside any error scope (and of the device
  // itself: a lost device), if any.
  void drain(DoneCallback on_done);

  // --- error scopes ---------------------------------------------------
  // Errors of the commands made from a push until its pop go to that scope
  // (the innermost one open when a command is made), not to drain() or to
  // an enclosing scope: concurrent users of one engine see only their own.
  void push_error_scope();
  // Closes the innermost scope; on_done runs once every command made before
  // this call is done, with the first error of the scope's commands, if any.
  // An error (and on_done never called) if no scope is open.
  Result<void> pop_error_scope(DoneCallback on_done);

  // --- the loop -------------------------------------------------------
  // Closes the engine without blocking the loop: work still in windows is
  // cancelled (its callbacks get Status::Cancelled), work on the devices
  // runs to its end (callbacks as usual), then every OpenCL object is
  // released, every handle closed, and on_closed runs, on the loop. From the
  // call on, calls that make new work return Status::Cancelled. Destroy the
  // Engine after on_closed (or at any time: the destructor is the blocking
  // fallback).
  Result<void> close(std::function<void()> on_closed);

  // Non-blocking: submits windows, collects completions, runs due
  // callbacks (uv_run NOWAIT on the engine's loop). For game loops.
  void poll();
  // Runs the loop until done() is true. An error if called from inside a
  // callback run by the loop, or if nothing in flight could make done() true.
  Result<void> run_until(const std::function<bool()>& done);
  // Convenience: drain, run until it completes, return its result.
  Result<void> finish();
  // Convenience: read and run until the data is there.
  Result<std::vector<std::byte>> read_sync(Buffer src, std::size_t offset, std::size_t bytes);
  // Convenience: compile and run until it is built.
  Result<Program> compile_sync(std::size_t device, const std::string& source, const std::string& options = {},
                               BuildOptionsMode mode = BuildOptionsMode::Add);

  void set_error_listener(ErrorListener listener);
  // Records every command from now on (docs/architecture.md, "Trace");
  // device times need opencl.profile. trace_json() gives Chrome trace-event
  // JSON of what was recorded and completed so far.
  void set_tracing(bool on);
  std::string trace_json() const;
  void set_schedule_recorder(std::function<void(const ScheduleEntry&)> recorder);
  EngineStats stats() const;
  // Expires when the engine is destroyed. For code that keeps a reference to
  // the engine in its own loop handles (the job runner): check it before
  // touching the engine from a callback that may run after teardown.
  std::weak_ptr<const void> lifetime() const;
  // A hold that keeps the engine busy until released (BusyHold).
  BusyHold hold_busy();

  struct Impl;

 private:
  friend class BusyHold;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uvcl
