// completion.cpp — from events back to callers: the timelines' completion
// walk, the record's state machine, outcomes and finalization.
//
//   collect_...    per queue, one status read for the first command with an
//                  event: it and the event-less commands before it complete
//   process_...    outcomes from the command graph (failures follow the data)
//   finalize       once per command, when its outcome is known AND its device
//                  work has ended: the user's callback runs here
#include <algorithm>
#include <iterator>

#include "engine/engine_impl.hpp"

namespace uvcl {

void CL_CALLBACK on_cl_event(cl_event, cl_int, void* token) {
  // Driver thread (or the loop thread, for an event already complete): do
  // nothing but wake the loop; the loop reads the status itself.
  loop::wake(reinterpret_cast<std::uintptr_t>(token));
}

// --- the record -------------------------------------------------------------

void Completion::make_final(CommandRec& r) {
  transition(r, sched::CommandEvent::Finalize);
  if (r.event) e.api->clReleaseEvent(r.event);
  r.event = nullptr;
  e.commands.drop_front_while([](const CommandRec& c) { return c.state == sched::CommandState::Final; });
}

// On PoCL, asks the driver rather than guessing "pending" for recent
// commands: a wait on an event that has already failed is not harmless
// there. On PoCL 3.1 a command enqueued with a failed event in its wait list
// stays CL_QUEUED for good (docs/architecture.md, "failure follows the
// data"); skipping this check for commands not yet flushed hung the fault
// sweep's reads. Elsewhere (DeviceCtx::status_at_submit) what the
// completion walk has not seen finish is pending.
bool Engine::Impl::is_complete(CommandId id) const {
  const CommandRec* r = commands.find(id);
  if (!r || sched::device_done(r->state) || r->seen_done) return true;  // no record: final
  if (r->queue == sched::kNoQueue) return false;  // pending, or a user event: completed by us
  DeviceCtx& d = *devices[r->device];
  if (!d.status_at_submit) return false;
  const CommandId by_id = r->event ? id : Completion::completing_id(d, id, r->queue);
  if (by_id == 0) return false;  // its fence comes with the next flush
  // Const in the scheduler's eyes; the flags below cache driver state.
  CommandRec& by = *const_cast<Engine::Impl*>(this)->commands.find(by_id);
  if (!by.seen_done) {
    // While a window is submitted, an event read unfinished is taken as
    // still unfinished, and so is every later one of its queue: asking the
    // driver again for each command of the window is a call per launch.
    Queue& q = d.queues[r->queue];
    if (d.submitting && q.unfinished_from != 0 && by_id >= q.unfinished_from) return false;
    ++status_queries;
    cl_int status = CL_QUEUED;
    if (api->clGetEventInfo(by.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) !=
            CL_SUCCESS ||
        status > CL_COMPLETE) {
      if (d.submitting) q.unfinished_from = by_id;
      return false;
    }
    // Kept for the completion walk, which completes this command with it
    // instead of asking the driver again (collect_group).
    by.status = status;
    by.seen_done = true;
  }
  const_cast<CommandRec*>(r)->seen_done = true;
  return true;
}

CommandId Completion::completing_id(const DeviceCtx& d, CommandId id, QueueIndex q) {
  const std::deque<CommandId>& f = d.queues[q].evented;
  // Usual on the launch path: the command is newer than the queue's last
  // event (what it waits for was just submitted), no search needed.
  if (f.empty() || f.back() < id) return 0;
  return *std::lower_bound(f.begin(), f.end(), id);
}

CommandRec* Completion::completed_by(const DeviceCtx& d, CommandId id, QueueIndex q) {
  const CommandId by = completing_id(d, id, q);
  return by ? e.commands.find(by) : nullptr;
}

// --- completions --------------------------------------------------------------

// Queue::failed_reads: how many status reads in a row may fail (a poll each,
// 1 ms apart) before the event counts as failed.
constexpr std::uint8_t kFailedReadsToGiveUp = 3;

void Completion::collect_completions() {
  // Round robin over every queue of every device, a few completed groups
  // (the commands up to an event) per queue per turn, resuming after the
  // queue served last: when the loop budget ends the walk, every queue has
  // advanced alike. Walking one queue to its end first starved the others
  // under a budget (their commands never retired, their records never
  // freed); one group per turn visited every idle queue per group (where
  // every command has an event, per command).
  // A queue whose status read said "not yet" (or failed) is left alone
  // for the rest of this walk (Queue::not_yet_walk): while other queues
  // complete groups the round robin passes it again and again, and asking
  // again microseconds later was a read per pass (and used up a failing
  // event's retries, meant a poll apart, within one walk).
  constexpr int kGroupsPerTurn = 8;
  ++walk;
  std::size_t total = 0;
  for (const auto& dp : e.devices) total += dp->queues.size();
  bool collected = true;  // since the budget was last checked: the clock is read only after work
  for (std::size_t idle = 0; idle < total; collect_next = (collect_next + 1) % total) {
    std::size_t qi = collect_next % total, dev = 0;
    while (qi >= e.devices[dev]->queues.size()) qi -= e.devices[dev++]->queues.size();
    int groups = 0;
    for (; groups < kGroupsPerTurn; ++groups) {
      // Outcomes still waiting from an earlier iteration are delivered
      // first: collecting more would only queue them behind.
      if (collected && (over_budget() || deferred() > 0)) {
        backlog = true;
        return;
      }
      collected = collect_group(*e.devices[dev], static_cast<QueueIndex>(qi));
      if (!collected) break;
    }
    idle = groups > 0 ? 0 : idle + 1;
  }
}

bool Completion::collect_group(DeviceCtx& d, QueueIndex qi) {
  Queue& q = d.queues[qi];
  if (q.in_flight.empty() || q.not_yet_walk == walk) return false;
  // One status read for the first command with an event: the commands
  // before it (event-less) completed with it. Its own event only: on PoCL
  // 3.1 a later event of the same in-order queue says nothing about an
  // earlier one (one enqueued after an earlier command failed completes
  // CL_COMPLETE, even while commands before the failed one still run).
  // Every command has an event there, so that is a read per command.
  std::size_t k =
      q.evented.empty()                             ? q.in_flight.size()
      : q.evented.front() == q.in_flight.front()    ? 0  // every command has an event (PoCL), or the first does
          : static_cast<std::size_t>(std::lower_bound(q.in_flight.begin(), q.in_flight.end(), q.evented.front()) -
                                     q.in_flight.begin());
  cl_int status = CL_QUEUED;
  if (k == q.in_flight.size()) {
    if (d.state != sched::DeviceState::Lost) return false;  // its fence comes with the next flush
    status = CL_DEVICE_NOT_AVAILABLE;                        // nothing will ever complete them
    k = q.in_flight.size() - 1;
  } else if (const CommandRec& r = *e.commands.find(q.in_flight[k]); r.seen_done && r.status <= CL_COMPLETE) {
    status = r.status;  // a hazard check read it done (Engine::Impl::is_complete): not asked again
  } else {
    ++e.status_queries;
    cl_int rc = e.api->clGetEventInfo(r.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
    if (rc != CL_SUCCESS && ++q.failed_reads < kFailedReadsToGiveUp) {
      q.not_yet_walk = walk;
      return false;
    }
    if (rc != CL_SUCCESS) status = rc;  // an event we cannot query is a failed one
    q.failed_reads = 0;
    if (status > CL_COMPLETE) {
      q.not_yet_walk = walk;
      return false;
    }
  }
  complete_queue_front(d, qi, k + 1, status);
  return true;
}

// The first `count` commands of queue qi completed with `status`. A failure
// the event-less ones share with the event that completed them is
// attributed to the first of them; the others name it.
void Completion::complete_queue_front(DeviceCtx& d, QueueIndex qi, std::size_t count, cl_int status) {
  Queue& q = d.queues[qi];
  const CommandId by = q.in_flight[count - 1];
  if (status == CL_COMPLETE) learn_costs(d, q, count);
  if (count >= q.in_flight.size() && qi < d.compute_queues()) d.free_ns[qi] = 0;  // idle now
  for (std::size_t i = 0; i < count && !q.in_flight.empty(); ++i) {
    const CommandId id = q.in_flight.front();
    q.in_flight.pop_front();
    if (!q.evented.empty() && q.evented.front() == id) q.evented.pop_front();
    if (qi < d.compute_queues()) --d.load[qi];
    // The first: behind the failure completed before it, if any; the rest:
    // behind the first.
    const CommandId ahead = status < 0 ? q.failed_ahead : 0;
    if (i == 0) q.failed_ahead = status < 0 ? id : 0;
    if (status == CL_COMPLETE && final_at_once(id)) continue;
    event_completed(id, status, ahead, by);
  }
}

// What the first `count` commands of queue q took, learned by their
// device's cost table: the time since the queue's last completion (or since
// it was idle), or since the first of them was submitted if that came later
// (the queue may have drained unseen and waited for the host: a stream the
// host paces would read as the host's pace), shared out by what each was
// estimated to take. Measured by the host when it sees the completion, so a
// completion seen late reads long; the table's smoothing keeps one late
// sighting from swinging it.
void Completion::learn_costs(DeviceCtx& d, Queue& q, std::size_t count) {
  const std::uint64_t now = uv_hrtime();
  count = std::min(count, q.in_flight.size());
  const std::uint64_t since =
      count ? std::max(q.busy_since_ns, e.commands.find(q.in_flight.front())->placed_ns) : q.busy_since_ns;
  const std::uint64_t took = now > since ? now - since : 0;
  q.busy_since_ns = now;
  std::uint64_t estimated = 0;
  for (std::size_t i = 0; i < count; ++i) estimated += e.commands.find(q.in_flight[i])->cost_ns;
  if (estimated == 0) return;
  for (std::size_t i = 0; i < count; ++i) {
    const CommandRec& r = *e.commands.find(q.in_flight[i]);
    if (r.cost_kind == 0) continue;
    const double share = static_cast<double>(r.cost_ns) / static_cast<double>(estimated);
    const auto ns = static_cast<std::uint64_t>(static_cast<double>(took) * share);
    d.costs.learn(r.cost_kind, ns);
    if (r.bytes && r.op == Op::Write) d.to_device.learn(r.bytes, ns);
    if (r.bytes && r.op == Op::Read) d.from_device.learn(r.bytes, ns);
  }
}

bool Completion::final_at_once(CommandId id) {
  CommandRec& r = *e.commands.find(id);
  if (r.hook || r.gate || r.bytes || r.extras || r.state != sched::CommandState::Submitted || !r.node.live ||
      r.node.state != sched::DependencyState::Submitted)
    return false;
  r.status = CL_COMPLETE;
  transition(r, sched::CommandEvent::DeviceDone);
  give_back_kernel(r);
  const bool settled = e.graph.complete(r.node);
  release_frees(r);
  if (settled) {
    transition(r, sched::CommandEvent::Outcome);
    make_final(r);
  }
  return true;
}

void Completion::give_back_kernel(CommandRec& r) {
  if (!r.kernel_rec) return;
  --r.kernel_rec->uses;
  if (r.kernel_rec->released) e.progs.maybe_free_kernel(r.kernel);
  r.kernel_rec = nullptr;
}

void Completion::release_frees(CommandRec& r) {
  if (r.frees.empty()) return;
  const sched::ScratchList<std::uint64_t, 1> frees = std::move(r.frees);
  e.memory.release_uses(frees.span());
}

void Completion::event_completed(CommandId id, cl_int status, CommandId failed_ahead, CommandId by,
                                   const Error* cause, bool cause_reported) {
  CommandRec& r = *e.commands.find(id);
  r.status = status;
  open_gate(r);
  if (r.bytes && r.submit_ns && status == CL_COMPLETE)
    e.devices[r.device]->spin_rates.learn(r.op, r.bytes, uv_hrtime() - r.submit_ns);
  if (r.op == Op::Timed && status == CL_COMPLETE) {
    cl_ulong start = 0, end = 0;
    cl_int rc = e.api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
    if (rc == CL_SUCCESS)
      rc = e.api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    if (rc != CL_SUCCESS)
      r.extra().timing = cl::call_error(Status::KernelSync, "clGetEventProfilingInfo", rc)
                     .context("timed launch " + std::to_string(id));
    else
      r.extra().timing = Timing{end > start ? end - start : 0, uv_hrtime() - r.submit_ns};
  }
  if (r.extras && r.extras->trace) trace_completed(r);
  std::optional<Error> err;
  if (status < 0 && cause) {
    err = *cause;
    err->context(std::string(op_name(r.op)) + " (command " + std::to_string(id) + ") on device " +
                 std::to_string(r.device));
  } else if (status < 0) {
    err = event_error(id, r, failed_ahead, by);
  }
  const bool parked = r.state == sched::CommandState::Parked;
  transition(r, sched::CommandEvent::DeviceDone);
  give_back_kernel(r);
  using Report = sched::CommandGraph::Report;
  e.graph.event_done(id, std::move(err), failed_ahead != 0 || cause_reported ? Report::Never : Report::IfOwn);
  release_frees(r);
  // Its outcome was known before its work ended: delivered now with the
  // outcomes of this step, after the walk, not inside it.
  if (parked) e.graph.requeue(sched::CommandGraph::Outcome{id, r.take_outcome()});
}

void Completion::trace_completed(CommandRec& r) {
  TraceCommand t = std::move(*r.extras->trace);
  r.extras->trace.reset();
  const DeviceCtx& d = *e.devices[r.device];
  const bool profiled = r.queue != sched::kNoQueue && (e.config.profile || r.queue == d.profiling_queue());
  cl_ulong queued = 0, start = 0, end = 0;
  if (profiled && r.status == CL_COMPLETE &&
      e.api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_QUEUED, sizeof queued, &queued, nullptr) ==
          CL_SUCCESS &&
      e.api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) ==
          CL_SUCCESS &&
      e.api->clGetEventProfilingInfo(r.event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) == CL_SUCCESS) {
    // The device clock has its own epoch: align "queued" with the host's
    // submission time, once per device.
    if (!e.trace->has_offset(r.device))
      e.trace->set_offset(r.device, static_cast<std::int64_t>(r.submit_ns) - static_cast<std::int64_t>(queued));
    const std::int64_t off = e.trace->offset(r.device);
    t.start_ns = static_cast<std::uint64_t>(static_cast<std::int64_t>(start) + off);
    t.end_ns = static_cast<std::uint64_t>(static_cast<std::int64_t>(end) + off);
  } else {
    t.start_ns = r.submit_ns;
    t.end_ns = uv_hrtime();
  }
  e.trace->command(std::move(t));
}

