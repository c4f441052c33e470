// ids.hpp — the abstract tokens the scheduler works on.
//
// The scheduler knows nothing of OpenCL or libuv: a command is a CommandId
// (unique, increasing in program order), its completion event is whatever the
// engine maps that id to, and references to events go through EventRefs.
#pragma once

#include <cstdint>

namespace uvcl::sched {

using CommandId = std::uint64_t;  // 0 is "no command"
using QueueIndex = std::uint32_t;

// The engine's side of event ownership. Every tracking slot that stores a
// CommandId holds its own reference (retain on store, release on replace),
// so no event is released while any slot still names it.
class EventRefs {
 public:
  virtual void retain(CommandId id) = 0;
  virtual void release(CommandId id) = 0;
  // True once the command's event has completed (successfully or not).
  virtual bool is_complete(CommandId id) const = 0;

 protected:
  ~EventRefs() = default;
};

}  // namespace uvcl::sched
