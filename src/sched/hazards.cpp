#include "sched/hazards.hpp"

#include <algorithm>

namespace uvcl::sched {

void WaitList::add(CommandId id) {
  const CommandId* at = std::lower_bound(ids_.begin(), ids_.end(), id);
  if (at != ids_.end() && *at == id) return;
  const std::size_t i = static_cast<std::size_t>(at - ids_.begin());
  ids_.push_back(id);  // then moved into place: the list stays sorted
  std::rotate(ids_.begin() + i, ids_.end() - 1, ids_.end());
}

void Hazards::collect_waits(const BufferHazards& b, bool write, QueueIndex queue, WaitList& out,
                            WaitList* done) const {
  if (b.writer) wait_for(*b.writer, queue, out, done);
  if (!write) return;
  for (const Slot& r : b.readers) wait_for(r, queue, out, done);
}

void Hazards::record(BufferHazards& b, bool write, CommandId id, QueueIndex queue, std::uint64_t finish_ns) {
  if (write) {
    clear(b);
    b.writer = Slot{id, queue, finish_ns};
    return;
  }
  if (queue != kNoQueue) {  // nothing orders commands on no queue: each keeps its slot
    for (Slot& r : b.readers) {
      if (r.queue == queue) {
        r = Slot{id, queue, finish_ns};
        return;
      }
    }
  }
  b.readers.push_back(Slot{id, queue, finish_ns});
}

bool Hazards::uses_complete(const BufferHazards& b) const {
  if (b.writer && !refs_.is_complete(b.writer->id)) return false;
  return std::all_of(b.readers.begin(), b.readers.end(),
                     [&](const Slot& r) { return refs_.is_complete(r.id); });
}

void Hazards::clear(BufferHazards& b) {
  b.writer.reset();
  b.readers.clear();
}

}  // namespace uvcl::sched
