#include "sched/queue_choice.hpp"

#include <algorithm>
#include <optional>

namespace uvcl::sched {
namespace {

bool has_reader_on(const BufferHazards& b, QueueIndex q) {
  return std::any_of(b.readers.begin(), b.readers.end(), [&](const Slot& r) { return r.queue == q; });
}

bool readers_pending_elsewhere(const BufferHazards& b, QueueIndex q, const EventRefs& refs) {
  return std::any_of(b.readers.begin(), b.readers.end(),
                     [&](const Slot& r) { return r.queue != q && !refs.is_complete(r.id); });
}

// The one compute queue every still-running reader of `b` is on, if there is
// one: a writer placed there waits for none of them.
std::optional<QueueIndex> pending_readers_queue(const BufferHazards& b, std::size_t queues, const EventRefs& refs) {
  std::optional<QueueIndex> q;
  for (const Slot& r : b.readers) {
    if (refs.is_complete(r.id)) continue;
    if (r.queue >= queues || (q && *q != r.queue)) return std::nullopt;
    q = r.queue;
  }
  return q;
}

}  // namespace

QueueIndex choose_queue(std::span<const AccessView> accesses, std::span<const std::uint32_t> load,
                        const EventRefs& refs) {
  return continued_queue(accesses, load.size(), refs).value_or(least_loaded(load));
}

std::optional<QueueIndex> continued_queue(std::span<const AccessView> accesses, std::size_t queues,
                                          const EventRefs& refs) {
  for (const AccessView& a : accesses) {
    const BufferHazards& b = *a.hazards;
    if (!b.writer || refs.is_complete(b.writer->id)) {
      // Overwriting what one queue still reads (a buffer reused each pass
      // of a model): follow the readers rather than wait for them.
      if (a.write)
        if (auto q = pending_readers_queue(b, queues, refs)) return *q;
      continue;
    }
    const QueueIndex q = b.writer->queue;
    if (q >= queues) continue;  // not a compute queue: nothing to continue
    // First consumer on the producer's queue: continue the chain there. An
    // in-place update (write) continues it too unless readers elsewhere are
    // still running, which it would wait for anyway.
    if (!a.write && !has_reader_on(b, q)) return q;
    if (a.write && !readers_pending_elsewhere(b, q, refs)) return q;
  }
  return std::nullopt;
}

QueueIndex least_loaded(std::span<const std::uint32_t> load) {
  return static_cast<QueueIndex>(std::min_element(load.begin(), load.end()) - load.begin());
}

}  // namespace uvcl::sched
