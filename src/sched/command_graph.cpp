#include "sched/command_graph.hpp"

#include <cassert>
#include <string>

namespace uvcl::sched {

void CommandGraph::transition(Node& n, DependencyEvent e) {
  auto s = next(n.state, e);
  assert(s && "illegal command transition");
  if (s) n.state = *s;
}

void CommandGraph::add(CommandId id, std::span<const CommandId> producers) {
  Node& n = nodes_[id];
  std::optional<Error> inherited;
  for (CommandId p : producers) {
    auto it = nodes_.find(p);
    if (it == nodes_.end() || p == id) continue;
    Node& pn = it->second;
    if (pn.state == DependencyState::Failed) {
      if (!inherited)
        inherited = Error{Status::KernelSync, "input produced by failed command " + std::to_string(p)};
      continue;
    }
    pn.dependents.push_back(id);
    ++n.pending_producers;
  }
  if (inherited) fail(id, std::move(*inherited));
}

void CommandGraph::submitted(CommandId id) {
  auto it = nodes_.find(id);
  assert(it != nodes_.end());
  if (it == nodes_.end()) return;
  transition(it->second, DependencyEvent::Submit);
}

void CommandGraph::event_done(CommandId id, std::optional<Error> error) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  if (n.state == DependencyState::Failed) {
    retire(id);  // its outcome was already given; the event is what we waited for
    return;
  }
  if (error) {
    fail(id, std::move(*error));
    // fail() leaves a submitted node in place until its event is done: it is.
    if (auto again = nodes_.find(id); again != nodes_.end()) retire(id);
    return;
  }
  transition(n, DependencyEvent::Complete);
  settle_from(id);
}

void CommandGraph::settle_from(CommandId first) {
  std::vector<CommandId>& work = work_;
  work.assign(1, first);
  while (!work.empty()) {
    const CommandId id = work.back();
    work.pop_back();
    auto it = nodes_.find(id);
    if (it == nodes_.end()) continue;
    Node& n = it->second;
    if (n.state != DependencyState::Complete || n.pending_producers != 0) continue;
    const ScratchList<CommandId, 2> dependents = std::move(n.dependents);
    transition(n, DependencyEvent::Retire);
    nodes_.erase(it);
    outcomes_.push_back(Outcome{id, std::nullopt});
    for (CommandId d : dependents) {
      auto dt = nodes_.find(d);
      if (dt == nodes_.end() || dt->second.state == DependencyState::Failed) continue;
      assert(dt->second.pending_producers > 0);
      --dt->second.pending_producers;
      work.push_back(d);
    }
  }
}

void CommandGraph::fail(CommandId id, Error error) { fail_from(id, std::move(error)); }

void CommandGraph::fail_from(CommandId first, Error error) {
  // Every downstream command gets the root error once, with one line of
  // context naming the root: messages do not grow with the chain.
  Error downstream = error;
  downstream.context("input produced by failed command " + std::to_string(first));
  std::vector<CommandId>& work = work_;
  work.assign(1, first);
  while (!work.empty()) {
    const CommandId id = work.back();
    work.pop_back();
    auto it = nodes_.find(id);
    if (it == nodes_.end()) continue;
    Node& n = it->second;
    if (n.state == DependencyState::Failed) continue;
    const bool awaits_event = n.state == DependencyState::Submitted;
    transition(n, DependencyEvent::Fail);
    const ScratchList<CommandId, 2> dependents = std::move(n.dependents);
    n.dependents.clear();
    outcomes_.push_back(Outcome{id, id == first ? error : downstream});
    if (sink_) sink_->on_failed(id, outcomes_.back().error.value());
    work.insert(work.end(), dependents.begin(), dependents.end());
    // A failed command whose event still runs stays until event_done.
    if (!awaits_event) retire(id);
  }
}

void CommandGraph::retire(CommandId id) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  transition(it->second, DependencyEvent::Retire);
  nodes_.erase(it);
}

std::vector<CommandGraph::Outcome> CommandGraph::take_outcomes() {
  std::vector<Outcome> out;
  out.swap(outcomes_);
  return out;
}

std::optional<DependencyState> CommandGraph::state(CommandId id) const {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.state;
}

}  // namespace uvcl::sched
