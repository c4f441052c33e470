// engine.cpp — engine lifecycle, the loop side, drains.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "engine/engine_impl.hpp"
#include "loop/running.hpp"

namespace uvcl {

const char* op_name(Op op) noexcept {
  switch (op) {
    case Op::Launch:
    case Op::Timed: return "launch";
    case Op::Write: return "write";
    case Op::Fill: return "fill";
    case Op::Read: return "read";
    case Op::Copy:
    case Op::CrossWrite: return "copy";
  }
  return "?";
}

namespace {

// The seed's handler for ROCm's abort on context loss; only when asked.
void absorb_sigabrt(int) {
  static const char msg[] = "uvcl: SIGABRT absorbed (opencl.absorb_sigabrt)\n";
  [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Engine>> Engine::create(const Config& config, uv_loop_s* loop) {
  UVCL_TRY(validate_config(config));
  if (!config.cache_dir.empty()) UVCL_TRY(ProgramCache::check_dir(config.cache_dir));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  // Handle ids carry the engine's number in their high bits: a handle given
  // to another engine on the same loop is unknown there, not its namesake.
  static std::atomic<std::uint64_t> engines_made{0};
  const std::uint64_t engine_bits = ((engines_made.fetch_add(1, std::memory_order_relaxed) + 1) & 0xffffff) << 40;
  impl->next_handle = engine_bits | 1;
  impl->memory.buffers.set_tag(engine_bits | Memory::kBufferHandleBit);
  if (config.absorb_sigabrt) std::signal(SIGABRT, absorb_sigabrt);
  auto lib = cl::Library::open(config.library);
  if (!lib) return std::move(lib).error();
  impl->library = std::move(lib.value());
  impl->api = &impl->library->api();

  if (loop == nullptr) {
    impl->own_loop = std::make_unique<uv_loop_t>();
    if (int rc = uv_loop_init(impl->own_loop.get()); rc != 0)
      return Error{Status::Initialization, std::string("uv_loop_init: ") + uv_strerror(rc)};
    loop = impl->own_loop.get();
  }
  impl->loop = loop;
  if (!config.cache_dir.empty()) impl->progs.cache = std::make_unique<ProgramCache>(config.cache_dir);
  {
    const cl::Api* api = impl->api;
    impl->progs.memo = std::make_unique<ProgramMemo>(
        config.program_memo, [api](ProgramMemo::Handle h) { api->clReleaseProgram(static_cast<cl_program>(h)); });
  }
  auto handles = loop::Handles::open(loop, impl.get());
  if (!handles) {
    if (impl->own_loop) uv_loop_close(impl->own_loop.get());
    return std::move(handles).error();
  }
  impl->handles = handles.value();
  impl->errors.open_root_scope();
  if (auto r = impl->init_devices(); !r) {
    impl->shutdown();
    return std::move(r).error();
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<void> Engine::Impl::init_devices() {
  auto found = cl::enumerate_devices(*api, config.platform_ids, config.debug_backends);
  if (!found) return std::move(found).error();
  for (cl::Device& dev : found.value()) {
    auto d = std::make_unique<DeviceCtx>(config.window);
    d->dev = dev;
    d->compilers.engine = this;
    d->compilers.device = static_cast<std::uint32_t>(dev.info.index);
    const std::string where = "device " + std::to_string(dev.info.index) + " (" + dev.info.name + ")";
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(dev.platform),
                                     0};
    cl_int rc = CL_SUCCESS;
    d->context = api->clCreateContext(props, 1, &dev.id, nullptr, nullptr, &rc);
    if (rc != CL_SUCCESS) return cl::call_error(Status::Initialization, "clCreateContext", rc).context(where);
    const unsigned n = config.queues.value_or(dev.info.type == DeviceType::Cpu ? kAutoCpuQueues : kAutoGpuQueues);
    d->dev.info.queues = n;
    d->load.assign(n, 0);
    d->free_ns.assign(n, 0);
    d->cross_wait_ns = std::uint64_t{config.cross_wait_us} * 1000;
    d->queues.resize(n + 2);
    for (unsigned q = 0; q < n + 2; ++q) {
      const cl_command_queue_properties p = q == n || config.profile ? CL_QUEUE_PROFILING_ENABLE : 0;
      d->queues[q].queue = api->clCreateCommandQueue(d->context, dev.id, p, &rc);
      if (rc != CL_SUCCESS) {
        devices.push_back(std::move(d));  // shutdown releases what was made
        return cl::call_error(Status::Initialization, "clCreateCommandQueue", rc).context(where);
      }
    }
    d->map_queue = api->clCreateCommandQueue(d->context, dev.id, 0, &rc);
    if (rc != CL_SUCCESS) {
      d->map_queue = nullptr;
      devices.push_back(std::move(d));
      return cl::call_error(Status::Initialization, "clCreateCommandQueue(staging map queue)", rc).context(where);
    }
    const bool pocl = dev.info.platform_name.find("Portable Computing Language") != std::string::npos;
    d->event_per_command = config.command_events == CommandEvents::All ||
                           (config.command_events == CommandEvents::Auto && pocl);
    d->spin_us = config.spin_us.value_or(dev.info.type == DeviceType::Cpu ? 0 : kAutoSpinUs);
    d->learns_spin = !config.spin_us && d->spin_us > 0;
    d->read_burst_us = config.read_burst_us.value_or(dev.info.type == DeviceType::Cpu ? 0 : kAutoReadBurstUs);
    d->status_at_submit = pocl;
    const bool nvidia = dev.info.platform_name.find("NVIDIA") != std::string::npos;
    d->poll_completion = config.completion == CompletionMode::Poll || (config.completion == CompletionMode::Auto && nvidia);
    d->staging = std::make_unique<StagingPool>(*api, d->context, d->map_queue);
    // The first small read or write then maps nothing on the loop.
    if (auto r = d->staging->reserve_slab(); !r) {
      devices.push_back(std::move(d));
      return std::move(r).error().context(where);
    }
    if (config.debug_backends)
      std::fprintf(stderr, "uvcl: %s: %u queues, window %u, %llu bytes global memory\n", where.c_str(), n,
                   config.window, static_cast<unsigned long long>(dev.info.global_memory));
    devices.push_back(std::move(d));
  }
  return {};
}

Engine::~Engine() {
  if (!impl_) return;
  // Whatever the state (on_closed running now included): from inside one of
  // its own callbacks, as uv_close would be, the outermost Entry tears it
  // down once the engine's frames have returned.
  if (impl_->entries > 0) {
    Impl* e = impl_.get();
    e->doomed = true;
    e->self = std::move(impl_);
    return;
  }
  impl_->destroy();
}

void Engine::Impl::destroy() {
  std::function<void()> closed = std::move(on_closed);  // close() accepted it: it runs, once, last
  shutdown();
  if (closed) in_user_callback(*this, [&] { closed(); });
}

void Engine::Impl::cancel_windows(const char* why) {
  // Work still in windows never ran: cancel it.
  for (const auto& d : devices) {
    for (const Command& c : d->window.take()) submitter.fail_unsubmitted(c, Error{Status::Cancelled, why});
    d->window.end_batch();
    d->reads_in_window = false;
  }
}

void Engine::Impl::submit_read_bursts() {
  for (std::uint32_t i = 0; i < devices.size(); ++i)
    if (devices[i]->reads_in_window) submitter.submit_window(i);
}

void Engine::Impl::shutdown() {
  if (lifecycle != Lifecycle::Closed) lifecycle = Lifecycle::Destroying;  // from here on, new work is refused
  static constexpr const char* kDestroyed = "the engine was destroyed before it was submitted";
  submit_read_bursts();  // before the wait below: nothing is submitted after it
  cancel_windows(kDestroyed);
  // Open gates first: what waits on a timed launch that never ends would
  // otherwise keep clFinish waiting.
  for (CommandId id = commands.base(); id < commands.next_id(); ++id) completion.open_gate(*commands.find(id));
  // Likewise cross-device copies and held copies: only the loop, which no
  // longer turns, would complete their user events. Set them now
  // (Transfers::abandon), so what waits on them does not hang; their
  // callbacks are cancelled below.
  transfers.abandon();
  // Work on the devices: the one blocking wait, at teardown.
  for (const auto& d : devices)
    for (Queue& q : d->queues)
      if (q.queue) api->clFinish(q.queue);
  for (int round = 0; round < 4; ++round) {
    completion.collect_completions();
    transfers.poll_crosses();
    completion.process_outcomes();
  }
  // What is still unfinished (a failed clFinish: a hung or lost device) gets
  // its callback now, exactly once, as the contract says; a hook also gives
  // back what it holds (a read's staging block). Callbacks cannot add work
  // (refuse_new_work).
  while (commands.size() > 0) {
    cancel_windows(kDestroyed);
    const CommandId end = commands.next_id();
    for (CommandId id = commands.base(); id < end; ++id) {
      CommandRec* r = commands.find(id);
      if (!r || r->state == sched::CommandState::Final) continue;
      std::optional<Error> error = r->take_outcome();
      if (!error) error = Error{Status::Cancelled, "engine destroyed before command " + std::to_string(id) + " completed"};
      if (r->state != sched::CommandState::Failed && r->state != sched::CommandState::Cancelled &&
          r->state != sched::CommandState::OutcomeKnown)
        completion.transition(*r, sched::CommandEvent::Cancel);
      completion.finalize(*r, id, error);
    }
  }

  // Compiler processes are killed (and reaped by the loop, through their
  // process handles); the builds they had get Cancelled below.
  progs.close_compilers();
  for (const auto& d : devices) d->compilers.inline_only = true;
  while (!progs.building.empty()) {
    std::vector<std::uint64_t> ids;
    ids.swap(progs.building);
    for (std::uint64_t id : ids) {
      auto it = progs.programs.find(id);
      if (it != progs.programs.end() && it->second.on_built) {
        auto cb = std::move(it->second.on_built);
        in_user_callback(*this, [&] { cb(Error{Status::Cancelled, "engine destroyed while building"}); });
      }
    }
  }
  deliver_raised();
  errors.cancel_scopes();
  transfers.release_all();
  memory.buffers.for_each([this](std::uint64_t, BufferRec& b) {
    hazards.clear(b.hazards);
    if (b.mem) api->clReleaseMemObject(b.mem);
  });
  memory.buffers.clear();
  for (auto& [id, k] : progs.kernels)
    if (k.kernel) api->clReleaseKernel(k.kernel);
  progs.kernels.clear();
  for (auto& [id, p] : progs.programs)
    if (p.program) api->clReleaseProgram(p.program);
  progs.programs.clear();
  if (progs.memo) progs.memo->clear();  // before the contexts go
  memory.free_host_memory();       // the hooks above ended its last transfers
  // Reads given up on above (a failed clFinish) may still write into their
  // staging blocks, and one device's queue may still copy out of another
  // device's staging (a cross-device chunk): free no pool before every
  // queue of every device has drained.
  bool drained = true;
  for (const auto& d : devices)
    for (const Queue& q : d->queues)
      if (q.queue && api->clFinish(q.queue) != CL_SUCCESS) drained = false;
  for (auto& d : devices) {
    if (drained) d->staging.reset();
    else (void)d->staging.release();  // leaked on purpose: a device may still use it
    if (d->map_queue) api->clReleaseCommandQueue(d->map_queue);
    for (Queue& q : d->queues)
      if (q.queue) api->clReleaseCommandQueue(q.queue);
    if (d->context) api->clReleaseContext(d->context);
  }
  devices.clear();
  if (handles) {
    handles->close();
    handles = nullptr;
  }
  // Not from inside the loop (an asynchronous close ends in on_poll): the
  // destructor closes the engine's own loop then.
  if (own_loop && entries == 0) {
    uv_run(own_loop.get(), UV_RUN_DEFAULT);  // runs the close callbacks
    uv_loop_close(own_loop.get());
    own_loop.reset();
  }
}

void Engine::Impl::check_thread(const char* what) const {
#ifndef NDEBUG
  if (pthread_equal(pthread_self(), loop_thread)) return;
  std::fprintf(stderr, "uvcl: %s called from a thread other than the engine's loop thread\n", what);
  std::abort();
#else
  (void)what;
#endif
}

const char* Engine::Impl::lifecycle_name() const {
  switch (lifecycle) {
    case Lifecycle::Open: return "open";
    case Lifecycle::Closing: return "closing";
    case Lifecycle::Closed: return "closed";
    case Lifecycle::Destroying: return "being destroyed";
  }
  return "?";
}

Result<void> Engine::Impl::refuse_new_work(const char* what) const {
  check_thread(what);
  if (lifecycle == Lifecycle::Open) return {};
  return Error{Status::Cancelled, std::string(what) + ": the engine is " + lifecycle_name()};
}

void Engine::Impl::finish_close_if_idle() {
  if (lifecycle != Lifecycle::Closing || has_work()) return;
  lifecycle = Lifecycle::Closed;
  shutdown();  // nothing is in flight: no wait
  if (auto cb = std::move(on_closed)) in_user_callback(*this, [&] { cb(); });
}

Result<void> Engine::close(std::function<void()> on_closed) {
  Impl& e = *impl_;
  UVCL_TRY(e.refuse_new_work("close"));
  if (!on_closed) return Error{Status::InvalidArgument, "close: a callback is required"};
  e.lifecycle = Impl::Lifecycle::Closing;
  e.on_closed = std::move(on_closed);
  e.submit_read_bursts();
  e.cancel_windows("the engine was closed before it was submitted");  // their callbacks run, with Cancelled, from the loop
  e.update_busy();
  return {};
}

// --- the loop side -------------------------------------------------------

void Engine::Impl::on_prepare() {
  in_loop_io_phase = true;
  for (const auto& d : devices) d->read_burst_until_ns = 0;  // a new iteration: a read goes out at once
  on_late_work();
}

void Engine::Impl::on_late_work() {
  Entry entry(*this);
  // The windows, then the user code raised meanwhile (error listener,
  // schedule recorder); once more for what that code issued and raised; and
  // the windows a last time for what the second round issued, so that it
  // all goes out, with the driver callbacks it needs, before the loop may
  // sleep (what the last submission raises is heard in the next step). Not
  // after a callback destroyed the engine: the windows are cancelled then.
  for (int round = 0; round < 2 && !doomed; ++round) {
    submitter.submit_all();
    deliver_raised();
  }
  if (!doomed) submitter.submit_all();
  for (const auto& d : devices) {
    submitter.flush_queues(*d);  // and fences what the windows' flushes could not
    submitter.ask_callbacks(*d);
  }
  update_busy();
}

void Engine::Impl::on_poll() {
  if (polling) return;
  Entry entry(*this);
  polling = true;
  completion.backlog = false;
  if (config.loop_budget_us && completion.iteration_deadline_ns == 0)
    completion.iteration_deadline_ns = uv_hrtime() + std::uint64_t{config.loop_budget_us} * 1000;
  completion.step_deadline_ns = completion.iteration_deadline_ns;  // the timer's, the idle's and the async's on_poll share it
  completion.process_outcomes();  // what an earlier iteration left undelivered goes first
  completion.collect_completions();
  transfers.poll_crosses();
  progs.poll_builds();
  completion.process_outcomes();
  errors.check_scopes();
  completion.step_deadline_ns = 0;
  polling = false;
  deliver_raised();
  finish_close_if_idle();
  update_busy();
  if (in_blocking_run) uv_stop(loop);  // the blocking call looks at what it waits for before the loop may sleep
}

void Engine::Impl::on_check() {
  completion.iteration_deadline_ns = 0;
  in_loop_io_phase = false;
}

bool Engine::Impl::busy() const { return has_work() || lifecycle == Lifecycle::Closing; }

bool Engine::Impl::has_work() const {
  if (commands.size() > 0 || !progs.building.empty() || !errors.closing.empty() || !transfers.crosses.empty() || loop_holds > 0)
    return true;
  for (const auto& d : devices)
    if (!d->window.empty()) return true;
  return memory.dying > 0 || !undelivered_errors.empty() || !undelivered_schedule.empty();
}

void Engine::Impl::update_busy() {
  if (!handles) return;
  const bool b = busy();
  handles->set_busy(b);
  // Work left by an iteration that ran out of its budget: the loop must not
  // sleep (the idle handle runs on_poll again next iteration).
  if (completion.backlog && b) handles->set_spinning(true);
  if (handles->spinning()) end_spin_if_due(b);
  schedule_polls(b);
}

void Engine::Impl::end_spin_if_due(bool busy) {
  const std::uint64_t now = uv_hrtime();
  if (busy && (now < spin_until_ns || completion.backlog)) return;
  handles->set_spinning(false);
  if (spin_since_ns != 0) {
    // A delivery still running (this is a callback's poll()) counts up to
    // now; what it does after belongs to no spin.
    std::uint64_t delivering = spin_delivering_ns;
    if (completion.delivering_since_ns != 0) {
      delivering += now - std::max(completion.delivering_since_ns, spin_since_ns);
      completion.delivering_since_ns = now;
    }
    const std::uint64_t spun = now - spin_since_ns;
    counters.spin_ns += spun - std::min(spun, delivering);
  }
  spin_since_ns = 0;
  spin_delivering_ns = 0;
  for (const auto& d : devices)
    for (Queue& q : d->queues) {
      if (q.callback_after_spin == 0) continue;
      ask_callback_for(*d, q.callback_after_spin);
      q.callback_after_spin = 0;
    }
}

void Engine::Impl::ask_callback_for(const DeviceCtx& d, CommandId id) {
  const CommandRec* r = commands.find(id);
  if (!r || sched::device_done(r->state) || r->queue == sched::kNoQueue) return;
  const CommandRec* by = r->event ? r : completion.completed_by(d, id, r->queue);
  if (by && by->event) ask_callback(d, by->event);
}

void Engine::Impl::ask_callback(const DeviceCtx& d, cl_event ev) {
  if (d.poll_completion) {
    poll_asked = true;
    return;
  }
  api->clSetEventCallback(ev, CL_COMPLETE, on_cl_event, reinterpret_cast<void*>(handles->wake_token()));
  ++counters.callbacks;
}

void Engine::Impl::schedule_polls(bool busy) {
  if (!busy) {  // nothing to wait for
    poll_asked = false;
    poll_interval_ns = 0;
    return;
  }
  if (handles->spinning()) return;  // looked for every iteration; a wait asked meanwhile polls once it ends
  if (poll_asked) {
    poll_asked = false;
    poll_interval_ns = std::uint64_t{kFirstPollUs} * 1000;
  } else if (poll_interval_ns == 0 || handles->soon_pending()) {
    return;
  } else {
    poll_interval_ns += poll_interval_ns / 8;
    if (poll_interval_ns >= loop::Handles::kPollMs * 1000000) {  // the busy timer's polls take over
      poll_interval_ns = 0;
      return;
    }
  }
  handles->poll_in(poll_interval_ns);
  ++counters.polls;
}

void Engine::Impl::report(const Error& e) { report(0, e); }

void Engine::Impl::report(CommandId failed, const Error& e) {
  if (const CommandRec* r = failed != 0 ? commands.find(failed) : nullptr; r && r->reports_as != 0) failed = r->reports_as;
  errors.capture_error(failed == 0 ? errors.root_scope : errors.scope_of(failed), e);
  ++counters.failed;
  if (error_listener) undelivered_errors.push_back(e);
}

Entry::~Entry() {
  if (--e_.entries > 0 || !e_.doomed) return;
  std::unique_ptr<Engine::Impl> gone = std::move(e_.self);
  if (destroyed_) *destroyed_ = true;
  gone->destroy();
}

void Engine::Impl::deliver_raised() {
  // What these callbacks raise in turn is delivered by their own steps.
  while (!undelivered_schedule.empty() || !undelivered_errors.empty()) {
    std::vector<ScheduleEntry> schedule;
    schedule.swap(undelivered_schedule);
    // Each call runs a copy: the code may replace or clear itself.
    for (const ScheduleEntry& s : schedule)
      if (auto recorder = schedule_recorder) in_user_callback(*this, [&] { recorder(s); });
    std::vector<Error> raised;
    raised.swap(undelivered_errors);
    for (const Error& e : raised)
      if (auto listener = error_listener) in_user_callback(*this, [&] { listener(e); });
  }
}

// --- public API: the loop -------------------------------------------------

uv_loop_s* Engine::loop() const { return impl_->loop; }
const Config& Engine::config() const { return impl_->config; }
std::size_t Engine::device_count() const { return impl_->devices.size(); }
Result<DeviceInfo> Engine::device(std::size_t index) const {
  if (index >= impl_->devices.size())
    return Error{Status::InvalidArgument, "device: index " + std::to_string(index) + " is out of range (the engine has " +
                                              std::to_string(impl_->devices.size()) + " devices)"};
  return impl_->devices[index]->dev.info;
}
bool Engine::device_lost(std::size_t index) const {
  return index < impl_->devices.size() && impl_->devices[index]->state == sched::DeviceState::Lost;
}

void Engine::drain(DoneCallback on_done) {
  Impl& e = *impl_;
  e.check_thread("drain");
  if (e.released_everything()) {  // no loop side is left to call it later
    if (on_done)
      in_user_callback(e, [&] { on_done(Error{Status::Cancelled, std::string("drain: the engine is ") + e.lifecycle_name()}); });
    return;
  }
  e.submitter.submit_all();
  // Ask for a completion callback on the last command of every busy queue,
  // so the drain completes when the work does, not at the next 1 ms poll
  // tick. (In-order queues: the tail completes last.)
  for (const auto& d : e.devices)
    for (const Queue& q : d->queues) {
      if (q.in_flight.empty()) continue;
      const CommandRec* r = e.commands.find(q.in_flight.back());
      if (r && r->event) e.ask_callback(*d, r->event);
    }
  e.errors.close_scope(e.errors.root_scope, std::move(on_done));
  e.errors.open_root_scope();
  e.update_busy();
}

void Engine::poll() {
  Impl* e = impl_.get();  // a callback may destroy the Engine: the Entry keeps the Impl
  e->check_thread("poll");
  Entry entry(*e);
  // A call is an iteration's worth of work, with a budget of its own: on a
  // caller's loop that is not being run, no check phase ever ends the last
  // one (its deadline would stay spent, and nothing would complete again).
  e->completion.iteration_deadline_ns = 0;
  e->submitter.submit_all();
  e->on_poll();
  if (!e->doomed) e->submitter.submit_all();  // what its callbacks issued (a burst's reads) goes out in this call
  // Only the engine's own loop: a caller's loop is the caller's to run (and
  // may be running now, with this call inside one of its callbacks).
  if (e->own_loop && e->in_callback == 0 && !e->doomed) {
    ++e->in_callback;  // callbacks from the loop must not re-enter uv_run
    uv_run(e->loop, UV_RUN_NOWAIT);
    --e->in_callback;
  }
  e->update_busy();
}

// The blocking calls run the loop, which must not happen from one of its
// callbacks; refused before anything is enqueued, so no callback is left
// pointing at the caller's stack.
static Result<void> refuse_in_callback(const Engine::Impl& e, const char* call) {
  if (e.in_callback > 0)
    return Error{Status::InvalidArgument,
                 std::string(call) + " called from inside a uvcl callback (uv_run is not re-entrant)"};
  // A caller's loop: a callback of the host's (a socket's, a timer's) runs
  // inside uv_run, which this call would re-enter.
  if (e.in_loop_io_phase || (!e.own_loop && loop::inside_uv_run()))
    return Error{Status::InvalidArgument,
                 std::string(call) + " called from inside a callback of the running loop (uv_run is not "
                                     "re-entrant): use the call's callback form (read, drain, compile)"};
  return {};
}

Result<void> Engine::run_until(const std::function<bool()>& done) {
  Impl& e = *impl_;  // a callback may destroy the Engine: the Entry keeps the Impl
  e.check_thread("run_until");
  UVCL_TRY(refuse_in_callback(e, "run_until"));
  Entry entry(e);
  while (!done()) {
    e.submitter.submit_all();
    e.update_busy();
    if (!e.busy() && !done())
      return Error{Status::InvalidArgument, "run_until: nothing in flight can complete the awaited operation"};
    ++e.in_callback;  // callbacks from the loop must not re-enter uv_run
    e.in_blocking_run = true;
    uv_run(e.loop, UV_RUN_ONCE);
    e.in_blocking_run = false;
    --e.in_callback;
    if (e.doomed) return Error{Status::Cancelled, "run_until: the engine was destroyed by one of its callbacks"};
  }
  return {};
}

Result<void> Engine::finish() {
  UVCL_TRY(refuse_in_callback(*impl_, "finish"));
  bool done = false;
  Result<void> result;
  drain([&](Result<void> r) {
    result = std::move(r);
    done = true;
  });
  UVCL_TRY(run_until([&] { return done; }));
  return result;
}

Result<std::vector<std::byte>> Engine::read_sync(Buffer src, std::size_t offset, std::size_t bytes) {
  UVCL_TRY(refuse_in_callback(*impl_, "read_sync"));
  bool done = false;
  std::optional<Error> error;
  std::vector<std::byte> out;
  UVCL_TRY(read(src, offset, bytes, [&](Result<std::span<const std::byte>> r) {
    done = true;
    if (!r) error = std::move(r).error();
    else out.assign(r->begin(), r->end());
  }));
  UVCL_TRY(run_until([&] { return done; }));
  if (error) return std::move(*error);
  return out;
}

Result<Program> Engine::compile_sync(std::size_t device, const std::string& source, const std::string& options,
                                     BuildOptionsMode mode) {
  UVCL_TRY(refuse_in_callback(*impl_, "compile_sync"));
  bool done = false;
  std::optional<Error> error;
  auto p = compile(
      device, source, options,
      [&](Result<void> r) {
        done = true;
        if (!r) error = std::move(r).error();
      },
      mode);
  if (!p) return p;
  UVCL_TRY(run_until([&] { return done; }));  // an error also when a callback destroyed the engine
  if (error) {
    (void)release(p.value());
    return std::move(*error);
  }
  return p;
}

void Engine::set_error_listener(ErrorListener listener) { impl_->error_listener = std::move(listener); }

void Engine::set_tracing(bool on) {
  if (on && !impl_->trace) impl_->trace = std::make_unique<Trace>();
  if (!on) {
    impl_->trace.reset();
    for (CommandId id = impl_->commands.base(); id < impl_->commands.next_id(); ++id)
      if (const auto& x = impl_->commands.find(id)->extras) x->trace.reset();
  }
}

std::string Engine::trace_json() const {
  std::vector<std::string> names;
  for (const auto& d : impl_->devices) names.push_back(d->dev.info.name);
  return impl_->trace ? impl_->trace->json(names) : Trace{}.json(names);
}
void Engine::set_schedule_recorder(std::function<void(const ScheduleEntry&)> recorder) {
  impl_->schedule_recorder = std::move(recorder);
}

EngineStats Engine::stats() const {
  EngineStats s = impl_->counters;
  s.in_flight = 0;
  s.pending = 0;
  for (const auto& d : impl_->devices) {
    s.pending += d->window.size();
    for (const Queue& q : d->queues) s.in_flight += q.in_flight.size();
    if (d->staging) s.staging_bytes += d->staging->bytes_live();
  }
  s.live_buffers = impl_->memory.buffers.size();
  s.unfinished = impl_->commands.size();
  s.status_queries = impl_->status_queries;
  return s;
}

}  // namespace uvcl
