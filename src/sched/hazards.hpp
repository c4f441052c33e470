// hazards.hpp — read/write hazard tracking per buffer, across queues.
//
// Per buffer: the last writer (queue, command) and, per queue, the last
// reader since that write. A read waits for the writer if it runs on another
// queue. A write waits for the writer and for EVERY reader since that write on
// other queues (keeping only the last user would be a WAR race). Waits that are
// already satisfied — a command of the same in-order queue, or a completed
// one — are dropped. Tracking persists across windows.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sched/ids.hpp"
#include "sched/scratch_list.hpp"

namespace uvcl::sched {

// The queue of a command that runs on no in-order queue (a user event the
// engine completes: a staged cross-device copy, a held copy): never "the
// same queue", and never after another such command.
inline constexpr QueueIndex kNoQueue = 0xffffffffu;

struct Slot {
  CommandId id = 0;
  QueueIndex queue = 0;
  std::uint64_t finish_ns = 0;  // when the command is expected to end (queue_choice.hpp)
};

// Lives inside the engine's buffer record: no second lookup per access.
struct BufferHazards {
  std::optional<Slot> writer;
  // At most one per queue: the last reader there; and each reader on no
  // queue (nothing orders those). Mostly one (a buffer read on one queue),
  // kept inline: a new buffer's first reader allocates nothing.
  ScratchList<Slot, 1> readers;

  bool empty() const { return !writer && readers.empty(); }
};

// A sorted, duplicate-free list of commands to wait for. Mostly a few:
// kept inline, so a wait across queues allocates nothing.
class WaitList {
 public:
  void add(CommandId id);
  std::span<const CommandId> ids() const { return ids_.span(); }
  std::vector<CommandId> to_vector() const { return {ids_.begin(), ids_.end()}; }
  bool empty() const { return ids_.empty(); }
  void clear() { ids_.clear(); }

 private:
  ScratchList<CommandId, 8> ids_;
};

class Hazards {
 public:
  explicit Hazards(EventRefs& refs) : refs_(refs) {}

  // Adds to `out` what a command on `queue` that reads (or, if `write`,
  // writes) the buffer must wait for; to `done`, if given, the producers on
  // other queues whose wait is dropped because they have completed.
  void collect_waits(const BufferHazards& b, bool write, QueueIndex queue, WaitList& out,
                     WaitList* done = nullptr) const;
  // Records that submitted command `id` on `queue`, expected to end at
  // `finish_ns`, read/wrote the buffer.
  void record(BufferHazards& b, bool write, CommandId id, QueueIndex queue, std::uint64_t finish_ns = 0);
  // True when every tracked use of the buffer has completed.
  bool uses_complete(const BufferHazards& b) const;
  // Drops every slot (the buffer is freed or wholly rewritten).
  void clear(BufferHazards& b);

 private:
  void wait_for(const Slot& s, QueueIndex queue, WaitList& out, WaitList* done) const {
    if (s.queue == queue && s.queue != kNoQueue) return;  // in order on its own queue
    if (!refs_.is_complete(s.id)) out.add(s.id);
    else if (done) done->add(s.id);
  }
  EventRefs& refs_;
};

}  // namespace uvcl::sched
