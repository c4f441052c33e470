// submitter.hpp — windows to queues: which queue a command goes to, what it
// waits for, its enqueue, fences and flushes (submit.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/records.hpp"

namespace uvcl {

struct Submitter {
  explicit Submitter(Engine::Impl& engine) : e(engine) {}
  Engine::Impl& e;

  CommandId enqueue(std::uint32_t device, Command c);  // into the window; may submit
  void submit_window(std::uint32_t device);
  void submit_all();
  void submit_one(DeviceCtx& d, Command& c);
  void fail_unsubmitted(const Command& c, Error error);
  cl_int enqueue_cl(DeviceCtx& d, Command& c, QueueIndex q, const std::vector<cl_event>& waits, cl_event* ev,
                    const char** call);
  // Fences every queue whose last command has no event, then flushes.
  void flush_dirty_queues(DeviceCtx& d);
  // A marker after the last command of queue q, which then carries it as
  // its event; nullptr if the marker could not be enqueued.
  cl_event fence(DeviceCtx& d, QueueIndex q);
  // The event another queue waits on for command `id`: its own, the next
  // fence on its queue, or a new fence. nullptr: no fence could be made.
  cl_event event_for_wait(DeviceCtx& d, CommandId id);
  // Whether the command gets an event of its own.
  bool needs_own_event(const DeviceCtx& d, const Command& c) const;
};

}  // namespace uvcl
