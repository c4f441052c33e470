// submit.cpp — from windows to queues, and from events back to callers.
//
//   enqueue        a command enters its device's window (Pending)
//   submit_one     queue choice, hazard waits, clEnqueue*, tracking (Submitted)
//   collect_...    per queue, oldest first: in-order queues complete in order
//   process_...    outcomes from the command graph: poison, listener, hooks
//   finalize       once per command, when its outcome is known AND its event
//                  has completed: the user's callback runs here
#include <algorithm>
#include <cassert>

#include "engine/engine_impl.hpp"
#include "sched/scratch_list.hpp"

namespace uvcl {

void CL_CALLBACK on_cl_event(cl_event, cl_int, void* token) {
  // Driver thread (or the loop thread, for an event already complete): do
  // nothing but wake the loop; the loop reads the status itself.
  loop::wake(reinterpret_cast<std::uintptr_t>(token));
}

// --- the record -------------------------------------------------------------

void Engine::Impl::transition(CommandRec& r, sched::CommandEvent e) {
  const auto to = sched::next(r.state, e);
  assert(to && "illegal command transition");
  if (to) r.state = *to;
}

void Engine::Impl::make_final(CommandRec& r) {
  transition(r, sched::CommandEvent::Finalize);
  if (r.event) api->clReleaseEvent(r.event);
  r.event = nullptr;
  commands.drop_front_while([](const CommandRec& c) { return c.state == sched::CommandState::Final; });
}

// Asks the driver rather than guessing "pending" for recent commands: a
// wait on an event that has already failed is not harmless. On PoCL 3.1 a
// command enqueued with a failed event in its wait list stays CL_QUEUED for
// good (docs/architecture.md, "failure follows the data"); skipping this
// check for commands not yet flushed hung the fault sweep's reads.
bool Engine::Impl::is_complete(CommandId id) const {
  const CommandRec* r = commands.find(id);
  if (!r || sched::device_done(r->state) || r->seen_done) return true;  // no record: final
  if (r->queue == sched::kNoQueue) return false;  // pending, or a user event: completed by us
  // Const in the scheduler's eyes; the flags below cache driver state.
  CommandRec* by = const_cast<Engine::Impl*>(this)->completed_by(*devices[r->device], id, r->queue);
  if (!by) return false;  // its fence comes with the next flush
  if (!by->seen_done) {
    ++status_queries;
    cl_int status = CL_QUEUED;
    if (api->clGetEventInfo(by->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) !=
            CL_SUCCESS ||
        status > CL_COMPLETE)
      return false;
    by->seen_done = true;
  }
  const_cast<CommandRec*>(r)->seen_done = true;
  return true;
}

CommandRec* Engine::Impl::completed_by(const DeviceCtx& d, CommandId id, QueueIndex q) {
  const std::deque<CommandId>& f = d.queues[q].in_flight;
  for (auto it = std::lower_bound(f.begin(), f.end(), id); it != f.end(); ++it) {
    CommandRec* r = commands.find(*it);
    if (r->event) return r;
  }
  return nullptr;
}

cl_event Engine::Impl::event_for_wait(DeviceCtx& d, CommandId id) {
  const CommandRec& w = *commands.find(id);
  if (w.event || w.queue == sched::kNoQueue) return w.event;
  if (CommandRec* by = completed_by(d, id, w.queue)) return by->event;
  return fence(d, w.queue);
}

cl_event Engine::Impl::fence(DeviceCtx& d, QueueIndex q) {
  Queue& queue = d.queues[q];
  cl_event m = nullptr;
  if (api->clEnqueueMarkerWithWaitList(queue.queue, 0, nullptr, &m) != CL_SUCCESS || !m) return nullptr;
  ++counters.fences;
  ++counters.events;
  commands.find(queue.in_flight.back())->event = m;
  queue.needs_fence = false;
  queue.dirty = true;
  return m;
}

bool Engine::Impl::needs_own_event(const DeviceCtx& d, const Command& c) const {
  return d.event_per_command || c.wants_callback || c.op == Op::Timed || c.op == Op::CrossWrite || trace != nullptr;
}

// --- windows ----------------------------------------------------------------

CommandId Engine::Impl::enqueue(std::uint32_t device, Command c) {
  c.id = commands.next_id();
  CommandRec& r = commands.add();
  r.op = c.op;
  r.device = device;
  r.kernel = c.kernel;
  r.tag = c.tag;
  r.hook = std::move(c.on_final);
  for (const Access& a : c.accesses) ++buffers.at(a.buffer).pending_uses;
  if (c.kernel) ++kernels.at(c.kernel).uses;
  const CommandId id = c.id;
  DeviceCtx& d = *devices[device];
  if (d.window.push(std::move(c))) submit_window(device);
  update_busy();
  return id;
}

void Engine::Impl::submit_all() {
  for (std::uint32_t i = 0; i < devices.size(); ++i) submit_window(i);
}

void Engine::Impl::submit_window(std::uint32_t device) {
  DeviceCtx& d = *devices[device];
  // Nested (from engine code run while submitting): what it added sits in
  // the window behind the commands being submitted; the loop below takes it.
  if (d.window.empty() || d.submitting) return;
  d.submitting = true;
  const std::uint64_t t0 = trace ? uv_hrtime() : 0;
  std::vector<Command> cmds;
  std::size_t submitted = 0;
  while (!d.window.empty()) {
    cmds = d.window.take();
    for (Command& c : cmds) submit_one(d, c);
    submitted += cmds.size();
  }
  d.submitting = false;
  flush_dirty_queues(d);
  ++counters.flushes;
  if (trace)
    trace->host(TraceHost{"submit window (device " + std::to_string(device) + ")", t0, uv_hrtime(), submitted});
}

void Engine::Impl::flush_dirty_queues(DeviceCtx& d) {
  for (QueueIndex qi = 0; qi < d.queues.size(); ++qi) {
    Queue& q = d.queues[qi];
    // A failed marker is tried again at the next flush (once per loop
    // iteration): until then its commands' completion is not observed.
    if (q.needs_fence && !q.in_flight.empty()) (void)fence(d, qi);
    if (!q.dirty) continue;
    q.dirty = false;
    if (cl_int rc = api->clFlush(q.queue); rc != CL_SUCCESS)
      lose_device(static_cast<std::uint32_t>(d.dev.info.index), cl::call_error(Status::KernelSync, "clFlush", rc));
  }
}

// Releases what a command held while it sat in the window.
static void release_pending(Engine::Impl& e, const Command& c) {
  for (const Access& a : c.accesses) {
    BufferRec& b = e.buffers.at(a.buffer);
    if (--b.pending_uses == 0 && b.state == sched::BufferState::Dying) e.free_when_unused(a.buffer);
  }
}

// Cleanup for a command that will never run: what it would have written
// holds no valid data, and the window's holds are dropped. Its callback runs
// with the error when the graph gives its outcome.
static void discard_unsubmitted(Engine::Impl& e, const Command& c, const Error& why) {
  e.transition(*e.commands.find(c.id), sched::CommandEvent::Fail);
  for (const Access& a : c.accesses) {
    if (!a.write) continue;
    BufferRec& b = e.buffers.at(a.buffer);
    // The root cause travels with the poison: readers see why.
    b.poison = Error{why.status, "buffer " + std::to_string(a.buffer) + " holds no valid data: command " +
                                     std::to_string(c.id) + " that writes it failed: " + why.message};
  }
  release_pending(e, c);
  if (c.kernel) {
    --e.kernels.at(c.kernel).uses;
    e.maybe_free_kernel(c.kernel);
  }
}

void Engine::Impl::fail_unsubmitted(const Command& c, Error err) {
  if (!graph.state(c.id)) graph.add(c.id, {});
  discard_unsubmitted(*this, c, err);
  graph.fail(c.id, std::move(err));
}

void Engine::Impl::submit_one(DeviceCtx& d, Command& c) {
  const std::uint32_t device = static_cast<std::uint32_t>(d.dev.info.index);
  // RAW producers: whoever last wrote what this command reads.
  sched::ScratchList<CommandId, 8> producers;
  for (CommandId p : c.extra_producers) producers.push_back(p);
  for (const Access& a : c.accesses) {
    const BufferRec& b = buffers.at(a.buffer);
    if (a.read && b.hazards.writer) producers.push_back(b.hazards.writer->id);
  }
  graph.add(c.id, producers.span());
  if (!graph.state(c.id)) {  // an input's producer had failed: the graph failed it already
    discard_unsubmitted(*this, c, Error{Status::KernelSync, "an input of it was produced by a failed command"});
    return;
  }
  if (d.state == sched::DeviceState::Lost) {
    fail_unsubmitted(c, Error{Status::DeviceLost, "device " + std::to_string(device) + " is lost"});
    return;
  }
  for (const Access& a : c.accesses) {
    const BufferRec& b = buffers.at(a.buffer);
    if (a.read && b.poison) {
      Error e = *b.poison;
      e.context(std::string(op_name(c.op)) + " (command " + std::to_string(c.id) + ") reads buffer " +
                std::to_string(a.buffer));
      fail_unsubmitted(c, std::move(e));
      return;
    }
  }

  // Queue choice and waits.
  QueueIndex q = 0;
  if (c.op == Op::Timed) {
    q = d.profiling_queue();
  } else if (c.op == Op::CrossWrite) {
    q = sched::kNoQueue;
  } else {
    sched::ScratchList<sched::AccessView, 8> views;
    for (const Access& a : c.accesses) views.push_back({&buffers.at(a.buffer).hazards, a.write});
    q = sched::choose_queue(views.span(), d.load, *this);
  }
  sched::WaitList waits, completed;
  for (const Access& a : c.accesses)
    hazards.collect_waits(buffers.at(a.buffer).hazards, a.write, q, waits, schedule_recorder ? &completed : nullptr);
  // A timed launch runs alone: later work waits for it, but only for the
  // order, through its gate (a user event completed when the launch ends,
  // whatever its status), so its failure does not fail unrelated work.
  // Work that reads its data waits on its event, through the hazards.
  std::optional<CommandId> gate_of;
  if (d.barrier && !is_complete(*d.barrier)) {
    const auto& ids = waits.ids();
    if (std::find(ids.begin(), ids.end(), *d.barrier) == ids.end()) gate_of = d.barrier;
    waits.add(*d.barrier);
  }
  if (c.op == Op::Timed) {
    // Alone: after every earlier command of the device.
    for (const Queue& other : d.queues)
      if (!other.in_flight.empty() && !is_complete(other.in_flight.back())) waits.add(other.in_flight.back());
  }
  std::vector<cl_event> wait_events;
  wait_events.reserve(waits.ids().size());
  for (CommandId w : waits.ids()) {
    const CommandRec& we = *commands.find(w);  // not complete: still stored
    cl_event e = w == gate_of ? we.gate : event_for_wait(d, w);
    if (!e) {
      Error err = cl::call_error(Status::KernelSync, "clEnqueueMarkerWithWaitList", CL_OUT_OF_RESOURCES);
      err.context(std::string(op_name(c.op)) + " (command " + std::to_string(c.id) + ") waiting for command " +
                  std::to_string(w));
      report(c.id, err);
      fail_unsubmitted(c, std::move(err));
      return;
    }
    // OpenCL requires a flush before another queue waits on an event.
    if (we.queue != sched::kNoQueue && we.queue != q && d.queues[we.queue].dirty) {
      d.queues[we.queue].dirty = false;
      api->clFlush(d.queues[we.queue].queue);
    }
    wait_events.push_back(e);
  }

  cl_event gate = nullptr;
  if (c.op == Op::Timed) {
    cl_int grc = CL_SUCCESS;
    gate = api->clCreateUserEvent(d.context, &grc);
    if (grc != CL_SUCCESS || !gate) {
      Error e = cl::call_error(Status::KernelLaunch, "clCreateUserEvent", grc == CL_SUCCESS ? CL_OUT_OF_RESOURCES : grc);
      e.context("timed launch (command " + std::to_string(c.id) + ", kernel " + kernels.at(c.kernel).name + ")");
      report(c.id, e);
      fail_unsubmitted(c, std::move(e));
      return;
    }
  }

  cl_event ev = nullptr;
  const bool own_event = needs_own_event(d, c);
  const char* call = "";
  cl_int rc = CL_SUCCESS;
  if (c.op == Op::CrossWrite) {
    submit_cross_write(d, c, wait_events, &ev);
    call = "clCreateUserEvent";
    if (!ev) rc = CL_OUT_OF_RESOURCES;
  } else {
    rc = enqueue_cl(d, c, q, wait_events, own_event ? &ev : nullptr, &call);
  }
  if (rc != CL_SUCCESS) {
    const Status s = c.op == Op::Write || c.op == Op::Fill ? Status::MemoryCopyH2P
                     : c.op == Op::Read                    ? Status::MemoryCopyP2H
                     : c.op == Op::Launch || c.op == Op::Timed ? Status::KernelLaunch
                                                                : Status::KernelSync;
    Error e = cl::call_error(s, call, rc);
    std::string what = std::string(op_name(c.op)) + " (command " + std::to_string(c.id);
    if (c.kernel) what += ", kernel " + kernels.at(c.kernel).name + ", tag " + std::to_string(c.tag);
    e.context(what + ")");
    report(c.id, e);
    fail_unsubmitted(c, std::move(e));
    if (gate) api->clReleaseEvent(gate);  // nothing waits on it yet
    if (rc == CL_DEVICE_NOT_AVAILABLE || rc == CL_INVALID_COMMAND_QUEUE || rc == CL_INVALID_CONTEXT)
      lose_device(device, Error{Status::DeviceLost, std::string(call) + ": " + cl::error_name(rc)});
    return;
  }

  CommandRec& entry = *commands.find(c.id);
  entry.event = ev;
  entry.gate = gate;
  entry.queue = q;
  entry.submit_ns = uv_hrtime();
  for (const Access& a : c.accesses)
    if (a.write) entry.written.push_back(a.buffer);
  transition(entry, sched::CommandEvent::Submit);
  graph.submitted(c.id);
  for (const Access& a : c.accesses) {
    BufferRec& b = buffers.at(a.buffer);
    hazards.record(b.hazards, a.write, c.id, q);
    if (a.write) b.poison.reset();
  }
  if (own_event) ++counters.events;
  if (q != sched::kNoQueue) {
    d.queues[q].in_flight.push_back(c.id);
    d.queues[q].dirty = true;
    d.queues[q].needs_fence = !own_event;
    if (q < d.compute_queues()) ++d.load[q];
  }
  if (c.op == Op::Timed) d.barrier = c.id;
  ++counters.submitted;
  for (CommandId w : waits.ids())
    if (const CommandRec* wr = commands.find(w); wr && wr->queue != q) ++counters.cross_queue_waits;
  if (c.wants_callback && q != sched::kNoQueue) {
    api->clSetEventCallback(ev, CL_COMPLETE, on_cl_event, reinterpret_cast<void*>(handles->wake_token()));
    // Config::spin_us: someone waits for this one, so look for its
    // completion on every loop iteration rather than through the driver's
    // callback thread and uv_async (two wake-ups later). A busy core, for
    // at most spin_us; update_busy() stops it once idle or past the deadline.
    if (config.spin_us > 0) {
      spin_until_ns = std::max(spin_until_ns, uv_hrtime() + std::uint64_t{config.spin_us} * 1000);
      handles->set_spinning(true);
    }
  }
  if (trace) {
    TraceCommand t;
    t.id = c.id;
    t.device = device;
    t.queue = q;
    t.name = c.kernel ? kernels.at(c.kernel).name : op_name(c.op);
    t.bytes = c.bytes;
    t.waits = waits.ids();
    entry.trace = std::make_unique<TraceCommand>(std::move(t));
  }
  if (schedule_recorder) {
    ScheduleEntry s;
    s.id = c.id;
    s.op = op_name(c.op);
    s.tag = c.tag;
    s.device = device;
    s.queue = q;
    for (const Access& a : c.accesses) {
      if (a.read) s.reads.push_back(Buffer{a.buffer});
      if (a.write) s.writes.push_back(Buffer{a.buffer});
    }
    s.waits = waits.ids();
    s.completed = completed.ids();
    undelivered_schedule.push_back(std::move(s));
  }
  release_pending(*this, c);
}

cl_int Engine::Impl::enqueue_cl(DeviceCtx& d, Command& c, QueueIndex q, const std::vector<cl_event>& waits,
                                cl_event* ev, const char** call) {
  cl_command_queue queue = d.queues[q].queue;
  const cl_uint n = static_cast<cl_uint>(waits.size());
  const cl_event* w = waits.empty() ? nullptr : waits.data();
  switch (c.op) {
    case Op::Launch:
    case Op::Timed: {
      KernelRec& k = kernels.at(c.kernel);
      for (cl_uint i = 0; i < c.args.size(); ++i) {
        const KernelArg& a = c.args[i];
        cl_int rc = CL_SUCCESS;
        if (a.kind == KernelArg::Kind::Buffer) {
          cl_mem m = buffers.at(a.buffer.id).mem;
          rc = api->clSetKernelArg(k.kernel, i, sizeof m, &m);  // NOLINT(bugprone-sizeof-expression): the handle itself is the argument
        } else if (a.kind == KernelArg::Kind::Scalar) {
          rc = api->clSetKernelArg(k.kernel, i, a.scalar.size(), a.scalar.bytes.data());
        } else {
          rc = api->clSetKernelArg(k.kernel, i, a.local_bytes, nullptr);
        }
        if (rc != CL_SUCCESS) {
          *call = "clSetKernelArg";
          return rc;
        }
      }
      *call = "clEnqueueNDRangeKernel";
      return api->clEnqueueNDRangeKernel(queue, k.kernel, c.dims, nullptr, c.global.data(),
                                         c.has_local ? c.local.data() : nullptr, n, w, ev);
    }
    case Op::Write:
      *call = "clEnqueueWriteBuffer";
      return api->clEnqueueWriteBuffer(queue, buffers.at(c.accesses[0].buffer).mem, CL_FALSE, c.offset, c.bytes,
                                       c.host_src, n, w, ev);
    case Op::Fill:
      *call = "clEnqueueFillBuffer";
      return api->clEnqueueFillBuffer(queue, buffers.at(c.accesses[0].buffer).mem, c.pattern.data(),
                                      c.pattern.size(), c.offset, c.bytes, n, w, ev);
    case Op::Read:
      *call = "clEnqueueReadBuffer";
      return api->clEnqueueReadBuffer(queue, buffers.at(c.accesses[0].buffer).mem, CL_FALSE, c.offset, c.bytes,
                                      c.host_dst, n, w, ev);
    case Op::Copy: {
      *call = "clEnqueueCopyBuffer";
      const Access& src = c.accesses[0];
      const Access& dst = c.accesses.size() > 1 ? c.accesses[1] : c.accesses[0];
      return api->clEnqueueCopyBuffer(queue, buffers.at(src.buffer).mem, buffers.at(dst.buffer).mem, c.src_offset,
                                      c.offset, c.bytes, n, w, ev);
    }
    case Op::CrossWrite: break;
  }
  *call = "enqueue";
  return CL_INVALID_OPERATION;
}

// --- completions --------------------------------------------------------------

// Queue::failed_reads: how many status reads in a row may fail (a poll each,
// 1 ms apart) before the event counts as failed.
constexpr std::uint8_t kFailedReadsToGiveUp = 3;

void Engine::Impl::collect_completions() {
  for (const auto& dp : devices) {
    DeviceCtx& d = *dp;
    for (QueueIndex qi = 0; qi < d.queues.size(); ++qi) {
      Queue& q = d.queues[qi];
      while (!q.in_flight.empty()) {
        // One status read for the first command with an event: the
        // commands before it (event-less) completed with it.
        std::size_t k = 0;
        while (k < q.in_flight.size() && !commands.find(q.in_flight[k])->event) ++k;
        cl_int status = CL_QUEUED;
        if (k == q.in_flight.size()) {
          if (d.state != sched::DeviceState::Lost) break;  // its fence comes with the next flush
          status = CL_DEVICE_NOT_AVAILABLE;                 // nothing will ever complete them
          k = q.in_flight.size() - 1;
        } else {
          ++status_queries;
          const CommandRec& r = *commands.find(q.in_flight[k]);
          cl_int rc = api->clGetEventInfo(r.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
          if (rc != CL_SUCCESS && ++q.failed_reads < kFailedReadsToGiveUp) break;
          if (rc != CL_SUCCESS) status = rc;  // an event we cannot query is a failed one
          q.failed_reads = 0;
          if (status > CL_COMPLETE) break;
        }
        complete_queue_front(d, qi, k + 1, status);
      }
    }
  }
}

// The first `count` commands of queue qi completed with `status`. A failure
// the event-less ones share with the event that completed them is
// attributed to the first of them; the others name it.
void Engine::Impl::complete_queue_front(DeviceCtx& d, QueueIndex qi, std::size_t count, cl_int status) {
  Queue& q = d.queues[qi];
  const CommandId by = q.in_flight[count - 1];
  for (std::size_t i = 0; i < count && !q.in_flight.empty(); ++i) {
    const CommandId id = q.in_flight.front();
    q.in_flight.pop_front();
    if (qi < d.compute_queues()) --d.load[qi];
    // The first: behind the failure completed before it, if any; the rest:
    // behind the first.
    const CommandId ahead = status < 0 ? q.failed_ahead : 0;
    if (i == 0) q.failed_ahead = status < 0 ? id : 0;
    event_completed(id, status, ahead, by);
  }
}

void Engine::Impl::event_completed(CommandId id, cl_int status, CommandId failed_ahead, CommandId by) {
  CommandRec& r = *commands.find(id);
  r.status = status;
  open_gate(r);
  if (r.op == Op::Timed && status == CL_COMPLETE) {
    cl_ulong start = 0, end = 0;
    cl_int rc = api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
    if (rc == CL_SUCCESS)
      rc = api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    if (rc != CL_SUCCESS)
      r.timing = cl::call_error(Status::KernelSync, "clGetEventProfilingInfo", rc)
                     .context("timed launch " + std::to_string(id));
    else
      r.timing = Timing{end > start ? end - start : 0, uv_hrtime() - r.submit_ns};
  }
  if (r.trace) trace_completed(r);
  std::optional<Error> err;
  if (status < 0) err = event_error(id, r, failed_ahead, by);
  const bool parked = r.state == sched::CommandState::Parked;
  transition(r, sched::CommandEvent::DeviceDone);
  if (err) report(id, *err);
  if (r.kernel) {
    auto k = kernels.find(r.kernel);
    if (k != kernels.end()) {
      --k->second.uses;
      maybe_free_kernel(r.kernel);
    }
  }
  graph.event_done(id, std::move(err));
  if (!r.frees.empty()) {
    std::vector<std::uint64_t> frees = std::move(r.frees);
    release_uses(frees);
  }
  if (parked) {
    std::optional<Error> outcome = std::move(r.outcome);
    finalize(id, outcome);
  }
}

void Engine::Impl::trace_completed(CommandRec& r) {
  TraceCommand t = std::move(*r.trace);
  r.trace.reset();
  const DeviceCtx& d = *devices[r.device];
  const bool profiled = r.queue != sched::kNoQueue && (config.profile || r.queue == d.profiling_queue());
  cl_ulong queued = 0, start = 0, end = 0;
  if (profiled && r.status == CL_COMPLETE &&
      api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_QUEUED, sizeof queued, &queued, nullptr) ==
          CL_SUCCESS &&
      api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) ==
          CL_SUCCESS &&
      api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) == CL_SUCCESS) {
    // The device clock has its own epoch: align "queued" with the host's
    // submission time, once per device.
    if (!trace->has_offset(r.device))
      trace->set_offset(r.device, static_cast<std::int64_t>(r.submit_ns) - static_cast<std::int64_t>(queued));
    const std::int64_t off = trace->offset(r.device);
    t.start_ns = static_cast<std::uint64_t>(static_cast<std::int64_t>(start) + off);
    t.end_ns = static_cast<std::uint64_t>(static_cast<std::int64_t>(end) + off);
  } else {
    t.start_ns = r.submit_ns;
    t.end_ns = uv_hrtime();
  }
  trace->command(std::move(t));
}

