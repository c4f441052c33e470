// engine_impl.hpp — the Engine's internal state, on one thread.
//
// Engine::Impl holds the command store (one record per command, its whole
// life), the devices and the loop side (engine.cpp: lifecycle, the loop's
// hooks, close), and wires the parts, each of which owns its own state:
//   Memory       buffers and host memory (memory.hpp)
//   Programs     builds and kernels (programs.hpp)
//   Submitter    windows to queues: queue choice, waits, enqueue (submitter.hpp)
//   Completion   timelines, fences, retirement, outcomes (completion.hpp)
//   Transfers    cross-device copies (transfers.hpp)
//   ErrorScopes  errors delivered to the work they concern (error_scopes.hpp)
// The API calls (Engine::...) live beside the part they use; launch.cpp
// validates launches.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pthread.h>
#include <uv.h>

#include "engine/completion.hpp"
#include "engine/error_scopes.hpp"
#include "engine/memory.hpp"
#include "engine/programs.hpp"
#include "engine/records.hpp"
#include "engine/submitter.hpp"
#include "engine/transfers.hpp"
#include "loop/handles.hpp"
#include "sched/command_store.hpp"
#include "sched/hazards.hpp"
#include "uvcl/engine.hpp"

namespace uvcl {

// Hidden: a nested class takes its visibility from the exported Engine.
struct UVCL_HIDDEN Engine::Impl final : loop::Hooks, sched::EventRefs, sched::FailureSink, sched::GraphNodes {
  Config config;
  std::unique_ptr<cl::Library> library;
  const cl::Api* api = nullptr;
  uv_loop_t* loop = nullptr;
  std::unique_ptr<uv_loop_t> own_loop;
  loop::Handles* handles = nullptr;
  std::shared_ptr<const void> lifetime = std::make_shared<char>(0);  // Engine::lifetime()
  std::vector<std::unique_ptr<DeviceCtx>> devices;
  std::unique_ptr<Trace> trace;         // while tracing

  std::uint64_t next_handle = 1;
  sched::CommandStore<CommandRec> commands;  // every command not yet final, by id

  // The parts, each owning its state (their headers say what each does).
  Memory memory{*this};
  Programs progs{*this};
  Transfers transfers{*this};
  ErrorScopes errors{*this};
  Submitter submitter{*this};
  Completion completion{*this};

  sched::Hazards hazards{*this};
  sched::CommandGraph graph{*this, this};
  EngineStats counters;
  mutable std::uint64_t status_queries = 0;  // EngineStats::status_queries (is_complete is const)
  ErrorListener error_listener;
  std::function<void(const ScheduleEntry&)> schedule_recorder;
  int in_callback = 0;  // > 0 while the loop runs one of our callbacks
  // Between the engine's prepare and check handles: the loop is inside
  // uv_run, in its I/O phase, so a caller's callback running now (a socket
  // read, an async, a signal) must not run the loop again. libuv has no
  // "running" query; a caller's timer or idle callback runs outside this
  // window and is not caught.
  bool in_loop_io_phase = false;
  // A blocking call (run_until) is running the loop for one iteration. The
  // engine's step then stops that iteration's poll from blocking: what the
  // call waits for may have just happened, and on a caller's loop another
  // handle (a listening socket, a long timer) would keep the poll waiting.
  bool in_blocking_run = false;
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
  // The engine's lifecycle, which every public entry point checks first
  // (docs/api.md, "Lifecycle", has the answer of each call in each state):
  //   Open        everything is accepted.
  //   Closing     close() was called: new work is refused (Cancelled); work
  //               on the devices runs to its end; releases, retains, queries
  //               and drains are accepted.
  //   Closed      every object is released and on_closed has run or runs
  //               now; releases are accepted and do nothing.
  //   Destroying  the destructor's teardown (from Open or Closing): new work
  //               is refused, so nothing can wait on work that cannot start;
  //               an on_closed still due runs at its end.
  // A lost device is the device's state (DeviceCtx::state), not the engine's.
  enum class Lifecycle { Open, Closing, Closed, Destroying };
  Lifecycle lifecycle = Lifecycle::Open;
  std::function<void()> on_closed;
  // Components with work still to enqueue from their own loop handles (a job
  // runner between chunks): busy, so run_until keeps turning the loop.
  int loop_holds = 0;  // BusyHold
  bool polling = false;
  // Config::spin_us: the loop spins until then (uv_hrtime) while busy.
  std::uint64_t spin_until_ns = 0;
  std::uint64_t spin_since_ns = 0;  // when the current spin began (0: none); EngineStats::spin_ns
  // Of the current spin, the time spent delivering outcomes (the callbacks
  // and their finalization): work the loop would have done awake anyway.
  std::uint64_t spin_delivering_ns = 0;
  // Config::completion Poll: a wait began this step (ask_callback), so the
  // timer polls from kFirstPollUs again; the interval of the poll now set.
  bool poll_asked = false;
  std::uint64_t poll_interval_ns = 0;

