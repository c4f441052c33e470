// engine_impl.hpp — the Engine's internal state. One struct, one thread.
//
// Responsibilities are split over files: engine.cpp (lifecycle, the loop
// side, close), memory.cpp (buffers), staging.cpp (pinned host pool),
// host_memory.cpp (pinned memory handed to the caller), programs.cpp
// (builds, kernels, argument info), compilers.cpp (builds in compiler
// processes: which process builds what, results, failures, the fallback), launch.cpp (launch validation),
// submit.cpp (windows -> queues, waits, fences), completion.cpp (the command
// record's state machine, the timelines' completion walk, outcomes),
// error_scopes.cpp (drains and error scopes), transfers.cpp (read, write,
// fill, copies, cross-device staging).
#pragma once

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <pthread.h>
#include <uv.h>

#include "cl/api.hpp"
#include "cl/devices.hpp"
#include "engine/compiler_process.hpp"
#include "engine/program_cache.hpp"
#include "engine/program_memo.hpp"
#include "engine/staging.hpp"
#include "engine/trace.hpp"
#include "loop/handles.hpp"
#include "sched/command_graph.hpp"
#include "sched/command_store.hpp"
#include "sched/hazards.hpp"
#include "sched/queue_choice.hpp"
#include "sched/scratch_list.hpp"
#include "sched/states.hpp"
#include "sched/window.hpp"
#include "uvcl/engine.hpp"

