// ids.hpp — the abstract tokens the scheduler works on.
//
// The scheduler knows nothing of OpenCL or libuv: a command is a CommandId
// (unique, increasing in program order) and the engine says, through
// EventRefs, whether it has completed.
#pragma once

#include <cstdint>

namespace uvcl::sched {

using CommandId = std::uint64_t;  // 0 is "no command"
using QueueIndex = std::uint32_t;

// The engine's side: whether a command has completed. A tracking slot holds
// no reference: a completed command needs no wait, so its event may go.
class EventRefs {
 public:
  // True once the command's event has completed (successfully or not).
  virtual bool is_complete(CommandId id) const = 0;

 protected:
  ~EventRefs() = default;
};

}  // namespace uvcl::sched
