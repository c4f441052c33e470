// error_scopes.cpp — errors delivered to the work they concern.
//
// Every command belongs to the scope that was innermost when it was made:
// one the user pushed, or the root scope that drain() closes and renews. A
// failure goes to the scope of the command where it started (the first one
// is kept), so a drain or a popped scope never reports another caller's
// failure, and each failure is reported once; what fails downstream of it
// carries it to its own callback. Which
// scope a command belongs to is a range lookup in `scope_from` (first command
// id -> scope), made only when a command fails: nothing per launch.
// Errors no command owns (a lost device) go to the root scope.
#include "engine/engine_impl.hpp"

namespace uvcl {

void ErrorScopes::enter_scope(std::uint64_t scope) {
  // Entries no unfinished command can map to any more are dropped first.
  while (scope_from.size() > 1 && std::next(scope_from.begin())->first <= e.commands.base())
    scope_from.erase(scope_from.begin());
  scope_from[e.commands.next_id()] = scope;
}

void ErrorScopes::open_root_scope() {
  root_scope = next_scope++;
  scopes[root_scope];
  if (open_scopes.empty()) enter_scope(root_scope);
}

void ErrorScopes::capture_error(std::uint64_t scope, const Error& error) {
  auto it = scopes.find(scope);
  if (it != scopes.end() && !it->second.error) it->second.error = error;
}

std::uint64_t ErrorScopes::scope_of(CommandId id) const {
  auto it = scope_from.upper_bound(id);
  return it == scope_from.begin() ? root_scope : std::prev(it)->second;
}

void ErrorScopes::close_scope(std::uint64_t scope, DoneCallback on_done) {
  ErrorScope& s = scopes.at(scope);
  s.closed = true;
  s.target = e.commands.next_id() - 1;
  s.on_done = std::move(on_done);
  closing.push_back(scope);
}

void ErrorScopes::check_scopes() {
  // In closing order: a scope closed later covers at least as many commands.
  // Only the scopes closed before this step: one that a callback closes (a
  // drain that drains again) is the next step's, so a loop of them lets the
  // host's loop turn in between (the backlog keeps the loop from sleeping).
  for (std::size_t due = closing.size(); due > 0 && !closing.empty() && scopes.at(closing.front()).target < e.commands.base(); --due) {
    const std::uint64_t id = closing.front();
    closing.erase(closing.begin());
    auto node = scopes.extract(id);
    Result<void> r;
    if (node.mapped().error) r = std::move(*node.mapped().error);
    if (node.mapped().on_done) in_user_callback(e, [&] { node.mapped().on_done(std::move(r)); });
  }
  if (!closing.empty() && scopes.at(closing.front()).target < e.commands.base()) e.completion.backlog = true;
}

void ErrorScopes::cancel_scopes() {
  // Callbacks may close more scopes meanwhile: take the list each round.
  while (!closing.empty()) {
    std::vector<std::uint64_t> ids;
    ids.swap(closing);
    for (std::uint64_t id : ids) {
      auto node = scopes.extract(id);
      if (node && node.mapped().on_done)
        in_user_callback(e, [&] { node.mapped().on_done(Error{Status::Cancelled, "the engine was destroyed before the commands of this drain or scope completed"}); });
    }
  }
}

void Engine::push_error_scope() {
  Impl& e = *impl_;
  e.check_thread("push_error_scope");
  const std::uint64_t id = e.errors.next_scope++;
  e.errors.scopes[id];
  e.errors.open_scopes.push_back(id);
  e.errors.enter_scope(id);
}

Result<void> Engine::pop_error_scope(DoneCallback on_done) {
  Impl& e = *impl_;
  e.check_thread("pop_error_scope");
  if (e.released_everything())  // no loop side is left to call it later
    return Error{Status::Cancelled, std::string("pop_error_scope: the engine is ") + e.lifecycle_name()};
  if (e.errors.open_scopes.empty()) return Error{Status::InvalidArgument, "pop_error_scope: no error scope is open"};
  if (!on_done) return Error{Status::InvalidArgument, "pop_error_scope: a callback is required"};
  const std::uint64_t id = e.errors.open_scopes.back();
  e.errors.open_scopes.pop_back();
  e.submitter.submit_all();
  e.errors.close_scope(id, std::move(on_done));
  e.errors.enter_scope(e.errors.open_scopes.empty() ? e.errors.root_scope : e.errors.open_scopes.back());
  e.update_busy();
  return {};
}

}  // namespace uvcl
