// completion.hpp — from events back to callers: the timelines' completion
// walk under the loop budget, the record's state machine, outcomes and
// finalization (completion.cpp).
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <vector>

#include <uv.h>

#include "engine/records.hpp"

namespace uvcl {

struct Completion {
  explicit Completion(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  std::vector<std::vector<sched::CommandGraph::Outcome>> outcome_spares;  // process_outcomes' buffers, reused
  // Config::loop_budget_us: the end of this loop iteration's share (0: no
  // bound), and whether work was left for the next iteration. Outcomes
  // taken from the graph but not yet delivered wait in deferred_outcomes
  // from deferred_head on, in order, ahead of newer ones: most often the
  // rest of the batch the budget cut short, kept where it is.
  std::uint64_t iteration_deadline_ns = 0;  // set by the iteration's first on_poll, cleared by on_check
  std::uint64_t step_deadline_ns = 0;       // iteration_deadline_ns inside on_poll, else 0
  std::size_t collect_next = 0;             // the queue (over all devices) the completion walk serves next
  std::uint64_t walk = 0;                   // completion walks made (Queue::not_yet_walk)
  bool backlog = false;
  std::vector<sched::CommandGraph::Outcome> deferred_outcomes;
  std::size_t deferred_head = 0;
  std::size_t deferred() const { return deferred_outcomes.size() - deferred_head; }
  bool over_budget() const { return step_deadline_ns != 0 && uv_hrtime() >= step_deadline_ns; }
  // Outcomes wait for a later iteration only while few do (a bound on what
  // they hold alive). The completion walk does not run while any wait: it
  // would only add to them.
  static constexpr std::size_t kMaxDeferredOutcomes = 1024;
  bool yield_now() const { return over_budget() && deferred() < kMaxDeferredOutcomes; }

  // The first command at or after `id` on its queue that has an event (so
  // completes with it), or nullptr.
  CommandRec* completed_by(const DeviceCtx& d, CommandId id, QueueIndex q);
  // The id of that command (0: none yet).
  static CommandId completing_id(const DeviceCtx& d, CommandId id, QueueIndex q);
  void collect_completions();
  bool collect_group(DeviceCtx& d, QueueIndex qi);  // true: the queue's first commands completed
  // failed_ahead: the failed command completed just before it on its
  // in-order queue (0: none).
  // by: the command whose event said so, if not this one's own. cause: the
  // failure in more detail than the status (a cross-device copy's chunk);
  // cause_reported: reported where it started already (by a command of its
  // own, or it follows from one that was). A failure is reported once,
  // where it starts: not for one behind a failed command on its queue, nor
  // for one a failed producer explains (the graph decides that).
  void event_completed(CommandId id, cl_int status, CommandId failed_ahead = 0, CommandId by = 0,
                       const Error* cause = nullptr, bool cause_reported = false);
  void complete_queue_front(DeviceCtx& d, QueueIndex qi, std::size_t count, cl_int status);
  void learn_costs(DeviceCtx& d, Queue& q, std::size_t count);
  // event_completed's common case in one step, for a command that
  // completed without error: one with nothing to do at completion but give
  // back its holds (no callback, gate, timing, trace or transfer rate) is
  // final at once if its producers all succeeded — no outcome goes through
  // the graph's queue for it, and as it has no callback, when it becomes
  // final is not observable. False: event_completed's full path is needed.
  bool final_at_once(CommandId id);
  void give_back_kernel(CommandRec& r);  // the command's use of its kernel
  void release_frees(CommandRec& r);     // buffers whose release waited for it
  void open_gate(CommandRec& r);  // completes and drops a timed launch's gate
  void process_outcomes();
  void deliver_outcomes();
  // The outermost delivery of outcomes is running; while the loop spins,
  // since when (0: no spin yet). Delivering is work, not spinning
  // (EngineStats::spin_ns).
  bool delivering = false;
  std::uint64_t delivering_since_ns = 0;
  void deliver_outcome(sched::CommandGraph::Outcome& o);
  void finalize(CommandRec& r, CommandId id, const std::optional<Error>& error);
  // The record's state machine: every move goes through here; an illegal
  // one is a bug in the engine (asserted in debug builds).
  static void transition(CommandRec& r, sched::CommandEvent ev) {
    const auto to = sched::next(r.state, ev);
    assert(to && "illegal command transition");
    if (to) r.state = *to;
  }
  // Final: drops it (and the final ones after it) once every older command
  // is final too.
  void make_final(CommandRec& r);
  Error event_error(CommandId id, const CommandRec& r, CommandId failed_ahead, CommandId by) const;
  void trace_completed(CommandRec& r);
};

}  // namespace uvcl