namespace uvcl {

using sched::CommandId;
using sched::QueueIndex;

enum class Op : std::uint8_t { Launch, Timed, Write, Fill, Read, Copy, CrossWrite };
const char* op_name(Op op) noexcept;

struct Access {
  std::uint64_t buffer = 0;
  bool read = false;
  bool write = false;
};

// Called once per command when it is final: its outcome is known and its
// event (if it had one) has completed. nullopt error: success.
using FinalHook = std::function<void(CommandId, const std::optional<Error>&)>;

struct Command {
  CommandId id = 0;
  Op op = Op::Launch;
  std::uint64_t tag = 0;
  sched::ScratchList<Access, 4> accesses;
  std::vector<CommandId> extra_producers;  // cross-device write: its chunk reads
  // Launch / Timed
  std::uint64_t kernel = 0;
  sched::ScratchList<KernelArg, 8> args;
  std::uint32_t dims = 0;
  std::array<std::size_t, 3> global{}, local{};
  bool has_local = false;
  // Transfers
  std::size_t offset = 0, bytes = 0, src_offset = 0;
  const void* host_src = nullptr;
  void* host_dst = nullptr;
  std::vector<std::byte> pattern;
  std::uint64_t cross = 0;  // CrossCopy id
  FinalHook on_final;
  bool wants_callback = false;  // someone waits: ask the driver for a callback
};

// One record per command, its whole life (sched::CommandState), in dense
// storage by id (Engine::Impl::commands) from enqueue until it is final.
struct CommandRec {
  sched::CommandState state = sched::CommandState::Pending;
  Op op = Op::Launch;
  bool seen_done = false;  // the driver said done; the completion step has not run yet
  std::uint32_t device = 0;
  QueueIndex queue = sched::kNoQueue;
  cl_int status = CL_QUEUED;
  // Its own, or a fence (a marker enqueued right after it) that completes
  // it and every event-less command before it on its queue. Released once
  // final.
  cl_event event = nullptr;
  cl_event gate = nullptr;   // timed launches: a user event later work waits on
  std::uint64_t kernel = 0;
  std::uint64_t tag = 0;
  std::uint64_t submit_ns = 0;
  sched::GraphNode node;                          // its place in the dependency graph
  sched::ScratchList<std::uint64_t, 4> written;  // buffers it writes: poisoned if it fails
  std::vector<std::uint64_t> frees;    // Dying buffers whose last uses include this one
  FinalHook hook;                      // runs once, when final
  std::optional<Error> outcome;        // Parked: a failure known before the device finished
  std::optional<Result<Timing>> timing;   // timed launches, read at completion
  std::unique_ptr<TraceCommand> trace;    // while tracing
};

struct BufferRec {
  std::uint32_t device = 0;
  cl_mem mem = nullptr;
  std::size_t bytes = 0;
  std::uint32_t refs = 1;          // user references
  std::uint32_t pending_uses = 0;  // commands still in a window
  std::uint32_t uses_in_flight = 0;  // Dying: submitted uses it waits for (free_when_unused)
  sched::BufferState state = sched::BufferState::Live;
  sched::BufferHazards hazards;
  std::optional<Error> poison;
};

// Memory from alloc_host: a staging block handed to the caller.
struct HostRec {
  std::uint32_t device = 0;
  Staging block;
  std::size_t bytes = 0;
  std::uint32_t uses = 0;  // transfers in flight from or into it
  bool released = false;   // freed when uses reaches 0
};

struct ProgramRec {
  // Queued / InProcess: waiting for, or building in, a compiler process;
  // Received: its binary came back and is loaded by poll_builds; Building:
  // clBuildProgram ran (from source, or the binary) and the status is polled.
  enum class Build { Queued, InProcess, Received, Building, Built, Failed };
  std::uint32_t device = 0;
  cl_program program = nullptr;
  Build build = Build::Building;
  std::optional<Error> error;
  BuildCallback on_built;
  std::uint32_t kernels = 0;  // live kernels made from it
  bool released = false;
  // Kept while building: a cached binary that fails to build falls back
  // to the source.
  std::string source, options;
  std::optional<ProgramCache::Key> cache_key;
  bool from_binary = false;
  bool from_process = false;  // the binary came from a compiler process
  std::vector<CachedKernel> cached;  // parameter info stored with the binary
  std::vector<unsigned char> binary;  // from the compiler process, until built
  std::uint64_t build_start_ns = 0;
};

// The value an argument of a kernel object was last set to: launches that
// repeat it skip clSetKernelArg. A buffer is known by its cl_mem and the
// engine's free count, since a freed handle's address may be reused.
struct SetArg {
  std::size_t size = 0;
  std::array<std::byte, 8> bytes{};
  std::uint64_t frees = 0;
  bool valid = false;
  bool operator==(const SetArg&) const = default;
};

struct KernelRec {
  std::uint64_t program = 0;
  std::uint32_t device = 0;
  cl_kernel kernel = nullptr;
  std::string name;
  std::vector<KernelParam> params;
  std::vector<SetArg> set_args;  // one per parameter
  std::size_t max_work_group = 0;  // CL_KERNEL_WORK_GROUP_SIZE
  std::uint32_t uses = 0;          // launches in windows or in flight
  bool released = false;
};

// An in-order queue is a timeline: its commands complete in the order they
// were enqueued, so one event completes every command before it. Commands
// get an event of their own only where someone awaits them (a read, a timed
// launch, a callback) or traces them; the others are completed by the next
// event on their queue — a fence (a marker) attached to the last command of
// each flushed window, or made when another queue must wait.
struct Queue {
  cl_command_queue queue = nullptr;
  std::deque<CommandId> in_flight;  // in submission order = completion order = id order
  bool dirty = false;               // enqueued since the last clFlush
  bool needs_fence = false;         // the last command in flight has no event
  // Status reads of its oldest event that failed in a row: a read that
  // fails once is tried again at the next poll; only a persistent failure
  // fails the commands that event completes (it may complete many).
  std::uint8_t failed_reads = 0;
  // The command completed last on this queue, if it failed (0 if it did
  // not): a driver may fail what it queued behind a failed command (PoCL
  // fails the commands enqueued while it was pending), and the errors of
  // those commands name it.
  CommandId failed_ahead = 0;
};

struct DeviceCtx;

// A device's compiler processes and the builds waiting for one
// (compilers.cpp). Owner of the processes' callbacks.
struct DeviceCompilers final : CompilerProcess::Owner {
  Engine::Impl* engine = nullptr;
  std::uint32_t device = 0;
  std::vector<CompilerProcess*> processes;
  std::deque<std::uint64_t> waiting;  // program ids, in compile order
  // The compiler program could not be started: builds run inline.
  bool inline_only = false;