  // loop::Hooks
  void on_prepare() override;
  void on_late_work() override;
  void on_poll() override;
  void on_check() override;
  // sched::EventRefs
  bool is_complete(CommandId id) const override;
  // sched::FailureSink: poisons what a submitted command writes (an
  // unsubmitted one is poisoned by discard_unsubmitted).
  void on_failed(CommandId id, const Error& error) override;
  void on_own_failure(CommandId id, const Error& error) override { report(id, error); }
  sched::GraphNode* find(CommandId id) override {  // the graph's node lives in the record
    CommandRec* r = commands.find(id);
    return r ? &r->node : nullptr;
  }

  // engine.cpp
  Result<void> init_devices();
  void update_busy();
  // Makes sure the loop hears when `ev`, a command of device `d`, completes:
  // the driver's callback (EngineStats::callbacks), or on a device whose
  // completion is polled for, the timer's polls from kFirstPollUs.
  void ask_callback(const DeviceCtx& d, cl_event ev);
  // The same for command `id` if it still runs: its own event, or the one
  // that completes it on its queue (a read sharing a later read's event).
  void ask_callback_for(const DeviceCtx& d, CommandId id);
  void end_spin_if_due(bool busy);  // update_busy's part for Config::spin_us
  void schedule_polls(bool busy);   // update_busy's part for Config::completion Poll
  bool busy() const;      // the loop must keep turning for the engine
  bool has_work() const;  // commands, builds, scopes, copies or frees still to finish
  // A failure where it starts (not the failures it causes downstream, which
  // reach their own commands' callbacks): to the error listener, and to the
  // error scope of the command that failed — the root scope for an error no
  // command owns (a lost device).
  void report(const Error& e);
  void report(CommandId failed, const Error& e);
  void deliver_raised();  // runs the listener and recorder calls waiting in undelivered_*
  void cancel_windows(const char* why);  // close, shutdown: window contents get Cancelled
  // Close and teardown: windows holding reads a burst left there are
  // submitted, not cancelled — each read was issued as a sync point.
  void submit_read_bursts();
  // Calls that make new work refuse it once close() was called or teardown
  // began; releases take effect only while objects are still held.
  Result<void> refuse_new_work(const char* what) const;
  bool released_everything() const { return lifecycle == Lifecycle::Closed || lifecycle == Lifecycle::Destroying; }
  // "closing", "closed", "being destroyed": the state in an error message.
  const char* lifecycle_name() const;
  // Debug builds: every call comes from the thread that made the engine (its
  // loop's); another thread aborts with a message naming the call.
  pthread_t loop_thread = pthread_self();
  void check_thread(const char* what) const;
  void finish_close_if_idle();
  // The destructor's work, once no frame of the engine is on the stack:
  // teardown, then an on_closed that close() accepted and that has not run.
  void destroy();
  void shutdown();

  // The device `what` (an API call's name) is asked for: in range, not lost.
  Result<DeviceCtx*> usable_device(std::size_t device, const char* what);
  // launch.cpp
  // A launch: its live kernel, then the command checked and filled in place
  // (resolve_launch), then enqueued after `finish` (callbacks) has run.
  Result<KernelRec*> launched_kernel(const Launch& l);
  Result<void> resolve_launch(const Launch& l, Op op, KernelRec& k, Command& c);
  template <class Finish>  // void(Command&); defined in launch.cpp, its only user
  Result<void> enqueue_launch(const Launch& l, Op op, Finish&& finish);
  void lose_device(std::uint32_t device, const Error& why);
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

}  // namespace uvcl
