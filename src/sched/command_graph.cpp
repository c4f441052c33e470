#include "sched/command_graph.hpp"

#include <algorithm>
#include <cassert>
#include <string>

namespace uvcl::sched {

GraphNode* CommandGraph::live(CommandId id) const {
  GraphNode* n = nodes_.find(id);
  return n && n->live ? n : nullptr;
}

void CommandGraph::transition(GraphNode& n, DependencyEvent e) {
  auto s = next(n.state, e);
  assert(s && "illegal command transition");
  if (s) n.state = *s;
}

bool CommandGraph::add(CommandId id, std::span<const CommandId> producers) {
  GraphNode* made = nodes_.find(id);
  assert(made && "a command is added with a node to hold it");
  return made ? add(id, *made, producers) : false;
}

bool CommandGraph::add(CommandId id, GraphNode& n, std::span<const CommandId> producers) {
  assert(!n.live && "a command is added once");
  if (n.live) return true;  // added before (a bug, asserted above): it is still in the graph
  n = GraphNode{};
  n.live = true;
  ++live_;
  std::optional<Error> inherited;
  for (CommandId p : producers) {
    GraphNode* pn = p == id ? nullptr : live(p);
    if (!pn) continue;
    if (pn->state == DependencyState::Failed) {
      if (!inherited)
        inherited = Error{Status::KernelSync, "input produced by failed command " + std::to_string(p)};
      continue;
    }
    pn->dependents.push_back(id);
    ++n.pending_producers;
  }
  if (!inherited) return true;
  fail(id, std::move(*inherited));
  return false;
}

void CommandGraph::submitted(CommandId id) {
  GraphNode* n = live(id);
  assert(n);
  if (n) submitted(*n);
}

void CommandGraph::submitted(GraphNode& n) {
  assert(n.live);
  transition(n, DependencyEvent::Submit);
}

void CommandGraph::waits_for(CommandId id, GraphNode& n, std::span<const CommandId> waits) {
  assert(n.live && n.state == DependencyState::Submitted);
  for (CommandId w : waits) {
    GraphNode* wn = w == id ? nullptr : live(w);
    if (!wn) continue;  // settled: a failure would have failed or poisoned it
    if (wn->state == DependencyState::Failed) {
      n.failed_wait = w;
      continue;
    }
    wn->dependents.push_back(id | kOrderEdge);
    ++n.pending_waits;
  }
}

void CommandGraph::event_done(CommandId id, std::optional<Error> error, Report report) {
  GraphNode* n = live(id);
  if (!n) return;
  if (n->state == DependencyState::Failed) {
    retire(*n);  // its outcome was already given; the event is what we waited for
    return;
  }
  if (error && n->failed_wait != 0) {  // the wait's failure was told, and explains this one
    error->context("waited for failed command " + std::to_string(n->failed_wait));
    report = Report::Never;
  }
  if (error && (n->pending_producers != 0 || n->pending_waits != 0)) {
    transition(*n, DependencyEvent::Complete);
    n->held_failure = true;
    held_.push_back(HeldFailure{id, std::move(*error), report});
    return;
  }
  if (error) {
    fail_own(id, std::move(*error), report);
    // fail() leaves a submitted node in place until its event is done: it is.
    if (GraphNode* again = live(id)) retire(*again);
    return;
  }
  transition(*n, DependencyEvent::Complete);
  settle_from(id, *n);
}

void CommandGraph::fail_own(CommandId id, Error error, Report report) {
  if (sink_ && report == Report::IfOwn) sink_->on_own_failure(id, error);
  fail_from(id, std::move(error));
}

CommandGraph::HeldFailure CommandGraph::take_held(CommandId id) {
  auto it = std::find_if(held_.begin(), held_.end(), [id](const HeldFailure& h) { return h.id == id; });
  assert(it != held_.end());
  if (it == held_.end()) return HeldFailure{id, Error{Status::KernelSync, "a held failure was lost"}, Report::Never};
  HeldFailure h = std::move(*it);
  held_.erase(it);
  return h;
}

bool CommandGraph::complete(GraphNode& n) {
  assert(n.live && n.state == DependencyState::Submitted);
  transition(n, DependencyEvent::Complete);
  if (n.pending_producers != 0) return false;
  // settle_from's first step without its worklist: most dependents are
  // still running, and only one that settles now needs settling from.
  count_down_dependents(n, [this](CommandId d, GraphNode& dn) { settle_from(d, dn); });
  retire(n);
  return true;
}

template <class Settles>
void CommandGraph::count_down_dependents(const GraphNode& n, Settles&& settles) {
  for (CommandId entry : n.dependents) {
    const CommandId d = edge_target(entry);
    GraphNode* dn = live(d);
    if (!dn || dn->state == DependencyState::Failed) continue;
    std::uint32_t& pending = is_order_edge(entry) ? dn->pending_waits : dn->pending_producers;
    assert(pending > 0);
    // Only one that settles now is visited: most are still running.
    if (--pending == 0 && ready_to_settle(*dn)) settles(d, *dn);
  }
}

bool CommandGraph::ready_to_settle(const GraphNode& n) {
  // A held failure waits for the waits too: one of them may explain it.
  return n.state == DependencyState::Complete && n.pending_producers == 0 && (!n.held_failure || n.pending_waits == 0);
}

void CommandGraph::settle_from(CommandId first, GraphNode& node) {
  // Nodes, not ids: each is looked up once, when it becomes a dependent to
  // visit. None is dropped while settling (outcomes are only queued).
  std::vector<std::pair<CommandId, GraphNode*>>& work = settle_work_;
  work.assign(1, {first, &node});
  while (!work.empty()) {
    const auto [id, n] = work.back();
    work.pop_back();
    if (!n->live || !ready_to_settle(*n)) continue;
    if (n->held_failure) {  // every producer succeeded: the failure is its own
      n->held_failure = false;
      HeldFailure h = take_held(id);
      fail_own(id, std::move(h.error), h.report);
      continue;
    }
    count_down_dependents(*n, [&work](CommandId d, GraphNode& dn) { work.emplace_back(d, &dn); });
    retire(*n);
    outcomes_.push_back(Outcome{id, std::nullopt});
  }
}

void CommandGraph::fail(CommandId id, Error error) { fail_from(id, std::move(error)); }

void CommandGraph::fail_from(CommandId first, Error error) {
  // Every downstream command gets the root error once, with one line of
  // context naming the root: messages do not grow with the chain.
  Error downstream = error;
  downstream.context("input produced by failed command " + std::to_string(first));
  Error waited = error;  // for a failure a wait for it explains (an order edge)
  waited.context("waited for failed command " + std::to_string(first));
  std::vector<CommandId>& work = fail_work_;
  work.assign(1, first);
  while (!work.empty()) {
    const CommandId entry = work.back();
    work.pop_back();
    const CommandId id = edge_target(entry);
    GraphNode* n = live(id);
    if (!n || n->state == DependencyState::Failed) continue;
    if (is_order_edge(entry)) {
      // It only waited for the failed command: its data is its own, but a
      // failure of its event is explained by the wait.
      n->failed_wait = first;
      if (n->pending_waits > 0) --n->pending_waits;
      if (!n->held_failure) continue;
    }
    const bool awaits_event = n->state == DependencyState::Submitted;
    if (n->held_failure) {  // a producer's failure explains its own
      n->held_failure = false;
      (void)take_held(id);
    }
    transition(*n, DependencyEvent::Fail);
    const ScratchList<CommandId, 4> dependents = std::move(n->dependents);
    n->dependents.clear();
    outcomes_.push_back(Outcome{id, id == first ? error : is_order_edge(entry) ? waited : downstream});
    if (sink_) sink_->on_failed(id, outcomes_.back().error.value());
    work.insert(work.end(), dependents.begin(), dependents.end());
    // A failed command whose event still runs stays until event_done. The
    // sink may have touched nodes: look this one up again.
    if (!awaits_event)
      if (GraphNode* again = live(id)) retire(*again);
  }
}

void CommandGraph::retire(GraphNode& n) {
  transition(n, DependencyEvent::Retire);
  n.live = false;
  n.dependents.clear();
  --live_;
}

bool CommandGraph::take_outcomes(std::vector<Outcome>& into) {
  into.clear();
  into.swap(outcomes_);
  return !into.empty();
}

std::vector<CommandGraph::Outcome> CommandGraph::take_outcomes() {
  std::vector<Outcome> out;
  take_outcomes(out);
  return out;
}

std::optional<DependencyState> CommandGraph::state(CommandId id) const {
  const GraphNode* n = live(id);
  if (!n) return std::nullopt;
  return n->state;
}

}  // namespace uvcl::sched
