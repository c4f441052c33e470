// submit.cpp — from windows to queues (completion.cpp: back to callers).
//
//   enqueue        a command enters its device's window (Pending)
//   submit_one     queue choice, hazard waits, clEnqueue*, tracking (Submitted)
//   event_for_wait the event another queue waits on: own, or a fence
//   flush_...      fences what has no event, then clFlush
#include <algorithm>
#include <cstring>

#include "engine/engine_impl.hpp"
#include "sched/scratch_list.hpp"

namespace uvcl {

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
  std::size_t submitted = 0;
  while (!d.window.empty()) {
    std::vector<Command> cmds = d.window.take();
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
    // Config::spin_us: someone waits for this one, so look for its
    // completion on every loop iteration rather than through the driver's
    // callback thread and uv_async (two wake-ups later). A busy core, for
    // at most spin_us; update_busy() stops it once idle or past the deadline
    // and only then asks for the driver's callback on what is still running:
    // a callback registered at once delays the command itself on some
    // drivers (NVIDIA's).
    if (config.spin_us > 0) {
      spin_until_ns = std::max(spin_until_ns, uv_hrtime() + std::uint64_t{config.spin_us} * 1000);
      handles->set_spinning(true);
      if (callback_after_spin.size() >= 256)  // spinning without end: keep only what still runs
        std::erase_if(callback_after_spin, [this](CommandId id) {
          const CommandRec* r = commands.find(id);
          return !r || sched::device_done(r->state);
        });
      callback_after_spin.push_back(c.id);
    } else {
      api->clSetEventCallback(ev, CL_COMPLETE, on_cl_event, reinterpret_cast<void*>(handles->wake_token()));
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
      k.set_args.resize(c.args.size());
      for (cl_uint i = 0; i < c.args.size(); ++i) {
        const KernelArg& a = c.args[i];
        SetArg want;
        want.valid = true;
        const void* value = nullptr;
        if (a.kind == KernelArg::Kind::Buffer) {
          cl_mem m = buffers.at(a.buffer.id).mem;
          // The handle itself is the argument.
          want.size = sizeof(cl_mem);  // NOLINT(bugprone-sizeof-expression)
          std::memcpy(want.bytes.data(), static_cast<const void*>(&m), sizeof(cl_mem));  // NOLINT(bugprone-sizeof-expression)
          want.frees = buffers_freed;
          value = want.bytes.data();
        } else if (a.kind == KernelArg::Kind::Scalar) {
          want.size = a.scalar.size();
          std::memcpy(want.bytes.data(), a.scalar.bytes.data(), want.size);
          value = want.bytes.data();
        } else {
          want.size = a.local_bytes;  // value stays nullptr: local memory
        }
        if (k.set_args[i] == want) continue;
        if (cl_int rc = api->clSetKernelArg(k.kernel, i, want.size, value); rc != CL_SUCCESS) {
          k.set_args[i] = SetArg{};
          *call = "clSetKernelArg";
          return rc;
        }
        k.set_args[i] = want;
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

void Engine::Impl::lose_device(std::uint32_t device, const Error& why) {
  DeviceCtx& d = *devices[device];
  if (d.state == sched::DeviceState::Lost) return;
  d.state = *sched::next(d.state, sched::DeviceEvent::Lose);
  Error e{Status::DeviceLost, "device " + std::to_string(device) + " (" + d.dev.info.name + ") lost: " + why.message};
  report(e);
}

}  // namespace uvcl