Error Completion::event_error(CommandId id, const CommandRec& r, CommandId failed_ahead, CommandId by) const {
  const Status s = r.op == Op::Read ? Status::MemoryCopyP2H
                   : r.op == Op::Write || r.op == Op::Fill ? Status::MemoryCopyH2P
                                                            : Status::KernelSync;
  std::string what = std::string(op_name(r.op)) + " (command " + std::to_string(id);
  if (r.kernel) {
    auto k = e.progs.kernels.find(r.kernel);
    if (k != e.progs.kernels.end()) what += ", kernel " + k->second.name + ", tag " + std::to_string(r.tag);
  }
  what += ") on device " + std::to_string(r.device) + " completed with " + cl::error_name(r.status);
  if (failed_ahead != 0)
    what += " (queued behind failed command " + std::to_string(failed_ahead) + " on the same in-order queue)";
  else if (by != 0 && by != id)
    what += " (as read from the event of command " + std::to_string(by) +
            ", which completes it on the same in-order queue)";
  return Error{s, what};
}

void Completion::open_gate(CommandRec& r) {
  if (!r.gate) return;
  // A failed status would fail what waits; the gate only orders.
  e.api->clSetUserEventStatus(r.gate, CL_COMPLETE);
  e.api->clReleaseEvent(r.gate);
  r.gate = nullptr;
}