  void on_result(CompilerProcess& c, compiler::BuildResult result) override;
  void on_lost(CompilerProcess& c, CompilerProcess::Lost how, std::uint64_t program, const Error& why) override;
};

struct DeviceCtx {
  cl::Device dev;
  DeviceCompilers compilers;
  cl_context context = nullptr;
  // [0, n) compute queues chosen by the scheduler; n: profiling queue for
  // timed launches; n + 1: transfer queue for staged cross-device writes.
  std::vector<Queue> queues;
  std::vector<std::uint32_t> load;  // compute queues only
  sched::Window<Command> window;
  sched::DeviceState state = sched::DeviceState::Ready;
  std::uint64_t allocated = 0;
  std::optional<CommandId> barrier;  // a timed launch later work waits for
  std::unique_ptr<StagingPool> staging;
  // Staging maps and unmaps only: the loop blocks on a map, which must not
  // sit behind a transfer.
  cl_command_queue map_queue = nullptr;
  // Copies into this device with chunk writes still to enqueue, in
  // submission order: their writes go out in that order.
  std::deque<std::uint64_t> cross_writes;
  // Every command gets an event of its own (Config::command_events): no
  // event-less commands, no fences.
  bool event_per_command = false;
  bool submitting = false;  // inside submit_window: a nested call leaves new commands to the outer one

  explicit DeviceCtx(std::size_t window_size) : window(window_size) {}
  QueueIndex compute_queues() const { return static_cast<QueueIndex>(load.size()); }
  QueueIndex profiling_queue() const { return compute_queues(); }
  QueueIndex transfer_queue() const { return compute_queues() + 1; }
};

struct CrossChunk {
  CommandId read = 0;
  std::size_t offset = 0, bytes = 0;  // relative to the copy
  Staging staging;
  cl_event write = nullptr;
  bool read_done = false, written = false;
};

struct CrossCopy {
  std::uint32_t src_device = 0, dst_device = 0;
  std::uint64_t dst = 0;
  std::size_t dst_offset = 0;
  // The chunk reads read [read_offset, +bytes) of read_from: the source
  // itself, or a snapshot of it (a buffer of the engine's, reference dropped
  // once the last read is enqueued) when the copy is larger than its ring.
  std::uint64_t read_from = 0, snapshot = 0;
  std::size_t read_offset = 0;
  std::vector<CrossChunk> chunks;
  std::size_t reads_issued = 0, reads_done = 0;
  CommandId dst_command = 0;
  cl_event user_event = nullptr;     // owned by the dst command's record
  // What the dst command waits for (retained), and the commands they belong
  // to (0: unknown): no chunk write goes out before all have completed.
  std::vector<cl_event> dst_waits;
  std::vector<CommandId> dst_wait_ids;
  std::size_t next_write = 0;        // chunks [0, next_write) have their write enqueued
  bool dst_submitted = false;
  bool abandoned = false;            // teardown failed its user event
  std::optional<Error> error;
  std::size_t outstanding_writes = 0;
};

// The commands made while a scope was the innermost one, and the first error
// among them (error_scopes.cpp).
struct ErrorScope {
  std::optional<Error> error;
  CommandId target = 0;  // once closed: the last command made before
  DoneCallback on_done;  // once closed: runs when every command up to target is final
  bool closed = false;
};

struct Engine::Impl final : loop::Hooks, sched::EventRefs, sched::FailureSink, sched::GraphNodes {
  Config config;
  std::unique_ptr<cl::Library> library;
  const cl::Api* api = nullptr;
  uv_loop_t* loop = nullptr;
  std::unique_ptr<uv_loop_t> own_loop;
  loop::Handles* handles = nullptr;
  std::shared_ptr<const void> lifetime = std::make_shared<char>(0);  // Engine::lifetime()
  std::vector<std::unique_ptr<DeviceCtx>> devices;
  std::unique_ptr<ProgramCache> cache;  // with config.cache_dir
  std::unique_ptr<ProgramMemo> memo;    // built programs, config.program_memo entries
  std::unique_ptr<Trace> trace;         // while tracing

  std::uint64_t next_handle = 1;
  std::unordered_map<std::uint64_t, BufferRec> buffers;
  std::unordered_map<std::uint64_t, ProgramRec> programs;
  std::unordered_map<std::uint64_t, KernelRec> kernels;
  sched::CommandStore<CommandRec> commands;  // every command not yet final, by id
  std::unordered_map<std::uint64_t, CrossCopy> crosses;
  std::unordered_map<std::uint64_t, HostRec> host_memory;
  std::map<const std::byte*, std::uint64_t> host_ranges;  // first byte -> host_memory id
  std::vector<std::uint64_t> building;  // programs being built
  std::size_t dying = 0;                // buffers at zero references, not yet freed
  std::unordered_map<std::uint64_t, ErrorScope> scopes;
  std::map<CommandId, std::uint64_t> scope_from;  // first command id -> scope, up to the next entry
  std::vector<std::uint64_t> open_scopes;          // pushed by the user, innermost last
  std::vector<std::uint64_t> closing;              // closed, waiting for their commands, in order
  std::uint64_t root_scope = 0;                    // drain()'s
  std::uint64_t next_scope = 1;

