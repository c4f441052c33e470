// error_scopes.hpp — errors delivered to the work they concern: drains and
// the scopes a caller pushes and pops (error_scopes.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/records.hpp"

namespace uvcl {

// The commands made while a scope was the innermost one, and the first error
// among them.
struct ErrorScope {
  std::optional<Error> error;
  CommandId target = 0;  // once closed: the last command made before
  DoneCallback on_done;  // once closed: runs when every command up to target is final
  bool closed = false;
};

struct ErrorScopes {
  explicit ErrorScopes(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  std::unordered_map<std::uint64_t, ErrorScope> scopes;
  std::map<CommandId, std::uint64_t> scope_from;  // first command id -> scope, up to the next entry
  std::vector<std::uint64_t> open_scopes;          // pushed by the user, innermost last
  std::vector<std::uint64_t> closing;              // closed, waiting for their commands, in order
  std::uint64_t root_scope = 0;                    // drain()'s
  std::uint64_t next_scope = 1;

  void enter_scope(std::uint64_t scope);  // commands made from now on belong to it
  void open_root_scope();
  void capture_error(std::uint64_t scope, const Error& error);
  std::uint64_t scope_of(CommandId id) const;
  void close_scope(std::uint64_t scope, DoneCallback on_done);
  void check_scopes();   // closed scopes whose commands are all final call back
  void cancel_scopes();  // shutdown
};

}  // namespace uvcl