void Engine::Impl::on_failed(CommandId id, const Error& error) {
  const CommandRec* r = commands.find(id);
  if (!r) return;
  for (std::uint64_t bid : r->written) {
    BufferRec* b = memory.buffers.find(bid);
    // Unless a later command wrote it since.
    if (b && b->hazards.writer && b->hazards.writer->id == id)
      b->poison = Error{error.status, "buffer " + std::to_string(bid) + " holds no valid data: " + error.message};
  }
}

void Completion::deliver_outcome(sched::CommandGraph::Outcome& o) {
  using S = sched::CommandState;
  CommandRec* r = e.commands.find(o.id);
  if (!r) return;
  if (r->state == S::Submitted) {  // known before its device work ended: finalized when it does
    r->extra().outcome = std::move(o.error);
    transition(*r, sched::CommandEvent::Outcome);
    return;
  }
  if (r->state == S::DeviceDone) transition(*r, sched::CommandEvent::Outcome);
  finalize(*r, o.id, o.error);
}

void Completion::process_outcomes() {
  // While the loop spins, delivering is not spinning (EngineStats::spin_ns):
  // timed at the outermost level (a hook may call poll(), which comes back
  // here), and only when there is something to deliver.
  if (delivering || (deferred() == 0 && !e.graph.has_outcomes())) {
    deliver_outcomes();
    return;
  }
  delivering = true;
  delivering_since_ns = e.spin_since_ns != 0 ? uv_hrtime() : 0;  // else set if a spin starts meanwhile
  deliver_outcomes();
  if (delivering_since_ns != 0 && e.spin_since_ns != 0)
    e.spin_delivering_ns += uv_hrtime() - std::max(delivering_since_ns, e.spin_since_ns);
  delivering_since_ns = 0;
  delivering = false;
}