Error Engine::Impl::event_error(CommandId id, const CommandRec& r, CommandId failed_ahead, CommandId by) const {
  const Status s = r.op == Op::Read ? Status::MemoryCopyP2H
                   : r.op == Op::Write || r.op == Op::Fill ? Status::MemoryCopyH2P
                                                            : Status::KernelSync;
  std::string what = std::string(op_name(r.op)) + " (command " + std::to_string(id);
  if (r.kernel) {
    auto k = kernels.find(r.kernel);
    if (k != kernels.end()) what += ", kernel " + k->second.name + ", tag " + std::to_string(r.tag);
  }
  what += ") on device " + std::to_string(r.device) + " completed with " + cl::error_name(r.status);
  if (failed_ahead != 0)
    what += " (queued behind failed command " + std::to_string(failed_ahead) + " on the same in-order queue)";
  else if (by != 0 && by != id)
    what += " (as read from the event of command " + std::to_string(by) +
            ", which completes it on the same in-order queue)";
  return Error{s, what};
}

void Engine::Impl::open_gate(CommandRec& r) {
  if (!r.gate) return;
  // A failed status would fail what waits; the gate only orders.
  api->clSetUserEventStatus(r.gate, CL_COMPLETE);
  api->clReleaseEvent(r.gate);
  r.gate = nullptr;
}