  sched::Hazards hazards{*this};
  sched::CommandGraph graph{*this, this};
  std::vector<std::vector<sched::CommandGraph::Outcome>> outcome_spares;  // process_outcomes' buffers, reused
  EngineStats counters;
  mutable std::uint64_t status_queries = 0;  // EngineStats::status_queries (is_complete is const)
  ErrorListener error_listener;
  std::function<void(const ScheduleEntry&)> schedule_recorder;
  int in_callback = 0;  // > 0 while the loop runs one of our callbacks
  // User code the engine's steps raise — the error listener, the schedule
  // recorder — waits here and runs at the end of on_prepare / on_poll, so it
  // never re-enters submission or sees half-updated state.
  std::vector<Error> undelivered_errors;
  std::vector<ScheduleEntry> undelivered_schedule;
  int entries = 0;  // Entry objects on the stack
  // Destroyed from inside one of its own callbacks: the Engine handed its
  // Impl over to `self`, torn down when the outermost Entry ends.
  bool doomed = false;
  std::unique_ptr<Impl> self;
  // Engine::close: Closing until every command is final, then everything is
  // released and on_closed runs.
  enum class CloseState { Open, Closing, Closed };
  CloseState close_state = CloseState::Open;
  std::function<void()> on_closed;
  // Components with work still to enqueue from their own loop handles (a job
  // runner between chunks): busy, so run_until keeps turning the loop.
  int loop_holds = 0;
  bool polling = false;
  // Config::spin_us: the loop spins until then (uv_hrtime) while busy.
  std::uint64_t spin_until_ns = 0;
  // Awaited commands submitted while spinning: their driver callbacks are
  // asked for only if spinning ends before they complete.
  std::vector<CommandId> callback_after_spin;
  // Config::loop_budget_us: the end of this loop iteration's share (0: no
  // bound), and whether work was left for the next iteration. Outcomes
  // taken from the graph but not yet delivered wait in deferred_outcomes, in
  // order, ahead of newer ones.
  std::uint64_t iteration_deadline_ns = 0;  // set by the iteration's first on_poll, cleared by on_check
  std::uint64_t step_deadline_ns = 0;       // iteration_deadline_ns inside on_poll, else 0
  std::size_t collect_next = 0;             // the queue (over all devices) the completion walk serves next
  bool backlog = false;
  std::deque<sched::CommandGraph::Outcome> deferred_outcomes;
  bool over_budget() const { return step_deadline_ns != 0 && uv_hrtime() >= step_deadline_ns; }
  // Outcomes wait for a later iteration only while few do (a bound on what
  // they hold alive). The completion walk does not run while any wait: it
  // would only add to them.
  static constexpr std::size_t kMaxDeferredOutcomes = 1024;
  bool yield_now() const { return over_budget() && deferred_outcomes.size() < kMaxDeferredOutcomes; }

  // loop::Hooks
  void on_prepare() override;
  void on_poll() override;
  void on_check() override;
  // sched::EventRefs
  bool is_complete(CommandId id) const override;
  // sched::FailureSink: poisons what a submitted command writes (an
  // unsubmitted one is poisoned by discard_unsubmitted).
  void on_failed(CommandId id, const Error& error) override;
  sched::GraphNode* find(CommandId id) override {  // the graph's node lives in the record
    CommandRec* r = commands.find(id);
    return r ? &r->node : nullptr;
  }

