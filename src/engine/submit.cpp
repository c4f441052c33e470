// submit.cpp — from windows to queues (completion.cpp: back to callers).
//
//   enqueue        a command enters its device's window (Pending)
//   submit_one     admit, place (queue, waits), enqueue, record (Submitted),
//                  watch, show
//   event_for_wait the event another queue waits on: own, or a fence
//   flush_queues   fences what has no event, then clFlush
#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/engine_impl.hpp"
#include "sched/scratch_list.hpp"

namespace uvcl {

cl_event Submitter::event_for_wait(DeviceCtx& d, CommandId id) {
  const CommandRec& w = *e.commands.find(id);
  if (w.event || w.queue == sched::kNoQueue) return w.event;
  if (CommandRec* by = e.completion.completed_by(d, id, w.queue)) return by->event;
  return fence(d, w.queue);
}

cl_event Submitter::fence(DeviceCtx& d, QueueIndex q) {
  Queue& queue = d.queues[q];
  cl_event m = nullptr;
  if (e.api->clEnqueueMarkerWithWaitList(queue.queue, 0, nullptr, &m) != CL_SUCCESS || !m) return nullptr;
  ++e.counters.fences;
  ++e.counters.events;
  e.commands.find(queue.in_flight.back())->event = m;
  queue.evented.push_back(queue.in_flight.back());
  queue.needs_fence = false;
  queue.unfenced = 0;
  ++queue.unflushed;
  return m;
}

bool Submitter::needs_own_event(const DeviceCtx& d, const Command& c) const {
  if (d.event_per_command || c.op == Op::Timed || c.op == Op::CrossWrite || c.held || e.trace != nullptr) return true;
  if (read_by_several_later(c)) return true;
  return c.wants_callback && !completed_by_next_read(c);
}

// Two or more later commands of the batch read what this one writes (a
// fan-out): at most one of them continues on its queue, and the others
// wait for it from theirs. Without an event of its own, such a wait takes
// a fence made then, after the last command of its queue — the first
// reader at least — so the readers ran one after another. A later writer of
// the buffer ends the count for it: who reads after reads its data (a chain
// of in-place updates is one reader each).
bool Submitter::read_by_several_later(const Command& c) const {
  if (batch_next_ == nullptr) return false;
  for (const Access& w : c.accesses) {
    if (!w.write) continue;
    unsigned readers = 0;
    for (const Command* y = batch_next_; y != batch_end_ && y - batch_next_ < kLookahead; ++y) {
      const auto use = std::find_if(y->accesses.begin(), y->accesses.end(),
                                    [&](const Access& a) { return a.buffer == w.buffer; });
      if (use == y->accesses.end()) continue;
      if (use->read && ++readers == 2) return true;
      if (use->write) break;
    }
  }
  return false;
}

// A small read of settled data, followed in the batch by another read of
// settled data — which goes to the same queue (place()) — needs no event of
// its own: the later read's completes it on the in-order queue, and the
// burst's reads are delivered together. Whatever the later read becomes,
// the queue's next event or the fence at the flush completes this one.
bool Submitter::completed_by_next_read(const Command& c) const {
  if (!settled_.placing || c.op != Op::Read || c.into_caller_memory || c.bytes > kSharedReadMaxBytes ||
      settled_.shared + 1 >= kSharedReads)
    return false;
  if (batch_next_ == nullptr || batch_next_ == batch_end_) return false;
  const Command& y = *batch_next_;
  return y.op == Op::Read && !has_pending_deps(y);
}

// --- windows ----------------------------------------------------------------

CommandId Submitter::enqueue(std::uint32_t device, Command c) {
  stage(device) = std::move(c);
  return commit(device);
}

Command& Submitter::stage(std::uint32_t device) { return e.devices[device]->window.emplace(); }

void Submitter::unstage(std::uint32_t device) { e.devices[device]->window.pop_back(); }

CommandId Submitter::commit(std::uint32_t device) {
  DeviceCtx& d = *e.devices[device];
  snapshot_what_the_last_overwrites(d);
  Command& c = d.window.back();
  record(device, c);
  const CommandId id = c.id;
  if (d.window.full()) submit_window(device, Flush::LongRuns);
  // Issued from the caller's own loop callback after this iteration's
  // prepare step (a prepare handle of theirs that runs after the engine's):
  // the window must still go out before the loop may block. A blocking
  // call runs the loop as one callback level of its own; a level above it
  // is a callback the engine delivers, whose work goes out after it.
  const int loop_level = e.in_blocking_run ? 1 : 0;
  if (e.in_loop_io_phase && e.in_callback == loop_level && !e.polling && e.handles) e.handles->submit_before_sleep();
  // A command only adds work: what it changes is the step from idle to
  // busy. Spins and polls are the loop iteration's (its hooks update them).
  if (e.handles && !e.handles->busy()) e.update_busy();
  return id;
}

void Submitter::snapshot_what_the_last_overwrites(DeviceCtx& d) {
  bool overwrites = false;
  for (Access& a : d.window.back().accesses) {
    if (!a.write) continue;
    if (!a.rec) a.rec = e.memory.buffers.find(a.buffer);
    overwrites = overwrites || a.rec->cross_readers > 0;
  }
  if (!overwrites) return;
  // The snapshots go into the window first: program order is window order.
  Command last = std::move(d.window.back());
  d.window.pop_back();
  for (const Access& a : last.accesses)
    if (a.write && a.rec->cross_readers > 0) e.transfers.snapshot_unread(a.buffer);
  d.window.emplace() = std::move(last);
}

void Submitter::record(std::uint32_t device, Command& c) {
  c.id = e.commands.next_id();
  CommandRec& r = e.commands.add();
  r.op = c.op;
  r.device = device;
  r.kernel = c.kernel;
  r.tag = c.tag;
  r.reports_as = c.reports_as;
  r.hook = std::move(c.on_final);
  for (Access& a : c.accesses) {
    if (!a.rec) a.rec = e.memory.buffers.find(a.buffer);
    ++a.rec->pending_uses;
  }
  if (c.kernel) {
    if (!c.kernel_rec) c.kernel_rec = &e.progs.kernels.at(c.kernel);
    ++c.kernel_rec->uses;
    r.kernel_rec = c.kernel_rec;  // the completion gives the use back
  }
}

void Submitter::submit_all() {
  for (std::uint32_t i = 0; i < e.devices.size(); ++i) submit_window(i);
}

void Submitter::submit_window(std::uint32_t device, Flush flush) {
  DeviceCtx& d = *e.devices[device];
  // Nested (from engine code run while submitting): what it added sits in
  // the window behind the commands being submitted; the loop below takes it.
  if (d.submitting) return;
  if (d.window.empty()) {
    // What full windows left unfenced and unflushed goes now: a sync point
    // whose own commit filled its window, a drain, a poll(), the loop's
    // step before it may sleep.
    if (flush == Flush::All) flush_queues(d);
    return;
  }
  d.submitting = true;
  const SettledReads outer_settled = std::exchange(settled_, {});  // another device's, if nested
  const std::uint64_t t0 = e.trace ? uv_hrtime() : 0;
  std::size_t submitted = 0;
  while (!d.window.empty()) {
    std::vector<Command>& cmds = d.window.take();
    // Another device's window submitted from inside this one would leave
    // the look-ahead pointing at its batch: each submission restores them.
    const Command* const outer_next = batch_next_;
    const Command* const outer_end = batch_end_;
    batch_end_ = cmds.data() + cmds.size();
    now_ns_ = uv_hrtime();
    std::size_t since_free = 0;
    for (Command& c : cmds) {
      batch_next_ = &c + 1;
      submit_one(d, c);
      if (++since_free == kCommandsPerFreeGroup) {
        free_unused();
        since_free = 0;
      }
    }
    free_unused();
    batch_next_ = outer_next;
    batch_end_ = outer_end;
    submitted += cmds.size();
    d.window.end_batch();
  }
  settled_ = outer_settled;
  d.submitting = false;
  d.reads_in_window = false;
  for (Queue& q : d.queues) q.unfinished_from = 0;
  flush_queues(d, flush);
  if (e.trace)
    e.trace->host(TraceHost{"submit window (device " + std::to_string(device) + ")", t0, uv_hrtime(), submitted});
}

void Submitter::submit_read(std::uint32_t device) {
  DeviceCtx& d = *e.devices[device];
  const std::uint64_t burst_ns = std::uint64_t{d.read_burst_us} * 1000;
  if (burst_ns == 0) return submit_window(device);
  // The burst is timed from the end of this call: the caller's time
  // between reads decides.
  std::uint64_t now = uv_hrtime();
  if (now >= d.read_burst_until_ns) {
    submit_window(device);
    now = uv_hrtime();
  } else {
    d.reads_in_window = !d.window.empty();  // a full window went out in commit()
  }
  d.read_burst_until_ns = now + burst_ns;
}

void Submitter::flush_queues(DeviceCtx& d, Flush flush) {
  const bool all = flush == Flush::All;
  for (QueueIndex qi = 0; qi < d.queues.size(); ++qi) {
    Queue& q = d.queues[qi];
    // A failed marker is tried again at the next flush (once per loop
    // iteration): until then its commands' completion is not observed.
    const bool fenced =
        q.needs_fence && !q.in_flight.empty() && (all || q.unfenced >= kLongRun) && fence(d, qi) != nullptr;
    if (q.unflushed == 0 || !(all || fenced || q.unflushed >= kLongRun)) continue;
    if (cl_int rc = flush_queue(d, qi); rc != CL_SUCCESS) {
      q.unflushed = 0;  // the device is lost: no flush is owed any more
      e.lose_device(static_cast<std::uint32_t>(d.dev.info.index), cl::call_error(Status::KernelSync, "clFlush", rc));
    }
  }
}

cl_int Submitter::flush_queue(DeviceCtx& d, QueueIndex qi) {
  Queue& q = d.queues[qi];
  ++e.counters.flushes;
  const cl_int rc = e.api->clFlush(q.queue);
  // Still owed after a failure: the next flush of every queue (a sync
  // point, or the one before the loop may wait) tries again, and loses the
  // device if that fails too. Counted as flushed, a queue another one waits
  // on could stay unflushed for good.
  if (rc == CL_SUCCESS) q.unflushed = 0;
  return rc;
}

// Releases what a command held while it sat in the window. A released
// buffer whose last hold this was goes back to the driver now, or, given
// `later`, with the batch's others (Submitter::free_unused).
static void release_pending(Engine::Impl& e, const Command& c, std::vector<std::uint64_t>* later = nullptr) {
  for (const Access& a : c.accesses) {
    BufferRec& b = *a.rec;
    if (--b.pending_uses != 0 || b.state != sched::BufferState::Dying) continue;
    if (later != nullptr) later->push_back(a.buffer);
    else e.memory.free_when_unused(a.buffer);
  }
}

// Cleanup for a command that will never run: what it would have written
// holds no valid data, and the window's holds are dropped. Its callback runs
// with the error when the graph gives its outcome.
static void discard_unsubmitted(Engine::Impl& e, const Command& c, const Error& why) {
  e.completion.transition(*e.commands.find(c.id), sched::CommandEvent::Fail);
  for (const Access& a : c.accesses) {
    if (!a.write) continue;
    BufferRec& b = *a.rec;
    // The root cause travels with the poison: readers see why.
    b.poison = Error{why.status, "buffer " + std::to_string(a.buffer) + " holds no valid data: command " +
                                     std::to_string(c.id) + " that writes it failed: " + why.message};
  }
  release_pending(e, c);
  if (c.kernel) {
    --c.kernel_rec->uses;
    if (CommandRec* r = e.commands.find(c.id)) r->kernel_rec = nullptr;  // given back here, not at completion
    e.progs.maybe_free_kernel(c.kernel);
  }
}

void Submitter::fail_unsubmitted(const Command& c, Error err) {
  if (!e.graph.state(c.id)) e.graph.add(c.id, {});
  discard_unsubmitted(e, c, err);
  e.graph.fail(c.id, std::move(err));
}

// A command's submission, one step each: admitted (its inputs hold valid
// data, its device is there), placed (a queue, what it waits for), enqueued,
// recorded as submitted, watched (if someone awaits it) and shown (trace,
// schedule). A step that fails the command ends its submission.
void Submitter::submit_one(DeviceCtx& d, Command& c) {
  if (!admit(d, c)) return;
  const Placed at = place(d, c);
  const QueueIndex q = at.queue;
  Waits waits;
  collect_waits(d, c, q, waits);
  WaitEvents events;
  if (!wait_events(d, c, q, waits, events)) return;
  Enqueued done;
  if (!enqueue_or_fail(d, c, q, events, done)) return;
  record_submitted(d, c, at, done, waits);
  if (c.wants_callback && q != sched::kNoQueue) watch(d, d.queues[q], c);
  show(d, c, q, waits);
  release_pending(e, c, &unused_);
}

// Buffers released while in the window go back to the driver in groups,
// after every kCommandsPerFreeGroup commands of the batch and at its end:
// NVIDIA's driver takes longer over the same launches and releases when
// each release follows its buffer's last launch, and longer still when a
// whole window's releases wait for its end (figure 6 in bench/notes.md).
void Submitter::free_unused() {
  for (std::uint64_t id : unused_) e.memory.free_when_unused(id);
  unused_.clear();
}

bool Submitter::admit(const DeviceCtx& d, const Command& c) {
  // RAW producers: whoever last wrote what this command reads.
  sched::ScratchList<CommandId, 8> producers;
  for (CommandId p : c.extra_producers) producers.push_back(p);
  for (const Access& a : c.accesses) {
    const BufferRec& b = *a.rec;
    if (!a.read || !b.hazards.writer) continue;
    // A command that wrote several of its inputs is one producer, once.
    const CommandId p = b.hazards.writer->id;
    if (std::find(producers.begin(), producers.end(), p) == producers.end()) producers.push_back(p);
  }
  // False: an input's producer had failed, and the graph failed it already.
  if (!e.graph.add(c.id, e.commands.find(c.id)->node, producers.span())) {
    discard_unsubmitted(e, c, Error{Status::KernelSync, "an input of it was produced by a failed command"});
    return false;
  }
  if (d.state == sched::DeviceState::Lost) {
    fail_unsubmitted(c, Error{Status::DeviceLost, "device " + std::to_string(d.dev.info.index) + " is lost"});
    return false;
  }
  for (const Access& a : c.accesses) {
    const BufferRec& b = *a.rec;
    if (a.read && b.poison) {
      Error err = *b.poison;
      err.context(std::string(op_name(c.op)) + " (command " + std::to_string(c.id) + ") reads buffer " +
                  std::to_string(a.buffer));
      fail_unsubmitted(c, std::move(err));
      return false;
    }
  }
  return true;
}

std::uint64_t Submitter::cost_kind(const Command& c) {
  if (c.kernel) return sched::cost_kind(c.kernel, std::uint64_t{c.global[0]} * c.global[1] * c.global[2]);
  return sched::cost_kind(static_cast<std::uint64_t>(c.op) | (std::uint64_t{1} << 63), c.bytes);
}

void Submitter::views_of(const Command& c, Views& out) {
  for (const Access& a : c.accesses) out.push_back({&a.rec->hazards, a.write});
}

bool Submitter::has_pending_deps(const Command& c) const {
  Views views;
  views_of(c, views);
  sched::Deps deps;
  sched::pending_deps(views.span(), e, deps);
  return !deps.empty();
}

Submitter::Placed Submitter::place(DeviceCtx& d, const Command& c) {
  settled_.placing = false;
  Placed at;
  at.kind = cost_kind(c);
  at.cost_ns = d.costs.estimate(at.kind);
  const sched::Estimate est{now_ns_, at.cost_ns, d.cross_wait_ns};
  at.finish_ns = now_ns_ + at.cost_ns;  // on a queue of its own
  if (c.op == Op::Timed) {
    at.queue = d.profiling_queue();
    return at;
  }
  if (c.op == Op::CrossWrite || c.held) {
    at.queue = sched::kNoQueue;  // the engine enqueues it
    return at;
  }
  if (c.on_transfer_queue) {
    at.queue = d.transfer_queue();
    return at;
  }
  Views views;
  views_of(c, views);
  sched::Deps deps;
  sched::pending_deps(views.span(), e, deps);
  const bool writes = std::any_of(c.accesses.begin(), c.accesses.end(), [](const Access& a) { return a.write; });
  if (deps.empty() && !writes) {
    // Reads of settled data submitted together (a burst) share one queue:
    // spread over the least loaded queues, each queue they touch costs a
    // flush per window. They have nothing to overlap with on the device but
    // each other, and a copy engine takes them one after another anyway.
    if (settled_.queue == sched::kNoQueue) settled_.queue = sched::least_loaded(d.load);
    settled_.placing = true;
    at.queue = settled_.queue;
    at.finish_ns = std::max(now_ns_, d.free_ns[at.queue]) + at.cost_ns;
    return at;
  }
  const std::optional<sched::Placement> p =
      deps.empty() ? place_for_consumer(d, c, est) : std::nullopt;
  const sched::Placement chosen = p ? *p : sched::earliest_finish({d.free_ns, d.load}, deps.span(), est);
  at.queue = chosen.queue;
  at.finish_ns = chosen.finish_ns;
  return at;
}

// Fresh work (nothing to wait for) whose output a command a few places
// later in the batch reads goes where that consumer, placed in turn, would
// end first (sched::earliest_finish_for_consumer): usually the consumer's
// own chain, so that it waits for nothing across queues (allocate a
// temporary, produce it, consume it into a long-lived buffer). Placed
// alone, it would go to the queue idle first, and the consumer would wait
// for it across queues — a marker, a flush and a wait list, which on
// NVIDIA's driver cost more than the two launches (figure 6). Only where
// it goes: the waits stay what the hazards say.
std::optional<sched::Placement> Submitter::place_for_consumer(const DeviceCtx& d, const Command& c,
                                                              const sched::Estimate& est) const {
  const auto writes = [&c](std::uint64_t buffer) {
    return std::any_of(c.accesses.begin(), c.accesses.end(),
                       [&](const Access& a) { return a.write && a.buffer == buffer; });
  };
  if (batch_next_ == nullptr) return std::nullopt;  // not inside a window's submission
  for (const Command* y = batch_next_; y != batch_end_ && y - batch_next_ < kLookahead; ++y) {
    if (std::none_of(y->accesses.begin(), y->accesses.end(), [&](const Access& a) { return a.read && writes(a.buffer); }))
      continue;
    Views views;
    for (const Access& a : y->accesses)
      if (!writes(a.buffer)) views.push_back({&a.rec->hazards, a.write});
    sched::Deps deps;
    sched::pending_deps(views.span(), e, deps);
    return sched::earliest_finish_for_consumer({d.free_ns, d.load}, est, deps.span(), d.costs.estimate(cost_kind(*y)));
  }
  return std::nullopt;
}

void Submitter::collect_waits(const DeviceCtx& d, const Command& c, QueueIndex q, Waits& w) {
  for (const Access& a : c.accesses)
    e.hazards.collect_waits(a.rec->hazards, a.write, q, w.waits,
                            e.schedule_recorder ? &w.completed : nullptr);
  // A timed launch runs alone: later work waits for it, but only for the
  // order, through its gate (a user event completed when the launch ends,
  // whatever its status), so its failure does not fail unrelated work.
  // Work that reads its data waits on its event, through the hazards.
  if (d.barrier && !e.is_complete(*d.barrier) && !c.of_earlier_copy()) {
    const auto& ids = w.waits.ids();
    if (std::find(ids.begin(), ids.end(), *d.barrier) == ids.end()) w.gate_of = d.barrier;
    w.waits.add(*d.barrier);
  }
  if (c.op == Op::Timed) {
    // Alone: after every earlier command of the device.
    for (const Queue& other : d.queues)
      if (!other.in_flight.empty() && !e.is_complete(other.in_flight.back())) w.waits.add(other.in_flight.back());
  }
}

bool Submitter::wait_events(DeviceCtx& d, const Command& c, QueueIndex q, const Waits& w,
                            WaitEvents& events) {
  for (CommandId id : w.waits.ids()) {
    const CommandRec& waited = *e.commands.find(id);  // not complete: still stored
    cl_event ev = id == w.gate_of ? waited.gate : event_for_wait(d, id);
    if (!ev) {
      Error err = cl::call_error(Status::KernelSync, "clEnqueueMarkerWithWaitList", CL_OUT_OF_RESOURCES);
      err.context(std::string(op_name(c.op)) + " (command " + std::to_string(c.id) + ") waiting for command " +
                  std::to_string(id));
      e.report(c.id, err);
      fail_unsubmitted(c, std::move(err));
      return false;
    }
    // OpenCL requires a flush before another queue waits on an event.
    // Its failure is not acted on here, in the middle of a submission: the
    // queue stays owed a flush, made by the next flush of every queue (at
    // the latest before the loop may wait); only that one failing loses
    // the device.
    if (waited.queue != sched::kNoQueue && waited.queue != q && d.queues[waited.queue].unflushed != 0)
      (void)flush_queue(d, waited.queue);
    events.push_back(ev);
  }
  return true;
}

bool Submitter::enqueue_or_fail(DeviceCtx& d, Command& c, QueueIndex q, std::span<const cl_event> events,
                                Enqueued& done) {
  if (c.op == Op::Timed) {
    cl_int grc = CL_SUCCESS;
    done.gate = e.api->clCreateUserEvent(d.context, &grc);
    if (grc != CL_SUCCESS || !done.gate) {
      Error err = cl::call_error(Status::KernelLaunch, "clCreateUserEvent", grc == CL_SUCCESS ? CL_OUT_OF_RESOURCES : grc);
      err.context("timed launch (command " + std::to_string(c.id) + ", kernel " + e.progs.kernels.at(c.kernel).name + ")");
      e.report(c.id, err);
      fail_unsubmitted(c, std::move(err));
      return false;
    }
  }
  done.own_event = needs_own_event(d, c);
  if (settled_.placing) settled_.shared = done.own_event ? 0 : settled_.shared + 1;
  const char* call = "";
  cl_int rc = CL_SUCCESS;
  if (c.op == Op::CrossWrite || c.held) {
    if (c.held) e.transfers.submit_held_copy(d, c, events, &done.event);
    else e.transfers.submit_cross_write(d, c, events, &done.event);
    call = "clCreateUserEvent";
    if (!done.event) rc = CL_OUT_OF_RESOURCES;
  } else {
    rc = enqueue_cl(d, c, q, events, done.own_event ? &done.event : nullptr, &call);
  }
  if (rc == CL_SUCCESS) return true;
  const Status s = c.op == Op::Write || c.op == Op::Fill ? Status::MemoryCopyH2P
                   : c.op == Op::Read                    ? Status::MemoryCopyP2H
                   : c.op == Op::Launch || c.op == Op::Timed ? Status::KernelLaunch
                                                              : Status::KernelSync;
  Error err = cl::call_error(s, call, rc);
  std::string what = std::string(op_name(c.op)) + " (command " + std::to_string(c.id);
  if (c.kernel) what += ", kernel " + e.progs.kernels.at(c.kernel).name + ", tag " + std::to_string(c.tag);
  err.context(what + ")");
  e.report(c.id, err);
  fail_unsubmitted(c, std::move(err));
  if (done.gate) e.api->clReleaseEvent(done.gate);  // nothing waits on it yet
  if (rc == CL_DEVICE_NOT_AVAILABLE || rc == CL_INVALID_COMMAND_QUEUE || rc == CL_INVALID_CONTEXT)
    e.lose_device(static_cast<std::uint32_t>(d.dev.info.index),
                  Error{Status::DeviceLost, std::string(call) + ": " + cl::error_name(rc)});
  return false;
}

void Submitter::record_submitted(DeviceCtx& d, const Command& c, const Placed& at, const Enqueued& done,
                                 const Waits& w) {
  const QueueIndex q = at.queue;
  CommandRec& r = *e.commands.find(c.id);
  r.cost_kind = at.kind;
  r.cost_ns = at.cost_ns;
  r.placed_ns = now_ns_;
  r.event = done.event;
  r.gate = done.gate;
  r.queue = q;
  if (c.op == Op::Timed || e.trace) r.submit_ns = uv_hrtime();  // read by timings and traces only
  if ((c.op == Op::Write || c.op == Op::Read) && c.bytes >= sched::TransferRate::kMinBytes) r.bytes = c.bytes;
  for (const Access& a : c.accesses)
    if (a.write) r.written.push_back(a.buffer);
  e.completion.transition(r, sched::CommandEvent::Submit);
  e.graph.submitted(r.node);
  if (!w.waits.empty()) e.graph.waits_for(c.id, r.node, w.waits.ids());
  for (const Access& a : c.accesses) {
    BufferRec& b = *a.rec;
    e.hazards.record(b.hazards, a.write, c.id, q, at.finish_ns);
    if (a.write) b.poison.reset();
  }
  if (done.own_event) ++e.counters.events;
  if (q != sched::kNoQueue) {
    Queue& queue = d.queues[q];
    if (queue.in_flight.empty()) queue.busy_since_ns = now_ns_;
    queue.in_flight.push_back(c.id);
    if (done.event) queue.evented.push_back(c.id);
    ++queue.unflushed;
    queue.needs_fence = !done.own_event;
    queue.unfenced = done.own_event ? 0 : queue.unfenced + 1;
    if (q < d.compute_queues()) {
      ++d.load[q];
      d.free_ns[q] = at.finish_ns;
    }
  }
  if (c.op == Op::Timed) d.barrier = c.id;
  ++e.counters.submitted;
  for (CommandId id : w.waits.ids())
    if (const CommandRec* waited = e.commands.find(id); waited && waited->queue != q) ++e.counters.cross_queue_waits;
}

void Submitter::watch(const DeviceCtx& d, Queue& queue, const Command& c) {
  const CommandId id = c.id;
  // Config::spin_us: someone waits for this one, so look for its
  // completion on every loop iteration rather than through the driver's
  // callback thread and uv_async (two wake-ups later). A busy core, for
  // at most spin_us (plus a large transfer's expected length, SpinRates);
  // update_busy() stops it once idle or past the deadline and only then
  // asks for the driver's callback, on the last awaited command of each
  // queue that still runs (Queue::callback_after_spin): a callback
  // registered at once delays the command itself on some drivers
  // (NVIDIA's). Without spinning, the callback is asked for right before
  // the loop may sleep, once per queue (ask_callbacks).
  if (d.spin_us == 0) {
    queue.callback_on = id;
    return;
  }
  const std::uint64_t now = uv_hrtime();
  std::uint64_t spin_ns = std::uint64_t{d.spin_us} * 1000;
  if (d.learns_spin && c.bytes >= SpinRates::kMinBytes) {
    CommandRec& r = *e.commands.find(id);
    if (r.submit_ns == 0) r.submit_ns = now;
    r.bytes = c.bytes;
    spin_ns += d.spin_rates.extra_ns(c.op, c.bytes);
  }
  e.spin_until_ns = std::max(e.spin_until_ns, now + spin_ns);
  if (e.spin_since_ns == 0) {
    e.spin_since_ns = now;
    e.spin_delivering_ns = 0;
    // Issued from a callback being delivered: the rest of the delivery is
    // not spinning either.
    if (e.completion.delivering && e.completion.delivering_since_ns == 0) e.completion.delivering_since_ns = now;
  }
  e.handles->set_spinning(true);
  queue.callback_after_spin = id;
}

void Submitter::ask_callbacks(DeviceCtx& d) {
  for (Queue& q : d.queues) {
    if (q.callback_on == 0) continue;
    e.ask_callback_for(d, q.callback_on);
    q.callback_on = 0;
  }
}

void Submitter::show(const DeviceCtx& d, const Command& c, QueueIndex q, const Waits& w) {
  const auto device = static_cast<std::uint32_t>(d.dev.info.index);
  if (e.trace) {
    TraceCommand t;
    t.id = c.id;
    t.device = device;
    t.queue = q;
    t.name = c.kernel ? e.progs.kernels.at(c.kernel).name : op_name(c.op);
    t.bytes = c.bytes;
    t.waits = w.waits.to_vector();
    e.commands.find(c.id)->extra().trace = std::make_unique<TraceCommand>(std::move(t));
  }
  if (e.schedule_recorder) {
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
    s.waits = w.waits.to_vector();
    s.completed = w.completed.to_vector();
    e.undelivered_schedule.push_back(std::move(s));
  }
}

cl_int Submitter::enqueue_cl(DeviceCtx& d, Command& c, QueueIndex q, std::span<const cl_event> waits,
                                cl_event* ev, const char** call) {
  cl_command_queue queue = d.queues[q].queue;
  const cl_uint n = static_cast<cl_uint>(waits.size());
  const cl_event* w = waits.empty() ? nullptr : waits.data();
  switch (c.op) {
    case Op::Launch:
    case Op::Timed: {
      KernelRec& k = *c.kernel_rec;
      k.set_args.resize(c.args.size());
      for (cl_uint i = 0; i < c.args.size(); ++i) {
        const KernelArg& a = c.args[i];
        SetArg want;
        want.valid = true;
        const void* value = nullptr;
        if (a.kind == KernelArg::Kind::Buffer) {
          // Its record, from the command's accesses (one per distinct buffer).
          const Access* acc = std::find_if(c.accesses.begin(), c.accesses.end(),
                                           [&](const Access& x) { return x.buffer == a.buffer.id; });
          cl_mem m = acc->rec->mem;
          // The handle itself is the argument.
          want.size = sizeof(cl_mem);  // NOLINT(bugprone-sizeof-expression)
          std::memcpy(want.bytes.data(), static_cast<const void*>(&m), sizeof(cl_mem));  // NOLINT(bugprone-sizeof-expression)
          want.frees = e.memory.mems_released;
          value = want.bytes.data();
        } else if (a.kind == KernelArg::Kind::Scalar) {
          want.size = a.scalar.size();
          std::memcpy(want.bytes.data(), a.scalar.bytes.data(), want.size);
          value = want.bytes.data();
        } else {
          want.size = a.local_bytes;  // value stays nullptr: local memory
        }
        if (k.set_args[i] == want) continue;
        if (cl_int rc = e.api->clSetKernelArg(k.kernel, i, want.size, value); rc != CL_SUCCESS) {
          k.set_args[i] = SetArg{};
          *call = "clSetKernelArg";
          return rc;
        }
        k.set_args[i] = want;
      }
      *call = "clEnqueueNDRangeKernel";
      return e.api->clEnqueueNDRangeKernel(queue, k.kernel, c.dims, nullptr, c.global.data(),
                                         c.has_local ? c.local.data() : nullptr, n, w, ev);
    }
    case Op::Write:
      *call = "clEnqueueWriteBuffer";
      return e.api->clEnqueueWriteBuffer(queue, c.accesses[0].rec->mem, CL_FALSE, c.offset, c.bytes,
                                       c.host_src, n, w, ev);
    case Op::Fill:
      *call = "clEnqueueFillBuffer";
      return e.api->clEnqueueFillBuffer(queue, c.accesses[0].rec->mem, c.pattern.data(),
                                      c.pattern.size(), c.offset, c.bytes, n, w, ev);
    case Op::Read:
      *call = "clEnqueueReadBuffer";
      return e.api->clEnqueueReadBuffer(queue, c.accesses[0].rec->mem, CL_FALSE, c.offset, c.bytes,
                                      c.host_dst, n, w, ev);
    case Op::Copy: {
      *call = "clEnqueueCopyBuffer";
      const Access& src = c.accesses[0];
      const Access& dst = c.accesses.size() > 1 ? c.accesses[1] : c.accesses[0];
      return e.api->clEnqueueCopyBuffer(queue, src.rec->mem, dst.rec->mem, c.src_offset,
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