void Engine::Impl::on_failed(CommandId id, const Error& error) {
  const CommandRec* r = commands.find(id);
  if (!r) return;
  for (std::uint64_t bid : r->written) {
    auto b = buffers.find(bid);
    // Unless a later command wrote it since.
    if (b != buffers.end() && b->second.hazards.writer && b->second.hazards.writer->id == id)
      b->second.poison = Error{error.status, "buffer " + std::to_string(bid) + " holds no valid data: " + error.message};
  }
}

void Engine::Impl::process_outcomes() {
  using S = sched::CommandState;
  while (graph.has_outcomes()) {
    for (sched::CommandGraph::Outcome& o : graph.take_outcomes()) {
      CommandRec* r = commands.find(o.id);
      if (!r) continue;
      if (r->state == S::Submitted) {  // known before its device work ended: finalized when it does
        r->outcome = std::move(o.error);
        transition(*r, sched::CommandEvent::Outcome);
        continue;
      }
      if (r->state == S::DeviceDone) transition(*r, sched::CommandEvent::Outcome);
      finalize(o.id, o.error);
    }
  }
}

void Engine::Impl::finalize(CommandId id, const std::optional<Error>& error) {
  if (FinalHook hook = std::move(commands.find(id)->hook))
    in_user_callback(*this, [&] { hook(id, error); });
  make_final(*commands.find(id));  // still stored: only final records are dropped
}

void Engine::Impl::lose_device(std::uint32_t device, const Error& why) {
  DeviceCtx& d = *devices[device];
  if (d.state == sched::DeviceState::Lost) return;
  d.state = *sched::next(d.state, sched::DeviceEvent::Lose);
  Error e{Status::DeviceLost, "device " + std::to_string(device) + " (" + d.dev.info.name + ") lost: " + why.message};
  report(e);
}

}  // namespace uvcl