  // engine.cpp
  Result<void> init_devices();
  void update_busy();
  bool busy() const;      // the loop must keep turning for the engine
  bool has_work() const;  // commands, builds, scopes, copies or frees still to finish
  // A failure where it starts (not the failures it causes downstream, which
  // reach their own commands' callbacks): to the error listener, and to the
  // error scope of the command that failed — the root scope for an error no
  // command owns (a lost device).
  void report(const Error& e);
  void report(CommandId failed, const Error& e);
  void deliver_raised();  // runs the listener and recorder calls waiting in undelivered_*
  void cancel_windows();  // shutdown: window contents get Cancelled
  // Calls that make new work refuse it once close() was called.
  Result<void> refuse_if_closing(const char* what) const;
  // Debug builds: every call comes from the thread that made the engine (its
  // loop's); another thread aborts with a message naming the call.
  pthread_t loop_thread = pthread_self();
  void check_thread(const char* what) const;
  void finish_close_if_idle();
  void shutdown();

  // memory.cpp
  Result<BufferRec*> live_buffer(Buffer b, const char* what);
  // The device `what` (an API call's name) is asked for: in range, not lost.
  Result<DeviceCtx*> usable_device(std::size_t device, const char* what);
  // Memory of the device's context `what` asks for: not empty, not beyond
  // the device's largest allocation.
  static Result<void> check_allocation_size(const DeviceCtx& d, std::size_t bytes, const char* what);
  // A Dying buffer is freed once no window holds it and its last uses have
  // completed: each incomplete use frees it from its completion step
  // (release_uses); no scan, no driver call.
  void free_when_unused(std::uint64_t id);
  // A release by the engine itself (no API checks): the last one frees the
  // buffer once its uses end.
  void drop_ref(std::uint64_t id, BufferRec& r);
  void release_uses(std::vector<std::uint64_t>& frees);
  void free_buffer(std::uint64_t id, BufferRec& b);
  std::uint64_t buffers_freed = 0;  // SetArg: a buffer argument set before a free may name a reused handle

  // host_memory.cpp
  // A transfer of [p, p + n) from or into host memory: counts a use of the
  // host memory holding it, undone when `then` (wrapped) runs. Memory that
  // is not host memory passes through unchanged; a range that starts in
  // host memory but runs past its end is an error.
  Result<FinalHook> hold_host_range(const void* p, std::size_t n, const char* what, FinalHook then);
  void free_host(std::uint64_t id);  // back to the staging pool
  void free_host_memory();           // shutdown

  // programs.cpp
  void poll_builds();
  // From source: creates the program and starts its build.
  cl_int start_build(ProgramRec& p);
  // From opencl.cache_dir: creates the program from a valid cached binary
  // (false: no usable entry).
  bool load_cached(ProgramRec& p);
  // From a compiler process's binary (p.binary): creates the program and
  // starts its build, or fails the program.
  void load_received(std::uint64_t id, ProgramRec& p);
  cl_int build_program(ProgramRec& p);
  // The program's build finished (built or failed): on_built runs.
  void builds_done(std::uint64_t id, ProgramRec& p);
  void store_in_cache(ProgramRec& p);
  Result<void> query_params(KernelRec& k, const CachedKernel* cached);
  void maybe_free_kernel(std::uint64_t id);
  void maybe_free_program(std::uint64_t id);

  // compilers.cpp
  // Queues the build for the device's compiler process; false: the device
  // builds inline (opencl.compile "inline", or the fallback).
  bool build_in_process(std::uint64_t id, ProgramRec& p);
  void dispatch_builds(DeviceCompilers& dc);  // hands waiting builds to idle processes, starts new ones
  // The compiler program cannot be started: the device's builds, queued and
  // to come, run inline.
  void fall_back_to_inline(DeviceCompilers& dc, const std::string& why);
  void close_compilers();  // shutdown
  std::optional<std::string> compiler_path;  // resolved on first need; "" none found

  // launch.cpp
  Result<Command> resolve_launch(const Launch& l, Op op);