void Completion::deliver_outcomes() {
  // Left over from an iteration that ran out of its budget: older than
  // anything still in the graph.
  while (deferred() > 0) {
    if (yield_now()) {
      backlog = true;
      return;
    }
    sched::CommandGraph::Outcome o = std::move(deferred_outcomes[deferred_head++]);
    deliver_outcome(o);
  }
  deferred_outcomes.clear();
  deferred_head = 0;
  // A hook may run process_outcomes again (poll() from a callback): each
  // level takes a buffer of its own from the spares.
  std::vector<sched::CommandGraph::Outcome> batch;
  if (!outcome_spares.empty()) {
    batch = std::move(outcome_spares.back());
    outcome_spares.pop_back();
  }
  bool stopped = false;
  while (!stopped && e.graph.take_outcomes(batch)) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (yield_now()) {
        if (deferred() == 0) {  // the rest of the batch waits where it is
          deferred_outcomes.swap(batch);
          deferred_head = i;
        } else {  // a callback's poll() left some (it ran this loop too)
          std::move(batch.begin() + static_cast<std::ptrdiff_t>(i), batch.end(), std::back_inserter(deferred_outcomes));
        }
        backlog = stopped = true;
        break;
      }
      deliver_outcome(batch[i]);
    }
  }
  outcome_spares.push_back(std::move(batch));
}

void Completion::finalize(CommandRec& r, CommandId id, const std::optional<Error>& error) {
  // The hook may add commands: records never move, and this one, not final
  // yet, is not dropped meanwhile.
  if (FinalHook hook = std::move(r.hook)) in_user_callback(e, [&] { hook(id, error); });
  make_final(r);
}

}  // namespace uvcl