  // submit.cpp
  CommandId enqueue(std::uint32_t device, Command c);  // into the window; may submit
  void submit_window(std::uint32_t device);
  void submit_all();
  void submit_one(DeviceCtx& d, Command& c);
  void fail_unsubmitted(const Command& c, Error e);
  cl_int enqueue_cl(DeviceCtx& d, Command& c, QueueIndex q, const std::vector<cl_event>& waits, cl_event* ev,
                    const char** call);
  // Fences every queue whose last command has no event, then flushes.
  void flush_dirty_queues(DeviceCtx& d);
  // A marker after the last command of queue q, which then carries it as
  // its event; nullptr if the marker could not be enqueued.
  cl_event fence(DeviceCtx& d, QueueIndex q);
  // The first command at or after `id` on its queue that has an event (so
  // completes with it), or nullptr.
  CommandRec* completed_by(const DeviceCtx& d, CommandId id, QueueIndex q);
  // The event another queue waits on for command `id`: its own, the next
  // fence on its queue, or a new fence. nullptr: no fence could be made.
  cl_event event_for_wait(DeviceCtx& d, CommandId id);
  // Whether the command gets an event of its own.
  bool needs_own_event(const DeviceCtx& d, const Command& c) const;
  void collect_completions();
  bool collect_group(DeviceCtx& d, QueueIndex qi);  // true: the queue's first commands completed
  // failed_ahead: the failed command completed just before it on its
  // in-order queue (0: none).
  // by: the command whose event said so, if not this one's own. cause: the
  // failure in more detail than the status (a cross-device copy's chunk).
  void event_completed(CommandId id, cl_int status, CommandId failed_ahead = 0, CommandId by = 0,
                       const Error* cause = nullptr);
  void complete_queue_front(DeviceCtx& d, QueueIndex qi, std::size_t count, cl_int status);
  void open_gate(CommandRec& r);  // completes and drops a timed launch's gate
  void process_outcomes();
  void deliver_outcome(sched::CommandGraph::Outcome& o);
  void finalize(CommandId id, const std::optional<Error>& error);
  // The record's state machine: every move goes through here; an illegal
  // one is a bug in the engine (asserted in debug builds).
  void transition(CommandRec& r, sched::CommandEvent e);
  // Final: drops it (and the final ones after it) once every older command
  // is final too.
  void make_final(CommandRec& r);
  Error event_error(CommandId id, const CommandRec& r, CommandId failed_ahead, CommandId by) const;
  void trace_completed(CommandRec& r);
  void lose_device(std::uint32_t device, const Error& why);

  // error_scopes.cpp
  void enter_scope(std::uint64_t scope);  // commands made from now on belong to it
  void open_root_scope();
  void capture_error(std::uint64_t scope, const Error& error);
  std::uint64_t scope_of(CommandId id) const;
  void close_scope(std::uint64_t scope, DoneCallback on_done);
  void check_scopes();   // closed scopes whose commands are all final call back
  void cancel_scopes();  // shutdown

  // transfers.cpp
  CommandId cross_read(std::uint64_t xid, std::size_t i);  // enqueues chunk i's read; the caller counts reads_issued
  void release_snapshot(CrossCopy& x);
  void cross_chunk_read(std::uint64_t xid, std::size_t i, const std::optional<Error>& error);
  void cross_start_writes(std::uint64_t cross);
  void poll_crosses();
  void cross_finish(std::uint64_t xid);
  void submit_cross_write(DeviceCtx& d, const Command& c, const std::vector<cl_event>& waits, cl_event* ev);
};

// The engine's internals, for uvcl's own components built on its API.
struct EngineAccess {
  // Mutable access only through a mutable engine, whatever constness the
  // pointer itself would allow.
  // cppcheck-suppress constParameter
  static Engine::Impl& impl(Engine& e) { return *e.impl_; }
};

// A call into the engine from which user callbacks may run: a loop handle's
// (on_prepare, on_poll) or a convenience that runs the loop (run_until,
// poll). An engine destroyed by one of its callbacks is torn down when the
// outermost one ends, once none of its frames is on the stack; `destroyed`
// (optional) is then set.
class Entry {
 public:
  explicit Entry(Engine::Impl& e, bool* destroyed = nullptr) : e_(e), destroyed_(destroyed) { ++e_.entries; }
  ~Entry();
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

 private:
  Engine::Impl& e_;
  bool* destroyed_;
};

// Runs fn with the re-entrancy guard that run_until checks.
template <class Fn>
void in_user_callback(Engine::Impl& e, Fn&& fn) {
  ++e.in_callback;
  fn();
  --e.in_callback;
}

void CL_CALLBACK on_cl_event(cl_event ev, cl_int status, void* token);

// A build that failed with a build log (programs.cpp): the same words
// whether the log came from clBuildProgram here or from a compiler process.
// from_process_binary: the compiler's binary did not build in the engine.
Error build_log_error(std::uint32_t device, const std::string& log, bool from_process_binary);

}  // namespace uvcl
